"""Compile the sm100a kernel with the CuTe DSL (works without a GPU: fake null pointers)."""
from __future__ import annotations

import functools
import os

ARCH = "sm_100a"


def compile_options(extra: str = "") -> str:
    # Always name the arch: with no GPU (or in forked workers) the DSL silently picks a default.
    return f"--gpu-arch {ARCH} {extra}".strip()


@functools.lru_cache(maxsize=None)
def compile_kernel(kv_stages: int = 3, extra_options: str = "", pv_qk_sync: bool = False):
    """cute.compile the kernel for sm_100a; returns the JitCompiledFunction.

    Shapes and scalars are runtime arguments, so one compile serves every (B, S, H) with D = 128.
    pv_qk_sync: the kernel's debug option (kernel.DirectPFP4Sm100); the prebuilt kernel is the
    default (off).
    """
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr
    import cuda.bindings.driver as cuda

    from .kernel import DirectPFP4Sm100

    def ptr(dtype, align=16):
        return make_ptr(dtype, 0, cute.AddressSpace.gmem, assumed_align=align)

    kern = DirectPFP4Sm100(kv_stages=kv_stages, pv_qk_sync=pv_qk_sync)
    i32 = cutlass.Int32(1)
    f32 = cutlass.Float32(1.0)
    stream = cuda.CUstream(0)
    return cute.compile(
        kern,
        ptr(cutlass.Float4E2M1FN, 32), ptr(cutlass.Float8E4M3FN),
        ptr(cutlass.Float4E2M1FN, 32), ptr(cutlass.Float8E4M3FN),
        ptr(cutlass.Float4E2M1FN, 32), ptr(cutlass.Float8E8M0FNU),
        ptr(cutlass.BFloat16), ptr(cutlass.Float32), ptr(cutlass.Float32),
        i32, i32, i32, i32, i32, i32, i32,
        f32, f32, f32, f32,
        i32,
        stream,
        options=compile_options(extra_options),
    )


def compile_artifacts(dump_dir: str, kv_stages: int = 3, pv_qk_sync: bool = False) -> tuple[str, bytes]:
    """Compile into dump_dir keeping the PTX and cubin; returns (ptx text, cubin bytes)."""
    os.makedirs(dump_dir, exist_ok=True)
    compile_kernel(kv_stages, f"--keep-ptx --keep-cubin --dump-dir {dump_dir}", pv_qk_sync)
    names = os.listdir(dump_dir)
    ptx = [n for n in names if n.endswith(f".{ARCH}.ptx")]
    cubin = [n for n in names if n.endswith(f".{ARCH}.cubin")]
    if len(ptx) != 1 or len(cubin) != 1:
        raise RuntimeError(f"expected one .ptx and one .cubin in {dump_dir}, found {sorted(names)}")
    with open(os.path.join(dump_dir, ptx[0])) as f:
        text = f.read()
    with open(os.path.join(dump_dir, cubin[0]), "rb") as f:
        blob = f.read()
    return text, blob
