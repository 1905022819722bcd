"""Prototype for docs/SM90_GEN2.md item 30 (a), not part of the package: K's column mean, V's
channel maxima and the Q, K and V codes of one head in ONE launch, a thread-block cluster of one CTA
per 128-key block, the column partials exchanged through distributed shared memory. Heads of at
most 8 key blocks (1,024 keys), self-attention (Q as long as K: each CTA quantises its own Q block
too), D = 128, V^T in the sm90 kernel's layout for a mode (keys permuted within 32-key groups,
and direct-p's ones rows: `layout.v_layout_args`), no range statistics (the score-range check's
largest Q and K scales and non-finite flags: a drop-in would need them).

On the H200 (the DSL installed): `python3 cluster_prepass.py` checks its bytes against
`prepare_fp8`'s at a few shapes in both modes, the kernel's output on them against the whole call's,
and times it from a CUDA graph beside the pre-pass, plain casts, the kernel and the whole call.
On the CPU: `python3 cluster_prepass.py compile` compiles it for sm_90a.
"""
from __future__ import annotations

import sys

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Float64, Int32, Int64
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op

from wan_fp4.kernels.sm90.layout import ONES_ROWS, SIGMA
from wan_fp4.kernels.sm90.ptx import pack_e4m3x4
from wan_fp4.modes import E4M3_ONE

THREADS = 256
INV_E4M3_MAX = 1.0 / 448.0
MAX_BLOCKS = 8  # a portable cluster's size: heads of at most 1,024 keys
PIECES = 8  # 16-byte pieces of a V^T row's 128 columns of a block


def geometry(d: int) -> tuple[int, int, int]:
    """(channel groups, row groups, rows per thread) of a CTA's 128 x d block: thread t holds
    channels 8 (t % CG) .. +8 of rows R (t // CG) .. +R."""
    cg = d // 8
    rg = THREADS // cg
    return cg, rg, 128 // rg


