"""Compiling the sm90 kernel: JIT with an in-process cache, and CPU-only compiles for checks/AOT.

The kernel takes raw pointers and Int32 sizes, so one compile serves every (B, H, S_q, S_kv) of a
(mode, D, config): the cache key is exactly those compile-time parameters plus the arch.
"""
from __future__ import annotations

import os
import threading

ARCH = "sm_90a"
_cache: dict = {}
_lock = threading.Lock()


def _args(ptrs=None, sizes=None, c=1.0, stream=None):
    """The kernel's arguments: q8 (or BF16 Q), k8, vt, o, lse, q_scale, k_scale, v_scale, the split
    workspace and tickets, the range statistics (pointers); b, h, s_q, s_kv, split, segments; c; the
    stream."""
    import cutlass
    from cutlass import Float32, Int32
    from cutlass.cute.runtime import make_ptr
    from cutlass.cute.typing import AddressSpace

    f8, f32, bf16, i32 = cutlass.Float8E4M3FN, cutlass.Float32, cutlass.BFloat16, cutlass.Int32
    dtypes = (f8, f8, f8, bf16, f32, f32, f32, f32, f32, i32, i32)
    ptrs = ptrs or (0,) * len(dtypes)
    # the tickets and range statistics are words (the statistics raised as unsigned words: see
    # kernel.publish_q_scale); every other operand starts on a 16-byte boundary (host.launch)
    p = [make_ptr(dt, int(a), AddressSpace.gmem, assumed_align=4 if dt is i32 else 16) for dt, a in zip(dtypes, ptrs)]
    sizes = sizes or (1, 1, 128, 128, 0, 1)
    if stream is None:
        from cutlass.cute.runtime import make_fake_stream

        stream = make_fake_stream()
    return (*p, *(Int32(x) for x in sizes), Float32(c), stream)


def runtime_args(tensors, sizes, c, stream):
    """Arguments of a compiled kernel for real tensors (data pointers, Int32 sizes and the split
    plan, c, stream)."""
    return _args(tuple(t.data_ptr() for t in tensors), sizes, c, stream)


def compile_kernel(mode: str, head_dim: int, *, options: str = "", **config):
    """Compile (cached) for sm_90a; works without a GPU. Returns the DSL's compiled object.
    config: Sm90Attention's keyword options over default_config(mode, head_dim)."""
    from . import default_config

    cfg = default_config(mode, head_dim, config)
    key = (mode, head_dim, tuple(sorted(cfg.items())), ARCH, options)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            return hit
        import cutlass.cute as cute

        from .kernel import Sm90Attention

        kern = Sm90Attention(mode, head_dim, **cfg)
        compiled = cute.compile(kern, *_args(), options=f"--gpu-arch {ARCH} {options}".strip())
        _cache[key] = compiled
        return compiled


def ptx_of(compiled) -> str:
    """PTX text (compile with --keep-ptx). With --dump-dir the DSL returns the file's path instead."""
    ptx = compiled.__ptx__
    if ptx is not None and "\n" not in ptx and os.path.isfile(ptx):
        return open(ptx).read()
    return ptx


def cubin_of(compiled) -> bytes:
    cubin = compiled.__cubin__
    if isinstance(cubin, str) and os.path.isfile(cubin):
        return open(cubin, "rb").read()
    return cubin
