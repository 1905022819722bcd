"""Fast exact emulation of direct-p-fp4 for GPUs without FP4 tensor cores (Hopper), in Triton.

`fp4_emulation_attention` computes what `reference.attention(..., "direct-p-fp4")` computes,
with the same codes and scales; only the FP32 accumulation order of the two matrix products
differs. Operands come from the reference's own `formats` functions; the P map runs in the
kernel (fp4_kernel.py says how and why it is exact).

Dispatch: `is_supported` is True only for CUDA tensors (sm80+, BF16 tensor cores) with Triton
importable. Under TRITON_INTERPRET=1 the same kernel also runs on CPU tensors, for the tests;
the interpreter cannot multiply BF16 (it multiplies the raw 16-bit patterns), so there the
operands are passed as FP32 holding the same BF16-exact values.
"""
from __future__ import annotations

import os

import torch

from ...modes import MAX_HEAD_DIM, MODES, FP4Params
from ..registry import KernelSpec
from . import host
from .host import _DEFAULT, check_overflow, launch, prepare_operands, run  # noqa: F401 - the host side

SUPPORTED_MODES = ("direct-p-fp4",)
# Offered on every CUDA GPU: `supports` names sm80 (BF16 tensor cores) as the floor when refusing.
CAPABILITY = (0, 0)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def is_supported(q, k, v, mode, fp4=None) -> tuple[bool, str]:
    """Whether `fp4_emulation_attention` runs these inputs on the GPU, and if not, why.
    Every FP4 map (affine, guard) is supported, so `fp4` is not consulted."""
    why = _check_inputs(q, k, v)
    if why:
        return False, why
    return supports(q, k, v, mode, fp4)


def supports(q, k, v, mode, fp4=None) -> tuple[bool, str]:
    """The spec's question, on inputs dispatch has validated (is_supported adds the input checks)."""
    why = _kernel_reason(q, mode) or _device_reason(q)
    return not why, why


def _kernel_reason(q, mode) -> str:
    """Why the kernel cannot compute this mode and head dim at all ("" if it can)."""
    if mode not in SUPPORTED_MODES:
        if mode not in MODES:
            return f"mode must be one of {MODES}, got {mode!r}"
        return f"mode {mode!r} is not emulated here (only {SUPPORTED_MODES})"
    d = q.shape[-1]
    if d % 2 or d > MAX_HEAD_DIM or d == 0:
        return f"head dim {d} must be even and at most {MAX_HEAD_DIM}"
    if host.IMPORT_ERROR is not None:
        return f"triton is not importable ({host.IMPORT_ERROR})"
    return ""


def _device_reason(q) -> str:
    if not q.is_cuda:
        return f"tensors are on {q.device}, the kernel needs CUDA (the torch reference runs elsewhere)"
    if torch.cuda.get_device_capability(q.device) < (8, 0):
        return "BF16 tensor cores need sm80 or newer"
    return ""


def _check_inputs(q, k, v) -> str:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            return f"{name} must be a 4-d tensor (B, S, H, D)"
        if t.dtype not in (torch.bfloat16, torch.float16, torch.float32):
            return f"{name} dtype {t.dtype} is not bf16, fp16 or fp32"
        if t.device != q.device:
            return f"{name} is on {t.device}, q on {q.device}"
    if k.shape != v.shape:
        return f"k {tuple(k.shape)} and v {tuple(v.shape)} must have the same shape"
    if q.shape[0] != k.shape[0] or q.shape[2:] != k.shape[2:]:
        return f"q {tuple(q.shape)} and k {tuple(k.shape)} must agree in B, H and D"
    if q.shape[1] == 0 or k.shape[1] == 0:
        return "empty sequence"
    return ""


def fp4_emulation_attention(q, k, v, mode="direct-p-fp4", scale=None, *, fp4: FP4Params | None = None,
                            return_lse=False, _launch_options=None):
    """direct-p-fp4 attention of q (B,Sq,H,D) over k, v (B,Skv,H,D) -> out (B,Sq,H,D) in q.dtype
    [, lse (B,H,Sq) float32, natural log, as `reference.attention(..., return_lse=True)`].

    Runs on CUDA (see is_supported), or on CPU under TRITON_INTERPRET=1. With float32 inputs
    the output is the FP32 result before any BF16 rounding.
    """
    why = _check_inputs(q, k, v) or _kernel_reason(q, mode)
    if not why and not (q.is_cuda or (_interpreting() and q.device.type == "cpu")):
        why = f"tensors on {q.device} need CUDA (or TRITON_INTERPRET=1 on CPU)"
    if not why and q.is_cuda:
        why = _device_reason(q)
    if why:
        raise ValueError(f"fp4_emulation_attention cannot run this call: {why}")
    out, lse = run(q, k, v, mode, scale, fp4, return_lse, _launch_options)
    return (out, lse) if return_lse else out


SPEC = KernelSpec("fp4-emulation", SUPPORTED_MODES, CAPABILITY, None, supports, run)

__all__ = ["SPEC", "SUPPORTED_MODES", "check_overflow", "fp4_emulation_attention", "is_supported", "launch",
           "prepare_operands"]
