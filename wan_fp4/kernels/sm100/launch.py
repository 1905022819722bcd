"""Runtime launch of the sm100a kernel on a CUDA sm_100 device (never exercised: no GPU).

The prebuilt (AOT) kernel is used when its manifest matches the kernel sources (aot.py), else
the kernel is JIT-compiled by the CuTe DSL on first use. Both take the same arguments.
"""
from __future__ import annotations

import torch

from ..aot import run_prebuilt_or_jit
from .aot import prebuilt_launcher


def _check(ops, out: torch.Tensor, denom: torch.Tensor) -> tuple:
    if out.dtype != torch.bfloat16 or not out.is_contiguous():
        raise ValueError("out must be a contiguous bfloat16 tensor")
    if denom.dtype != torch.float32 or not denom.is_contiguous():
        raise ValueError("denom must be a contiguous float32 tensor")
    tensors = (ops.q, ops.sfq, ops.k, ops.sfk, ops.vt, ops.sfv)
    for t in tensors:
        if not (t.is_cuda and t.is_contiguous()):
            raise ValueError("prepared operands must be contiguous CUDA tensors")
    # the guard's row reference m (BH, Sq) FP32; without the guard the kernel never reads its
    # m pointer, which then points at `denom` (any valid aligned address would do)
    m = denom if ops.m is None else ops.m
    if ops.m is not None:
        if not (m.is_cuda and m.is_contiguous() and m.dtype == torch.float32
                and tuple(m.shape) == (ops.batch * ops.heads, ops.seq_q)):
            raise ValueError("ops.m must be a contiguous float32 CUDA tensor (B*H, Sq)")
    # the kernel was compiled assuming these alignments (compile.py); nothing checks them later
    for t, align in zip((*tensors, out, denom, m), (32, 16, 32, 16, 32, 16, 16, 16, 16)):
        if t.data_ptr() % align:
            raise ValueError(f"kernel operands must be {align}-byte aligned")
    return (*tensors, m)


def scalar_args(args) -> tuple:
    """The kernel's scalar arguments in wrapper order (after the 8 pointers, before the stream)."""
    return (args.seq_q, args.seq_kv, args.batch, args.heads, args.sq_pad, args.skv_pad,
            args.guard, args.qk_log2, args.affine_ac, args.affine_a, args.affine_b, args.num_ctas)


def launch(ops, args, out: torch.Tensor, denom: torch.Tensor, *, prebuilt: bool | None = None,
           pv_qk_sync: bool = False) -> None:
    """Run the kernel on the current CUDA stream: BF16 (B, Sq, H, 128) into `out`, and each row's
    FP32 denominator sum 2^(e - L) q into `denom` (B*H, Sq). With the guard (args.guard = 1) the
    kernel reads each row's reference m from ops.m (pack.prepare_operands(..., guard_margin=M)).

    prebuilt: None = the AOT kernel when usable, else JIT; True = require the AOT kernel;
    False = always JIT. pv_qk_sync: the kernel's debug option (kernel.DirectPFP4Sm100), JIT
    only (the prebuilt kernel is the default configuration)."""
    if pv_qk_sync:
        if prebuilt:
            raise ValueError("pv_qk_sync is a debug configuration: it is JIT-compiled, never prebuilt")
        prebuilt = False
    *tensors, m = _check(ops, out, denom)
    raw_stream = torch.cuda.current_stream(out.device).cuda_stream
    ptrs = tuple(t.data_ptr() for t in (*tensors, out, denom, m))
    run_prebuilt_or_jit(prebuilt, prebuilt_launcher, (*ptrs, *scalar_args(args), raw_stream), out.device,
                        lambda: _launch_jit(tensors, args, out, denom, m, raw_stream, pv_qk_sync),
                        "sm100a kernel", " (see the wan_fp4.sm100 log)")


def _launch_jit(tensors, args, out, denom, m, raw_stream, pv_qk_sync=False) -> None:
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr
    import cuda.bindings.driver as cuda

    from .compile import compile_kernel

    q, sfq, k, sfk, vt, sfv = tensors
    fp4, e4m3, e8m0 = cutlass.Float4E2M1FN, cutlass.Float8E4M3FN, cutlass.Float8E8M0FNU

    def ptr(dtype, t, align=16):
        return make_ptr(dtype, t.data_ptr(), cute.AddressSpace.gmem, assumed_align=align)

    kernel = compile_kernel(pv_qk_sync=pv_qk_sync)
    kernel(
        ptr(fp4, q, 32), ptr(e4m3, sfq), ptr(fp4, k, 32), ptr(e4m3, sfk),
        ptr(fp4, vt, 32), ptr(e8m0, sfv), ptr(cutlass.BFloat16, out), ptr(cutlass.Float32, denom),
        ptr(cutlass.Float32, m),
        *scalar_args(args), cuda.CUstream(raw_stream),
    )
