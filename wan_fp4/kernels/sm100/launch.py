"""The sm100a kernel's host side: its scalar arguments, the launch on a CUDA sm_100 device (never
exercised: no GPU) and the LSE from the kernel's row denominators.

The prebuilt (AOT) kernel is used when its manifest matches the kernel sources (aot.py), else
the kernel is JIT-compiled by the CuTe DSL on first use (kernels/aot.Prebuilt.run_or_jit). Both
take the same arguments.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ... import reference
from ...modes import FP4_SCALE_SHIFT, LN2, FP4Params, default_scale
from .aot import NAME, PREBUILT
from .pack import HEAD_DIM, SM100Operands, prepare_operands


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


def run(q, k, v, mode: str, scale: float | None = None, fp4: FP4Params | None = None,
        return_lse: bool = False):
    """The spec's run, on inputs `supports` accepted: (out in q's dtype, LSE or None)."""
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
    PREBUILT.run_or_jit(NAME, (*ptrs, *scalar_args(args), raw_stream), out.device,
                        lambda: _launch_jit(tensors, args, out, denom, m, raw_stream, pv_qk_sync),
                        prebuilt, " (see the wan_fp4.sm100 log)")


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