def v_columns() -> dict:
    """A model of the kernel's V^T stores, for the CPU: {column of the block: key of the block}
    as `v_codes` reads them back, piece q holding columns 16 q .. 16 q + 15."""
    out = {}
    for q in range(PIECES):
        for k in range(4):
            for i in range(4):
                out[16 * q + 4 * k + i] = (q // 2) * 32 + SIGMA[16 * (q % 2) + 4 * k + i]
    return out


_TYPES = {Float32: (T.f32, "f"), Float64: (T.f64, "d"), Int32: (T.i32, "r")}


def _unary(out, arg, text, volatile=False):
    """One inline-PTX instruction `text` ($0 <- $1) as a DSL op from type `arg` to type `out`;
    volatile ones are never moved across other side effects (the cluster barrier)."""
    (out_ty, out_c), in_c = _TYPES[out], _TYPES[arg][1]

    @dsl_user_op
    def op(x, *, loc=None, ip=None):
        return out(llvm.inline_asm(out_ty(), [arg(x).ir_value(loc=loc, ip=ip)], text, f"={out_c},{in_c}",
                                   has_side_effects=volatile, is_align_stack=False,
                                   asm_dialect=llvm.AsmDialect.AD_ATT))
    return op


bf16_lo = _unary(Float32, Int32, "shl.b32 $0, $1, 16;")  # the low BF16 of a word, as FP32
bf16_hi = _unary(Float32, Int32, "and.b32 $0, $1, 0xFFFF0000;")
f32_bits = _unary(Int32, Float32, "mov.b32 $0, $1;")
bits_f32 = _unary(Float32, Int32, "mov.b32 $0, $1;")
ld_dsmem_f64 = _unary(Float64, Int32, "ld.shared::cluster.f64 $0, [$1];", volatile=True)
ld_dsmem_f32 = _unary(Float32, Int32, "ld.shared::cluster.f32 $0, [$1];", volatile=True)


@cute.jit
def pow2_scale(amax: Float32):
    """(scale, 1/scale) as reference.pow2_scale / prepare._pow2_scale_tl (finite amax)."""
    bits = f32_bits(amax * Float32(INV_E4M3_MAX))
    e = (bits >> 23) & 0xFF
    t = e - 126
    if (bits & 0x7FFFFF) == 0:
        t = e - 127
    if amax == Float32(0.0):
        t = Int32(0)
    scale = bits_f32(Int32(1 << 22))
    if t > -127:
        scale = bits_f32((t + 127) << 23)
    inv = bits_f32((127 - t) << 23)
    return scale, inv


@cute.jit
def non_finite(word: Int32):
    """1.0 if either BF16 of the word is an inf or a NaN (exponent all ones), else 0.0."""
    flag = Float32(0.0)
    if (word & 0x7F80) == 0x7F80:
        flag = Float32(1.0)
    if (word & 0x7F800000) == 0x7F800000:
        flag = Float32(1.0)
    return flag


@cute.jit
def bf16(words, r, j: cutlass.Constexpr):
    """Channel j (of the thread's 8) of row r, from (R, 4) words of BF16 pairs, as FP32."""
    if cutlass.const_expr(j % 2 == 0):
        return bf16_lo(words[r, j // 2])
    return bf16_hi(words[r, j // 2])


@cute.jit
def smoothed(words, r, j: cutlass.Constexpr, mean, cg, inside):
    """K less its channel mean as the reference smooths it (one FP32 subtraction); 0 past S."""
    x = Float32(0.0)
    if inside:
        x = bf16(words, r, j) - mean[cg * 8 + j]
    return x


class ClusterPrepass:
    """One launch: a cluster of ceil(S / 128) CTAs per head (at most 8), CTA i holding key block i
    and query block i. Writes prepare_fp8's outputs for self-attention, plus one range-statistics
    row per CTA (B, H, blocks, 5): its Q and K block scales and whether its Q, K, V rows held a NaN
    or inf; the score-range check takes the maximum over the rows."""

    def __init__(self, d: int = 128, mode: str = "fp8"):
        assert d in (64, 128)
        self.d = d
        self.ones = ONES_ROWS if mode == "direct-p" else 0

    @cute.jit
    def __call__(self, p_q, p_k, p_v, p_q8, p_k8, p_v8t, p_qs, p_ks, p_vs, p_km, p_st, b: Int32, h: Int32, s: Int32,
                 stream):
        d, w = self.d, Int64
        n = (s + 127) // 128
        s_pad = n * 128
        dw = d // 2  # inputs (B, S, H, D) BF16 as words of channel pairs
        rows_in = cute.make_layout((s, dw, (h, b)), stride=(
            cute.assume(w(h) * dw, divby=4), 1, (dw, cute.assume(w(s) * h * dw, divby=4))))
        mQ, mK, mV = (cute.make_tensor(cute.recast_ptr(p, dtype=Int32), rows_in) for p in (p_q, p_k, p_v))
        d4, k4 = d // 4, cute.assume(n * 32, divby=32)  # outputs as words of four codes
        rows_out = cute.make_layout((s_pad, d4, (h, b)), stride=(
            d4, 1, (cute.assume(w(k4) * d4 * 4, divby=32), cute.assume(w(h) * k4 * d4 * 4, divby=32))))
        mQ8, mK8 = (cute.make_tensor(cute.recast_ptr(p, dtype=Int32), rows_out) for p in (p_q8, p_k8))
        dv = d + self.ones
        mV8t = cute.make_tensor(cute.recast_ptr(p_v8t, dtype=Int32), cute.make_layout(
            (dv, k4, (h, b)), stride=(k4, 1, (cute.assume(w(dv) * k4, divby=32), cute.assume(w(h) * dv * k4, divby=32)))))
        per_block = cute.make_layout((n, (h, b)), stride=(1, (n, w(h) * n)))
        mQs, mKs = cute.make_tensor(p_qs, per_block), cute.make_tensor(p_ks, per_block)
        per_channel = cute.make_layout((d, (h, b)), stride=(1, (d, w(h) * d)))
        mVs, mKm = cute.make_tensor(p_vs, per_channel), cute.make_tensor(p_km, per_channel)
        mSt = cute.make_tensor(p_st, cute.make_layout((5, n, (h, b)), stride=(1, 5, (n * 5, w(h) * n * 5))))
        self.kernel(mQ, mK, mV, mQ8, mK8, mV8t, mQs, mKs, mVs, mKm, mSt, h, s, n).launch(
            grid=[n, b * h, 1], block=[THREADS, 1, 1], cluster=[n, 1, 1], stream=stream)

    @cute.jit
    def load_rows(self, g_in, x, blk, s, rg, cg):
        """The thread's R rows x 8 channels of block blk into x, (R, 4) words of BF16 pairs (zero
        past s); returns whether any was an inf or a NaN (1.0 / 0.0)."""
        rows = geometry(self.d)[2]
        bad = Float32(0.0)
        for r in cutlass.range_constexpr(rows):
            for j in cutlass.range_constexpr(4):
                x[r, j] = Int32(0)
            if blk * 128 + rg * rows + r < s:
                cute.autovec_copy(cute.flat_divide(g_in[blk * 128 + rg * rows + r, None], (4,))[(None, cg)], x[r, None])
        for r in cutlass.range_constexpr(rows):
            for j in cutlass.range_constexpr(4):
                bad = cute.arch.fmax(bad, non_finite(x[r, j]))
        return bad

    @cute.kernel
    def kernel(self, mQ, mK, mV, mQ8, mK8, mV8t, mQs, mKs, mVs, mKm, mSt, h: Int32, s: Int32, n: Int32):
        d = self.d
        cgs, rgs, rows = geometry(d)
        t, _, _ = cute.arch.thread_idx()
        blk, bh, _ = cute.arch.block_idx()
        hh, bb = bh % h, bh // h
        cg, rg = t % cgs, t // cgs
        smem = cutlass.memory.SmemAllocator()
        s_ksum = smem.allocate_tensor(Float64, cute.make_layout((rgs, d)), 16)  # (row group, channel)
        s_vmax = smem.allocate_tensor(Float32, cute.make_layout((rgs, d)), 16)
        p_k = smem.allocate_tensor(Float64, cute.make_layout(d), 16)  # this CTA's column partials
        p_v = smem.allocate_tensor(Float32, cute.make_layout(d), 16)
        t_k = smem.allocate_tensor(Float32, cute.make_layout(d), 16)  # the head's mean, channel amax
        t_v = smem.allocate_tensor(Float32, cute.make_layout(d), 16)
        s_red = smem.allocate_tensor(Float32, cute.make_layout((8, 5)), 16)  # (warp, reduced value)
        # V's codes in key order, (channel, key) bytes, read back in the kernel's key order
        s_vc = smem.allocate_tensor(cutlass.Uint8, cute.make_layout((d, 128), stride=(132, 1)), 16)

        # all of the CTA's inputs in flight at once, kept as BF16 pairs (half the registers)
        by_row = cute.make_layout((rows, 4), stride=(4, 1))  # (row, channel pair) of the thread
        kw, vw, qw = (cute.make_rmem_tensor(by_row, Int32) for _ in range(3))
        bad_k = self.load_rows(mK[None, None, (hh, bb)], kw, blk, s, rg, cg)
        bad_v = self.load_rows(mV[None, None, (hh, bb)], vw, blk, s, rg, cg)
        bad_q = self.load_rows(mQ[None, None, (hh, bb)], qw, blk, s, rg, cg)
        # column partials: the thread's rows, then the CTA's row groups, in float64 (exact for
        # BF16 inputs, so the head's total does not depend on the order)
        for j in cutlass.range_constexpr(8):
            acc = Float64(0.0)
            mx = Float32(0.0)
            for r in cutlass.range_constexpr(rows):
                acc = acc + Float64(bf16(kw, r, j))
                mx = cute.arch.fmax(mx, cute.math.absf(bf16(vw, r, j)))
            s_ksum[rg, cg * 8 + j] = acc
            s_vmax[rg, cg * 8 + j] = mx
        cute.arch.sync_threads()
        if t < d:
            acc = Float64(0.0)
            mx = Float32(0.0)
            for g in cutlass.range_constexpr(rgs):
                acc = acc + s_ksum[g, t]
                mx = cute.arch.fmax(mx, s_vmax[g, t])
            p_k[t] = acc
            p_v[t] = mx
        cute.arch.cluster_arrive()
        # Q needs nothing from the cluster: its block's scale and codes while the others arrive
        amax = Float32(0.0)
        for r in cutlass.range_constexpr(rows):
            for j in cutlass.range_constexpr(8):
                amax = cute.arch.fmax(amax, cute.math.absf(bf16(qw, r, j)))
        amax, bad_q = self.block_max((amax, bad_q), s_red, 3, t)
        q_scale = self.block_codes(qw, None, amax, mQs, mQ8[None, None, (hh, bb)], t, blk, hh, bb, s)
        # the cluster's partials: every CTA adds all blocks' in block order
        cute.arch.cluster_wait()
        if t < d:
            acc = Float64(0.0)
            mx = Float32(0.0)
            for r in cutlass.range(n):
                acc = acc + ld_dsmem_f64(cute.arch.map_dsmem_ptr(p_k.iterator + t, r).toint())
                mx = cute.arch.fmax(mx, ld_dsmem_f32(cute.arch.map_dsmem_ptr(p_v.iterator + t, r).toint()))
            mean = Float32(acc / Float64(s))
            t_k[t] = mean
            t_v[t] = mx
            if blk == 0:
                mKm[t, (hh, bb)] = mean
                mVs[t, (hh, bb)] = pow2_scale(mx)[0]
        # no CTA leaves (and frees its shared memory) while another may still read it
        cute.arch.cluster_arrive()
        cute.arch.sync_threads()

        # K: smoothed (rows past s stay zero), the block's scale, codes
        amax = Float32(0.0)
        for r in cutlass.range_constexpr(rows):
            for j in cutlass.range_constexpr(8):
                amax = cute.arch.fmax(amax, cute.math.absf(smoothed(kw, r, j, t_k, cg, blk * 128 + rg * rows + r < s)))
        amax, bad_k, bad_v = self.block_max((amax, bad_k, bad_v), s_red, 0, t)
        k_scale = self.block_codes(kw, t_k, amax, mKs, mK8[None, None, (hh, bb)], t, blk, hh, bb, s)
        self.v_codes(vw, t_v, s_vc, mV8t[None, None, (hh, bb)], t, blk)
        if t == 0:
            stats = mSt[None, blk, (hh, bb)]
            stats[0] = q_scale
            stats[1] = k_scale
            stats[2] = bad_q
            stats[3] = bad_k
            stats[4] = bad_v
        cute.arch.cluster_wait()

    @cute.jit
    def block_max(self, vals, s_red, slot: cutlass.Constexpr, t):
        """Each of `vals` (non-negative floats, NaN dropped) maximised over the CTA: warp shuffles,
        then the 8 warps through s_red[:, slot + i] (distinct slots per call, so no second sync)."""
        warp, lane = t // 32, t % 32
        out = []
        for i in cutlass.range_constexpr(len(vals)):
            x = vals[i]
            for off in cutlass.range_constexpr(5):
                x = cute.arch.fmax(x, cute.arch.shuffle_sync_bfly(x, offset=1 << off))
            if lane == 0:
                s_red[warp, slot + i] = x
        cute.arch.sync_threads()
        for i in cutlass.range_constexpr(len(vals)):
            x = s_red[0, slot + i]
            for k in cutlass.range_constexpr(1, 8):
                x = cute.arch.fmax(x, s_red[k, slot + i])
            out.append(x)
        return tuple(out)

    @cute.jit
    def block_codes(self, x, mean, amax, m_scale, g_out, t, blk, hh, bb, s):
        """Block blk's power-of-two scale from its amax, stored at m_scale and returned; the
        thread's rows x 8 channels of x (BF16 pairs, less `mean` per channel unless it is None)
        as E4M3 codes into its rows of g_out (words of four)."""
        cgs, _, rows = geometry(self.d)
        cg, rg = t % cgs, t // cgs
        scale, inv = pow2_scale(amax)
        if t == 0:
            m_scale[blk, (hh, bb)] = scale
        out = cute.make_rmem_tensor((2,), Int32)
        y = cute.make_rmem_tensor((8,), Float32)
        for r in cutlass.range_constexpr(rows):
            row = blk * 128 + rg * rows + r
            for j in cutlass.range_constexpr(8):
                if cutlass.const_expr(mean is None):
                    y[j] = bf16(x, r, j) * inv
                else:
                    y[j] = smoothed(x, r, j, mean, cg, row < s) * inv
            out[0] = pack_e4m3x4(y[0], y[1], y[2], y[3])
            out[1] = pack_e4m3x4(y[4], y[5], y[6], y[7])
            cute.autovec_copy(out, cute.flat_divide(g_out[row, None], (2,))[(None, cg)])
        return scale

    @cute.jit
    def v_codes(self, vw, t_v, s_vc, gV8t, t, blk):
        """V's per-channel codes through shared memory in key order, then read back in the
        kernel's key order (column k of a 32-key group holds key SIGMA[k]; `v_columns` models it)
        as 16-byte pieces of V^T rows, a warp storing four whole 128-byte rows; then direct-p's
        ones rows over the block's 128 columns."""
        d = self.d
        cgs, _, rows = geometry(d)
        cg, rg = t % cgs, t // cgs
        words = rows // 4
        s_vw = cute.make_tensor(cute.recast_ptr(s_vc.iterator, dtype=Int32),
                                cute.make_layout((d, 32), stride=(33, 1)))  # the same bytes as words
        for j in cutlass.range_constexpr(8):
            v_inv = pow2_scale(t_v[cg * 8 + j])[1]
            for k in cutlass.range_constexpr(words):
                s_vw[cg * 8 + j, rg * words + k] = pack_e4m3x4(
                    bf16(vw, 4 * k, j) * v_inv, bf16(vw, 4 * k + 1, j) * v_inv,
                    bf16(vw, 4 * k + 2, j) * v_inv, bf16(vw, 4 * k + 3, j) * v_inv)
        cute.arch.sync_threads()
        out = cute.make_rmem_tensor((4,), Int32)
        for it in cutlass.range_constexpr(d * PIECES // THREADS):
            piece = it * THREADS + t
            ch, q = piece // PIECES, piece % PIECES  # V^T row, its 16 columns from 16 q
            for half in cutlass.range_constexpr(2):
                if q % 2 == half:
                    for k in cutlass.range_constexpr(4):
                        word = Int32(0)
                        for i in cutlass.range_constexpr(4):
                            key = (q // 2) * 32 + SIGMA[16 * half + 4 * k + i]
                            word = word | (Int32(s_vc[ch, key]) << (8 * i))
                        out[k] = word
            cute.autovec_copy(out, cute.flat_divide(gV8t[ch, None], (4,))[(None, blk * PIECES + q)])
        if self.ones > 0:  # row D all E4M3 1.0, the rest zero, over the block's 128 columns
            row, col = t // 32, t % 32
            if row < self.ones:
                val = Int32(0)
                if row == 0:
                    val = Int32(E4M3_ONE * 0x01010101)
                gV8t[d + row, blk * 32 + col] = val


def _args(ptrs=None, sizes=(1, 1, 128), stream=None):
    from cutlass.cute.runtime import make_fake_stream, make_ptr
    from cutlass.cute.typing import AddressSpace

    f8, f32, bf16 = cutlass.Float8E4M3FN, cutlass.Float32, cutlass.BFloat16
    dtypes = (bf16, bf16, bf16, f8, f8, f8, f32, f32, f32, f32, f32)
    ptrs = ptrs or (0,) * len(dtypes)
    p = [make_ptr(dt, int(a), AddressSpace.gmem, assumed_align=16) for dt, a in zip(dtypes, ptrs)]
    return (*p, *(Int32(x) for x in sizes), stream if stream is not None else make_fake_stream())


def compile_for(d: int, mode: str = "fp8", options: str = ""):
    """One kernel for every head of at most MAX_BLOCKS key blocks (the cluster's size is S's)."""
    return cute.compile(ClusterPrepass(d, mode), *_args(), options=f"--gpu-arch sm_90a {options}".strip())


def check_v_columns() -> None:
    """The CPU's check of the V^T index math: the model of the kernel's stores against the
    pre-pass's key permutation."""
    from wan_fp4.kernels.sm90.layout import key_permutation

    want = key_permutation(128).tolist()
    got = v_columns()
    assert sorted(got) == list(range(128)) and [got[c] for c in range(128)] == want
    print("the model of the V^T stores writes the kernel's key order")


def main_gpu():
    import torch
    from cuda.bindings import driver as cuda

    import wan_fp4
    from wan_fp4.kernels import prepare, sm90
    from wan_fp4.kernels.sm90.layout import v_layout_args

    def graph_us(fn, reps=20):
        st = torch.cuda.Stream()
        with torch.cuda.stream(st):
            fn()
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(reps):
                    fn()
        times = []
        for _ in range(7):
            a, z = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            z.record()
            z.synchronize()
            times.append(a.elapsed_time(z) * 1000 / reps)
        return sorted(times)[len(times) // 2]

    def as_bytes(x):
        return x.view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x

    kernels = {}
    shapes = ((1, 1024, 40, 128), (2, 1000, 3, 128), (1, 300, 12, 128), (1, 512, 40, 128), (1, 77, 5, 128),
              (1, 1024, 40, 64), (1, 320, 12, 64), (2, 1000, 3, 64))
    for mode in ("direct-p", "fp8"):
        ones = ONES_ROWS if mode == "direct-p" else 0
        for b, s, h, d in shapes:
            n = -(-s // 128)
            if (d, mode) not in kernels:
                kernels[d, mode] = compile_for(d, mode)
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            k = k + 3.0 * torch.randn(1, 1, h, d, device="cuda", dtype=torch.bfloat16)  # a mean to remove
            v = v * torch.rand(1, 1, h, d, device="cuda", dtype=torch.bfloat16) * 4  # scales per channel
            sp = n * 128

            def poisoned(*shape, f8=True):
                if f8:
                    return torch.full(shape, 0x7F, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)
                return torch.full(shape, float("nan"), device="cuda")

            q8, k8, v8t = poisoned(b, h, sp, d), poisoned(b, h, sp, d), poisoned(b, h, d + ones, sp)
            qs, ks = poisoned(b, h, n, f8=False), poisoned(b, h, n, f8=False)
            vs, km = poisoned(b, h, d, f8=False), poisoned(b, h, d, f8=False)
            st = poisoned(b, h, n, prepare.RANGE_STATS, f8=False)

            def run(q=q, k=k, v=v):  # on the current stream (a graph captures on its own)
                stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
                ptrs = tuple(x.data_ptr() for x in (q, k, v, q8, k8, v8t, qs, ks, vs, km, st))
                kernels[d, mode](*_args(ptrs, (b, h, s), stream))

            def ops():
                return prepare.PreparedFP8(q8, k8, v8t, qs, ks, vs, km, s, s, st, **v_layout_args(mode))

            # the statistics rows, then inputs the score-range check must refuse
            for bad in (None, "q", "k", "v"):
                qq, kk, vv = q.clone(), k.clone(), v.clone()
                if bad is not None:
                    {"q": qq, "k": kk, "v": vv}[bad][0, s // 2, h - 1, d // 3] = float("inf" if bad == "k" else "nan")
                ref = prepare.prepare_fp8(qq, kk, vv, **v_layout_args(mode))
                run(qq, kk, vv)
                torch.cuda.synchronize()
                rows = st.reshape(-1, prepare.RANGE_STATS).amax(0)
                if bad is None:
                    same = {name: torch.equal(as_bytes(getattr(ops(), name)), as_bytes(getattr(ref, name)))
                            for name in ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean")}
                    same["range_stats (max over rows)"] = torch.equal(rows, ref.range_stats)
                    print(f"{mode} B{b} H{h} S{s} D{d}: bitwise equal to prepare_fp8 {same}", flush=True)
                else:
                    try:
                        ops().check_score_range(mode, d ** -0.5)
                        verdict = "NOT refused"
                    except ValueError as e:
                        verdict = f"refused ({e})"
                    print(f"{mode} B{b} H{h} S{s} D{d}: a non-finite {bad}: rows' flags {rows[2:].tolist()}, "
                          f"prepare_fp8's {ref.range_stats[2:].tolist()}, the check {verdict}", flush=True)
            run()
            torch.cuda.synchronize()
            if (b, s, h) != (1, 1024, 40):
                continue
            out_chain = sm90.launch(ops(), mode, d)[0]
            out_call = wan_fp4.attention(q, k, v, mode, kernel="sm90-cute")
            print(f"{mode} B{b} H{h} S{s} D{d}: the kernel on these operands == the whole call's output: "
                  f"{torch.equal(out_chain, out_call)}", flush=True)
            qkv8 = torch.empty(3, b, s, h, d, dtype=torch.float8_e4m3fn, device="cuda")

            def cast(names):
                def go():
                    for i, x in enumerate(names):
                        qkv8[i].copy_({"q": q, "k": k, "v": v}[x])
                return go

            times = {
                "one cluster launch (statistics, Q, K, V codes)": graph_us(run),
                "prepare_fp8 (the pre-pass as it is)": graph_us(lambda: prepare.prepare_fp8(q, k, v, **v_layout_args(mode))),
                "torch E4M3 casts of Q, K and V (three copies)": graph_us(cast("qkv")),
                "torch E4M3 casts of K and V (two copies)": graph_us(cast("kv")),
                "the kernel alone": graph_us(lambda: sm90.launch(ops(), mode, d)),
                "the cluster launch, then the kernel": graph_us(lambda: (run(), sm90.launch(ops(), mode, d))),
                "the casts of K and V, then the kernel": graph_us(lambda: (cast("kv")(), sm90.launch(ops(), mode, d))),
                "the whole call (wan_fp4.attention)": graph_us(lambda: wan_fp4.attention(q, k, v, mode, kernel="sm90-cute")),
            }
            if d == 128:
                times["cuDNN BF16 (SDPA), the whole call"] = graph_us(lambda: sdpa_cudnn(q, k, v))
            for name, us in times.items():
                print(f"{mode} B{b} H{h} S{s} D{d} {name:50s} {us:6.1f} us from a CUDA graph", flush=True)


def sdpa_cudnn(q, k, v):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))


if __name__ == "__main__":
    if sys.argv[1:] == ["compile"]:
        from wan_fp4.kernels.sm90.compile import ptx_of

        check_v_columns()
        for d in (128, 64):
            ptx = ptx_of(compile_for(d, "direct-p", "--keep-ptx"))
            counts = {i: ptx.count(i) for i in ("ld.global.v4", "st.global.v2", "st.global.b32", "mapa",
                                                 "ld.shared::cluster", "barrier.cluster.arrive", "barrier.cluster.wait",
                                                 "cvt.rn.satfinite.e4m3x2", "div.rn.f64", "cvt.rn.f32.f64")}
            print(f"compiled for sm_90a, D{d}, any number of key blocks up to {MAX_BLOCKS}: {counts}")
    else:
        main_gpu()
