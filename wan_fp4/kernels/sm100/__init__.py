"""Blackwell (sm100a) Direct-P FP4 attention: the paper's kernel design in the CuTe DSL.

Status: compiled for sm_100a and its PTX inspected on a machine with no GPU; it has never run
on hardware. `scripts/verify_sm100.py` (`wan-fp4 check --kernels sm100-cute`) is the one command a B200/GB200
owner runs to check it against `wan_fp4.reference.attention(..., mode="direct-p-fp4")`;
`scripts/bench_sm100.py` times it.

The kernel ships prebuilt (AOT, wan_fp4/kernels/prebuilt/sm100a, loaded through a C shim: see
aot.py) and is JIT-compiled instead when the prebuilt one does not match the sources. Importing
this package needs only torch; the CuTe DSL is imported when a kernel is compiled.
"""
from __future__ import annotations

import importlib.util

import torch

from ...modes import FP4Params, check_mode
from ..registry import KernelSpec
from .launch import LaunchArgs, build_launch_args, lse_from_denominator, run  # noqa: F401 - the host side
from .pack import HEAD_DIM, prepare_operands

MODE = "direct-p-fp4"
SUPPORTED_CAPABILITY = (10, 0)  # sm_100a code runs on sm_100 only (not sm_103 / sm_120)

__all__ = ["SPEC", "sm100_attention", "is_supported", "LaunchArgs", "build_launch_args", "prepare_operands"]


def is_supported(q, k, v, mode: str = MODE, fp4: FP4Params | None = None) -> tuple[bool, str]:
    """(True, "") when sm100_attention can run these inputs here, else (False, why)."""
    if mode != MODE:
        return False, f"the sm100 FP4 kernel implements mode {MODE!r} only, not {mode!r}"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            return False, f"{name} is not a torch.Tensor"
        if t.dim() != 4:
            return False, f"{name} must be (B, S, H, D), got shape {tuple(t.shape)}"
        if t.dtype not in (torch.bfloat16, torch.float16, torch.float32):
            return False, f"{name} has dtype {t.dtype}; expected bfloat16/float16/float32"
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2] or q.shape[3] != k.shape[3]:
        return False, f"shapes do not match: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if q.shape[1] == 0 or k.shape[1] == 0 or q.shape[0] * q.shape[2] == 0:
        return False, f"empty input: q {tuple(q.shape)}, k {tuple(k.shape)}"
    return supports(q, k, v, mode, fp4)


def supports(q, k, v, mode: str = MODE, fp4: FP4Params | None = None) -> tuple[bool, str]:
    """The spec's question, on inputs dispatch has validated (is_supported adds the shape checks).
    Every FP4 map is supported (the guard is implemented), so `fp4` is not consulted."""
    if mode != MODE:
        return False, f"the sm100 FP4 kernel implements mode {MODE!r} only, not {mode!r}"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.device.type != "cuda":
            return False, f"{name} is on {t.device}, not a CUDA device"
    if q.shape[-1] != HEAD_DIM:
        return False, f"head dim {q.shape[-1]} is not supported (only {HEAD_DIM})"
    cap = torch.cuda.get_device_capability(q.device)
    if cap != SUPPORTED_CAPABILITY:
        return False, f"device capability sm_{cap[0]}{cap[1]} is not sm_100 (B200/GB200)"
    if importlib.util.find_spec("cutlass") is None:
        from .aot import NAME, PREBUILT

        if PREBUILT.find(NAME, build=False) is None:
            return False, "nvidia-cutlass-dsl is not installed and no prebuilt sm100a kernel is built"
    return True, ""


def sm100_attention(q, k, v, mode: str = MODE, scale: float | None = None,
                    fp4: FP4Params = FP4Params(), return_lse: bool = False):
    """Direct-P FP4 attention on sm100a. q, k, v: (B, S, H, 128); returns (B, Sq, H, 128) in q's dtype.

    return_lse: also return the natural-log LSE (B, H, Sq) float32 of the represented
    probabilities, m * scale + ln2 log2(l) with l = sum 2^e q / 6 and m = 0 (shiftless) or the
    guard's row reference (fp4.guard_margin set: computed by a torch pre-pass on the GPU from
    the same dequantised operands as the reference, pack.guard_row_reference).
    """
    check_mode(mode)
    ok, why = is_supported(q, k, v, mode, fp4)
    if not ok:
        raise RuntimeError(f"sm100_attention cannot run here: {why}")
    out, lse = run(q, k, v, mode, scale, fp4, return_lse)
    return (out, lse) if return_lse else out


SPEC = KernelSpec("sm100-cute", (MODE,), SUPPORTED_CAPABILITY, (HEAD_DIM,), supports, run, same_major=True)
