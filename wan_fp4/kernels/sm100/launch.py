"""Runtime launch of the JIT-compiled kernel on a CUDA sm_100 device (never exercised: no GPU)."""
from __future__ import annotations

import torch

from .compile import compile_kernel


def launch(ops, args, out: torch.Tensor, denom: torch.Tensor) -> None:
    """Run the kernel on the current CUDA stream: BF16 (B, Sq, H, 128) into `out`, and each row's
    FP32 denominator sum 2^(e - L) q into `denom` (B*H, Sq)."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr
    import cuda.bindings.driver as cuda

    if out.dtype != torch.bfloat16 or not out.is_contiguous():
        raise ValueError("out must be a contiguous bfloat16 tensor")
    if denom.dtype != torch.float32 or not denom.is_contiguous():
        raise ValueError("denom must be a contiguous float32 tensor")
    tensors = (ops.q, ops.sfq, ops.k, ops.sfk, ops.vt, ops.sfv)
    for t in tensors:
        if not (t.is_cuda and t.is_contiguous()):
            raise ValueError("prepared operands must be contiguous CUDA tensors")
    fp4, e4m3, e8m0 = cutlass.Float4E2M1FN, cutlass.Float8E4M3FN, cutlass.Float8E8M0FNU

    def ptr(dtype, t, align=16):
        return make_ptr(dtype, t.data_ptr(), cute.AddressSpace.gmem, assumed_align=align)

    kernel = compile_kernel()
    stream = cuda.CUstream(torch.cuda.current_stream(out.device).cuda_stream)
    kernel(
        ptr(fp4, ops.q, 32), ptr(e4m3, ops.sfq), ptr(fp4, ops.k, 32), ptr(e4m3, ops.sfk),
        ptr(fp4, ops.vt, 32), ptr(e8m0, ops.sfv), ptr(cutlass.BFloat16, out), ptr(cutlass.Float32, denom),
        args.seq_q, args.seq_kv, args.batch, args.heads, args.sq_pad, args.skv_pad,
        args.qk_log2, args.affine_ac, args.affine_a, args.affine_b, args.num_ctas, stream,
    )
