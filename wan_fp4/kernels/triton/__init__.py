"""Portable Triton FP8 kernels (fp8 and direct-p attention); see attention.py."""
from .attention import SUPPORTED_HEAD_DIMS, SUPPORTED_MODES, is_supported, triton_attention

__all__ = ["SUPPORTED_HEAD_DIMS", "SUPPORTED_MODES", "is_supported", "triton_attention"]
