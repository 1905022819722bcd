"""Portable Triton FP8 kernels (fp8 and direct-p attention); see attention.py.

SPEC is the kernel's entry in dispatch's registry (kernels/registry.py); without Triton it is an
entry that refuses every call with the import error.
"""
from ...modes import FP8_MODES
from ..registry import KernelSpec, unavailable

CAPABILITY = (8, 9)  # FP8 tensor cores

try:
    from .attention import SUPPORTED_HEAD_DIMS, SUPPORTED_MODES, is_supported, run, supports, triton_attention
except ImportError as exc:  # triton is optional: dispatch then keeps the other kernels
    SPEC = unavailable("triton", FP8_MODES, CAPABILITY, f"wan_fp4.kernels.triton could not be imported: {exc}")
else:
    SPEC = KernelSpec("triton", SUPPORTED_MODES, CAPABILITY, SUPPORTED_HEAD_DIMS, supports, run)

__all__ = ["SPEC", "SUPPORTED_HEAD_DIMS", "SUPPORTED_MODES", "is_supported", "triton_attention"]
