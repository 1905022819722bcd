"""Runtime launch of the sm100a kernel on a CUDA sm_100 device (never exercised: no GPU).

The prebuilt (AOT) kernel is used when its manifest matches the kernel sources (aot.py), else
the kernel is JIT-compiled by the CuTe DSL on first use. Both take the same arguments.
"""
from __future__ import annotations

import torch


def _check(ops, out: torch.Tensor, denom: torch.Tensor) -> tuple:
    if out.dtype != torch.bfloat16 or not out.is_contiguous():
        raise ValueError("out must be a contiguous bfloat16 tensor")
    if denom.dtype != torch.float32 or not denom.is_contiguous():
        raise ValueError("denom must be a contiguous float32 tensor")
    tensors = (ops.q, ops.sfq, ops.k, ops.sfk, ops.vt, ops.sfv)
    for t in tensors:
        if not (t.is_cuda and t.is_contiguous()):
            raise ValueError("prepared operands must be contiguous CUDA tensors")
    # the kernel was compiled assuming these alignments (compile.py); nothing checks them later
    for t, align in zip((*tensors, out, denom), (32, 16, 32, 16, 32, 16, 16, 16)):
        if t.data_ptr() % align:
            raise ValueError(f"kernel operands must be {align}-byte aligned")
    return tensors


def scalar_args(args) -> tuple:
    """The kernel's scalar arguments in wrapper order (after the 8 pointers, before the stream)."""
    return (args.seq_q, args.seq_kv, args.batch, args.heads, args.sq_pad, args.skv_pad,
            args.qk_log2, args.affine_ac, args.affine_a, args.affine_b, args.num_ctas)


def launch(ops, args, out: torch.Tensor, denom: torch.Tensor, *, prebuilt: bool | None = None) -> None:
    """Run the kernel on the current CUDA stream: BF16 (B, Sq, H, 128) into `out`, and each row's
    FP32 denominator sum 2^(e - L) q into `denom` (B*H, Sq).

    prebuilt: None = the AOT kernel when usable, else JIT; True = require the AOT kernel;
    False = always JIT."""
    tensors = _check(ops, out, denom)
    raw_stream = torch.cuda.current_stream(out.device).cuda_stream
    run = None
    if prebuilt is not False:
        from .aot import prebuilt_launcher

        run = prebuilt_launcher()
    if prebuilt and run is None:
        raise RuntimeError("no usable prebuilt sm100a kernel (see the wan_fp4.sm100 log)")
    if run is not None:
        ptrs = tuple(t.data_ptr() for t in (*tensors, out, denom))
        with torch.cuda.device(out.device):
            err = run(*ptrs, *scalar_args(args), raw_stream)
        if err != 0:
            raise RuntimeError(f"prebuilt sm100a kernel launch failed with error {err}")
        return
    _launch_jit(tensors, args, out, denom, raw_stream)


def _launch_jit(tensors, args, out, denom, raw_stream) -> None:
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr
    import cuda.bindings.driver as cuda

    from .compile import compile_kernel

    q, sfq, k, sfk, vt, sfv = tensors
    fp4, e4m3, e8m0 = cutlass.Float4E2M1FN, cutlass.Float8E4M3FN, cutlass.Float8E8M0FNU

    def ptr(dtype, t, align=16):
        return make_ptr(dtype, t.data_ptr(), cute.AddressSpace.gmem, assumed_align=align)

    kernel = compile_kernel()
    kernel(
        ptr(fp4, q, 32), ptr(e4m3, sfq), ptr(fp4, k, 32), ptr(e4m3, sfk),
        ptr(fp4, vt, 32), ptr(e8m0, sfv), ptr(cutlass.BFloat16, out), ptr(cutlass.Float32, denom),
        *scalar_args(args), cuda.CUstream(raw_stream),
    )
