"""sm_90a (H100/H200) CuTe DSL attention for modes "direct-p" and "fp8" (docs/ARCHITECTURE.md, "Kernel families").

    sm90_attention(q, k, v, mode, scale=None, *, return_lse=False) -> out (B, S_q, H, D)
    is_supported(q, k, v, mode) -> (bool, reason)
    SPEC: the kernel's entry in dispatch's registry (kernels/registry.py)

q, k, v are (B, S, H, D) BF16/FP16 CUDA tensors. Quantisation is prepare.py's pre-pass, which
writes V^T straight into this kernel's layout (layout.py). The kernel is JIT-compiled once per
(mode, D, config) and cached in-process (compile.py), unless a prebuilt (AOT) kernel of that
(mode, D, config) is available (aot.py: C shim + ctypes; the package ships each mode's default).
"""
from __future__ import annotations

import importlib.util
from functools import lru_cache

import torch

from ..registry import KernelSpec
from .config import (DEFAULT_CONFIG, HEAD_DIM_CONFIG, MODE_CONFIG, MODE_ONLY, SHORT_CONFIG, applies,  # noqa: F401
                     default_config, default_kernels, launch_configs, length_config)  # the family's options
from .host import launch, lse_shift, run  # noqa: F401 - the host side, for scripts and the spec

SUPPORTED_MODES = ("direct-p", "fp8")
SUPPORTED_HEAD_DIMS = (64, 128)
CAPABILITY = (9, 0)  # sm_90a code runs on sm_90 only
_GRID_YZ_MAX = 65535  # CUDA's limit on gridDim.y (heads) and gridDim.z (batch)


def _dsl_available() -> bool:
    return importlib.util.find_spec("cutlass") is not None


def shape_reason(b: int, h: int, s_q: int, s_kv: int) -> str:
    """Why the kernel cannot take this problem size ("" if it can). Every offset past one row is
    64-bit (kernel.py), so size alone never falls back; the grid has one CTA per (query tile,
    head, batch element)."""
    if s_q < 1 or s_kv < 1:
        return "empty sequence"
    if h > _GRID_YZ_MAX or b > _GRID_YZ_MAX:
        return f"sm90 kernel launches one CTA per (head, batch): needs H, B <= {_GRID_YZ_MAX}, got H={h} B={b}"
    return ""


def is_supported(q, k, v, mode, fp4=None) -> tuple[bool, str]:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return False, "q, k, v must be 4-D (B, S, H, D)"
    b, s_q, h, d = q.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[2] != h or k.shape[3] != d:
        return False, f"k, v must be (B, S_kv, H, D) matching q {tuple(q.shape)}; got {tuple(k.shape)}, {tuple(v.shape)}"
    return supports(q, k, v, mode, fp4)


def supports(q, k, v, mode, fp4=None) -> tuple[bool, str]:
    """The spec's question, on inputs dispatch has validated (is_supported adds the shape checks)."""
    if mode not in SUPPORTED_MODES:
        return False, f"sm90 kernel serves modes {SUPPORTED_MODES}, not {mode!r}"
    if not (q.is_cuda and k.is_cuda and v.is_cuda):
        return False, "sm90 kernel needs CUDA tensors"
    if torch.cuda.get_device_capability(q.device) != CAPABILITY:
        return False, f"sm90 kernel needs compute capability 9.0, got {torch.cuda.get_device_capability(q.device)}"
    b, s_q, h, d = q.shape
    if d not in SUPPORTED_HEAD_DIMS:
        return False, f"sm90 kernel supports head dim {SUPPORTED_HEAD_DIMS}, got {d}"
    if q.dtype not in (torch.bfloat16, torch.float16):
        return False, f"q must be bfloat16 or float16, got {q.dtype}"
    why = shape_reason(b, h, s_q, k.shape[1])
    if why:
        return False, why
    return source_reason(mode, d)


@lru_cache(maxsize=None)
def source_reason(mode: str, head_dim: int) -> tuple[bool, str]:
    """Whether the kernels for (mode, D) can be had: the DSL to JIT them, or usable prebuilt objects,
    whose shim is linked here on first use (a fresh machine has none linked yet). Asked on every
    call, answered once per process: without the DSL, finding the prebuilt object reads and hashes
    the kernel sources."""
    if not _dsl_available():
        from .aot import find

        # every kernel a launch may pick (default_kernels: split and plain kernels, short launches')
        if any(find(mode, head_dim, cfg) is None for cfg in default_kernels(mode, head_dim)):
            return False, "nvidia-cutlass-dsl (cutlass) is not installed and no prebuilt kernel is usable"
    return True, ""


def sm90_attention(q, k, v, mode, scale=None, *, return_lse=False, fp4=None, config=None, prebuilt=None):
    # fp4: the FP4 map, which dispatch hands every kernel; unused by the FP8 modes served here
    ok, why = is_supported(q, k, v, mode)
    if not ok:
        raise ValueError(f"sm90_attention: {why}")
    out, lse = run(q, k, v, mode, scale, fp4, return_lse, config=config, prebuilt=prebuilt)
    return (out, lse) if return_lse else out


SPEC = KernelSpec("sm90-cute", SUPPORTED_MODES, CAPABILITY, SUPPORTED_HEAD_DIMS, supports, run, same_major=True)
