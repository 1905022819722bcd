"""Blackwell (sm100a) Direct-P FP4 attention: the paper's kernel design in the CuTe DSL.

Status: compiled for sm_100a and its PTX inspected on a machine with no GPU; it has never run
on hardware. `scripts/verify_sm100.py` is the one command a B200/GB200 owner runs to check it
against `wan_fp4.reference.attention(..., mode="direct-p-fp4")` and time it.

The kernel ships prebuilt (AOT, wan_fp4/kernels/prebuilt/sm100a, loaded through a C shim: see
aot.py) and is JIT-compiled instead when the prebuilt one does not match the sources. Importing
this package needs only torch; the CuTe DSL is imported when a kernel is compiled.
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass

import torch

from ... import reference
from ..registry import KernelSpec
from ...modes import FP4_SCALE_SHIFT, LN2, FP4Params, check_mode, default_scale
from .pack import HEAD_DIM, SM100Operands, prepare_operands

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


@dataclass(frozen=True)
class LaunchArgs:
    """The kernel's scalar arguments, computed once on the host (FP32 exactly as the reference)."""

    seq_q: int
    seq_kv: int
    batch: int
    heads: int
    sq_pad: int
    skv_pad: int
    guard: int  # 1: the large-logit guard (the kernel reads ops.m), 0: shiftless
    qk_log2: float  # c = reference.log2_scale(scale)
    affine_ac: float  # fl(A * c)
    affine_a: float
    affine_b: float
    num_ctas: int


def _f32(x: float) -> float:
    return torch.tensor(x, dtype=torch.float32).item()


def build_launch_args(ops: SM100Operands, scale: float, fp4: FP4Params, num_sms: int) -> LaunchArgs:
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"scale must be a positive finite number, got {scale}")
    if num_sms < 1:
        raise ValueError(f"num_sms must be >= 1, got {num_sms}")
    guard = fp4.guard_margin is not None
    if guard != (ops.m is not None):
        raise ValueError("fp4.guard_margin and the prepared operands disagree: prepare them with "
                         "prepare_operands(q, k, v, guard_margin=fp4.guard_margin)")
    a, b = (_f32(x) for x in fp4.affine)
    c = reference.log2_scale(scale)
    work = (ops.sq_pad // 256) * ops.batch * ops.heads  # a work item: two 128-row query tiles
    return LaunchArgs(ops.seq_q, ops.seq_kv, ops.batch, ops.heads, ops.sq_pad, ops.skv_pad, int(guard),
                      c, _f32(a * c), a, b, max(1, min(num_sms, work)))


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


def run(q, k, v, mode: str = MODE, scale: float | None = None, fp4: FP4Params | None = None,
        return_lse: bool = False):
    """The spec's run, on inputs `supports` accepted: (out in q's dtype, LSE or None)."""
    from .launch import launch

    fp4 = fp4 or FP4Params()
    ops = prepare_operands(q, k, v, guard_margin=fp4.guard_margin)
    scale = default_scale(HEAD_DIM) if scale is None else scale
    num_sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    args = build_launch_args(ops, scale, fp4, num_sms)
    out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
    denom = torch.empty(ops.batch * ops.heads, ops.seq_q, dtype=torch.float32, device=q.device)
    launch(ops, args, out, denom)
    out = out.to(q.dtype)
    if not return_lse:
        return out, None
    m = None if ops.m is None else ops.m.view(ops.batch, ops.heads, ops.seq_q)
    return out, lse_from_denominator(denom.view(ops.batch, ops.heads, ops.seq_q), m, scale)


def lse_from_denominator(denom: torch.Tensor, m: torch.Tensor | None = None,
                         scale: float | None = None) -> torch.Tensor:
    """LSE from the kernel's per-row sum 2^(e - L) q: m scale + ln2 (log2(sum / 6) + L), as the
    reference (m: the guard's row reference (B, H, Sq), None = shiftless m = 0)."""
    lse = LN2 * (torch.log2(denom / 6.0) + FP4_SCALE_SHIFT)
    if m is None:
        return lse
    if scale is None:
        raise ValueError("lse_from_denominator: the guard's m needs the score scale")
    return m * scale + lse


SPEC = KernelSpec("sm100-cute", (MODE,), SUPPORTED_CAPABILITY, (HEAD_DIM,), supports, run, same_major=True)
