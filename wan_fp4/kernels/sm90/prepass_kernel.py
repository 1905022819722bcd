"""The short-head pre-pass's CuTe DSL kernel (its contract and host side: prepass.py).

A cluster of one CTA per 128-token block of a head, a thread per 16 bytes of 4 rows (prepass.py's
geometry). CTA i loads its blocks of K, V and Q (held in registers as BF16 pairs), adds K's column
sums (float64) and V's column maxima over its rows, and arrives at the cluster barrier; makes Q's
codes while the others arrive; then adds every CTA's partials in block order, read from their
shared memory, and makes K's codes (smoothed by the mean) and V's (per channel, in the attention
kernel's key order, with direct-p's ones rows).
"""
from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Float64, Int32, Int64

from ...modes import E4M3_MAX, E4M3_ONE
from ..prepare import RANGE_STATS
from .layout import ONES_ROWS
from .prepass import MAX_BLOCKS, PIECES, geometry, threads, v_gather
from .ptx import (bf16_high, bf16_low, bits_f32, byte_perm, f32_bits, ld_cluster_f32, ld_cluster_f64, max_nan_bf16x2,
                  min_nan_bf16x2, pack_e4m3x4)

ABS = 0x7FFF7FFF  # clears both BF16 signs of a word
NEG_INF2, POS_INF2 = -0x007F0080, 0x7F807F80  # words of two BF16 -inf (0xFF80FF80), two +inf


@cute.jit
def pow2_scale(amax: Float32):
    """(scale, 1/scale) as reference.pow2_scale and the Triton pre-pass (finite amax)."""
    bits = f32_bits(amax * Float32(1.0 / E4M3_MAX))
    e = (bits >> 23) & 0xFF
    t = e - 126
    if (bits & 0x7FFFFF) == 0:
        t = e - 127
    if amax == Float32(0.0):
        t = Int32(0)
    scale = bits_f32(Int32(1 << 22))
    if t > -127:
        scale = bits_f32((t + 127) << 23)
    return scale, bits_f32((127 - t) << 23)


@cute.jit
def non_finite(word: Int32):
    """1.0 if either BF16 of the word is an inf or a NaN (exponent all ones), else 0.0. Applied to
    maxima taken with max.NaN, it finds any NaN or inf among the values maximised."""
    flag = Float32(0.0)
    if (word & 0x7F80) == 0x7F80:
        flag = Float32(1.0)
    if (word & 0x7F800000) == 0x7F800000:
        flag = Float32(1.0)
    return flag


@cute.jit
def row_of(words, r):
    """Row r of the thread's (R, 4) words of BF16 pairs as a fragment of four registers."""
    w = cute.make_rmem_tensor((4,), Int32)
    cute.autovec_copy(words[r, None], w)
    return w


@cute.jit
def bf16(w, j: cutlass.Constexpr):
    """Channel j (of the thread's 8) of a row's fragment `w` (row_of) as FP32."""
    if cutlass.const_expr(j % 2 == 0):
        return bf16_low(w[j // 2])
    return bf16_high(w[j // 2])


class ShortPrepass:
    """One launch per call: grid (key blocks, B*H), one cluster of CTAs per head (prepass.py)."""

    def __init__(self, d: int, mode: str):
        assert d in (64, 128) and mode in ("direct-p", "fp8")
        self.d = d
        self.threads = threads(d)
        self.ones = ONES_ROWS if mode == "direct-p" else 0

    @cute.jit
    def __call__(self, p_q: cute.Pointer, p_k: cute.Pointer, p_v: cute.Pointer, p_q8: cute.Pointer,
                 p_k8: cute.Pointer, p_v8t: cute.Pointer, p_qs: cute.Pointer, p_ks: cute.Pointer,
                 p_vs: cute.Pointer, p_km: cute.Pointer, p_st: cute.Pointer,
                 qb: Int64, qs: Int64, qh: Int64, kb: Int64, ks: Int64, kh: Int64, vb: Int64, vs: Int64,
                 vh: Int64, b: Int32, h: Int32, s: Int32, stream: cuda.CUstream):
        d, w = self.d, Int64
        n = (s + 127) // 128
        dw = d // 2

        def words_in(p, sb, ss, sh):  # (token, channel pair, (head, batch)) words of BF16 pairs
            return cute.make_tensor(cute.recast_ptr(p, dtype=Int32), cute.make_layout(
                (s, dw, (h, b)), stride=(cute.assume(ss // 2, divby=4), 1,
                                         (cute.assume(sh // 2, divby=4), cute.assume(sb // 2, divby=4)))))

        mQ, mK, mV = words_in(p_q, qb, qs, qh), words_in(p_k, kb, ks, kh), words_in(p_v, vb, vs, vh)
        d4, k4 = d // 4, cute.assume(n * 32, divby=32)  # outputs as words of four codes
        rows_out = cute.make_layout((n * 128, d4, (h, b)), stride=(
            d4, 1, (cute.assume(w(k4) * d, divby=32), cute.assume(w(h) * k4 * d, divby=32))))
        mQ8, mK8 = (cute.make_tensor(cute.recast_ptr(p, dtype=Int32), rows_out) for p in (p_q8, p_k8))
        dv = d + self.ones
        mV8t = cute.make_tensor(cute.recast_ptr(p_v8t, dtype=Int32), cute.make_layout(
            (dv, k4, (h, b)), stride=(cute.assume(w(n) * 32, divby=32), 1, (cute.assume(w(dv) * k4, divby=32),
                                              cute.assume(w(h) * dv * k4, divby=32)))))
        per_block = cute.make_layout((n, (h, b)), stride=(1, (w(n), w(h) * n)))
        per_channel = cute.make_layout((d, (h, b)), stride=(1, (d, w(h) * d)))
        row = RANGE_STATS
        stats = cute.make_tensor(p_st, cute.make_layout((row, n, (h, b)),
                                                        stride=(1, row, (w(n) * row, w(h) * n * row))))
        launch = self.kernel(mQ, mK, mV, mQ8, mK8, mV8t, cute.make_tensor(p_qs, per_block),
                             cute.make_tensor(p_ks, per_block), cute.make_tensor(p_vs, per_channel),
                             cute.make_tensor(p_km, per_channel), stats, h, s, n)
        # one CTA per SM: the register file shared by its threads (128 each at D128)
        launch.launch(grid=[n, b * h, 1], block=[self.threads, 1, 1], cluster=[n, 1, 1], stream=stream,
                      min_blocks_per_mp=1)

    @cute.jit
    def load_rows(self, g_in, x, blk, s, rg, cg):
        """The thread's R rows x 8 channels of block blk into registers x, words of BF16 pairs
        (zero past s)."""
        rows = geometry(self.d)[2]
        for r in cutlass.range_constexpr(rows):
            src = cute.flat_divide(g_in[blk * 128 + rg * rows + r, None], (4,))[(None, cg)]
            if blk * 128 + rg * rows + r < s:
                cute.autovec_copy(src, x[r, None])
            else:
                for j in cutlass.range_constexpr(4):
                    x[r, j] = Int32(0)

    @cute.kernel
    def kernel(self, mQ, mK, mV, mQ8, mK8, mV8t, mQs, mKs, mVs, mKm, mSt, h: Int32, s: Int32, n: Int32):
        # the attention kernel may start now (its CTAs wait for this grid before reading), once
        # every CTA of this grid has said so, so its set-up runs under this launch's end
        cute.arch.griddepcontrol_launch_dependents()
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
        s_red = smem.allocate_tensor(Float32, cute.make_layout((self.threads // 32, 5)), 16)  # (warp, value)
        # V's codes in key order, (channel, key) bytes, read back in the kernel's key order
        s_vc = smem.allocate_tensor(cutlass.Uint8, cute.make_layout((d, 128), stride=(132, 1)), 16)

        # all of the CTA's inputs in flight at once, held as BF16 pairs (half the registers)
        by_row = cute.make_layout((rows, 4), stride=(4, 1))  # (row, channel pair) of the thread
        qw, kw, vw = (cute.make_rmem_tensor(by_row, Int32) for _ in range(3))
        self.load_rows(mK[None, None, (hh, bb)], kw, blk, s, rg, cg)
        self.load_rows(mV[None, None, (hh, bb)], vw, blk, s, rg, cg)
        self.load_rows(mQ[None, None, (hh, bb)], qw, blk, s, rg, cg)
        # one pass over the thread's rows: K's column sums, in float64 (exact for BF16 inputs of
        # any realistic range, so the head's total does not depend on the order); and as BF16
        # pairs, with max.NaN, K's column maxima and minima over rows before S (its smoothed
        # block amax comes from them once the mean is known: rounding is monotonic, so the
        # largest |fl(k - mean)| of a column sits at its largest or smallest k), V's column
        # maxima of |v| and Q's maximum |q|. A NaN or inf among them survives into those
        # maxima, which gives the non-finite flags at no further cost.
        k_sum = cute.make_rmem_tensor((8,), Float64)
        k_hi, k_lo, v_hi = (cute.make_rmem_tensor((4,), Int32) for _ in range(3))
        for j in cutlass.range_constexpr(8):
            k_sum[j] = Float64(0.0)
        for i in cutlass.range_constexpr(4):
            k_hi[i], k_lo[i], v_hi[i] = Int32(NEG_INF2), Int32(POS_INF2), Int32(0)
        q_hi = Int32(0)
        for r in cutlass.range_constexpr(rows):
            kr, vr, qr = row_of(kw, r), row_of(vw, r), row_of(qw, r)
            for j in cutlass.range_constexpr(8):
                k_sum[j] = k_sum[j] + Float64(bf16(kr, j))
            for i in cutlass.range_constexpr(4):
                if blk * 128 + rg * rows + r < s:
                    k_hi[i] = max_nan_bf16x2(k_hi[i], kr[i])
                    k_lo[i] = min_nan_bf16x2(k_lo[i], kr[i])
                v_hi[i] = max_nan_bf16x2(v_hi[i], vr[i] & ABS)
                q_hi = max_nan_bf16x2(q_hi, qr[i] & ABS)
        has_rows = blk * 128 + rg * rows < s  # a thread of the last block may hold none
        bad_k, bad_v = Float32(0.0), Float32(0.0)
        for i in cutlass.range_constexpr(4):
            if has_rows:
                bad_k = cute.arch.fmax(bad_k, cute.arch.fmax(non_finite(k_hi[i]), non_finite(k_lo[i])))
            bad_v = cute.arch.fmax(bad_v, non_finite(v_hi[i]))
        bad_q = non_finite(q_hi)
        for j in cutlass.range_constexpr(8):
            s_ksum[rg, cg * 8 + j] = k_sum[j]
            s_vmax[rg, cg * 8 + j] = bf16(v_hi, j)
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
        amax = cute.arch.fmax(bf16_low(q_hi), bf16_high(q_hi))
        amax, bad_q = self.block_max((amax, bad_q), s_red, 3, t)
        q_scale = self.block_codes(qw, None, amax, mQs, mQ8[None, None, (hh, bb)], t, blk, hh, bb, s)
        # the cluster's partials: every CTA adds all blocks' in block order, each block's loads
        # issued before any sum waits on them (the CTAs past n add +0.0 and 0: no bit changes)
        cute.arch.cluster_wait()
        if t < d:
            parts_k = cute.make_rmem_tensor((MAX_BLOCKS,), Float64)
            parts_v = cute.make_rmem_tensor((MAX_BLOCKS,), Float32)
            for r in cutlass.range_constexpr(MAX_BLOCKS):
                parts_k[r] = Float64(0.0)
                parts_v[r] = Float32(0.0)
                if r < n:
                    parts_k[r] = ld_cluster_f64(cute.arch.map_dsmem_ptr(p_k.iterator + t, r).toint())
                    parts_v[r] = ld_cluster_f32(cute.arch.map_dsmem_ptr(p_v.iterator + t, r).toint())
            acc = Float64(0.0)
            mx = Float32(0.0)
            for r in cutlass.range_constexpr(MAX_BLOCKS):
                acc = acc + parts_k[r]
                mx = cute.arch.fmax(mx, parts_v[r])
            mean = Float32(acc / Float64(s))
            t_k[t] = mean
            t_v[t] = mx
            if blk == 0:
                mKm[t, (hh, bb)] = mean
                mVs[t, (hh, bb)] = pow2_scale(mx)[0]
        # no CTA leaves (and frees its shared memory) while another may still read it
        cute.arch.cluster_arrive()
        cute.arch.sync_threads()

        # K: its block's scale (the amax at each column's largest or smallest k), its codes
        # (smoothed; rows past s zero codes)
        mean = cute.make_rmem_tensor((8,), Float32)
        cute.autovec_copy(cute.flat_divide(t_k, (8,))[(None, cg)], mean)
        amax = Float32(0.0)
        if has_rows:
            for j in cutlass.range_constexpr(8):
                amax = cute.arch.fmax(amax, cute.math.absf(bf16(k_hi, j) - mean[j]))
                amax = cute.arch.fmax(amax, cute.math.absf(bf16(k_lo, j) - mean[j]))
        amax, bad_k, bad_v = self.block_max((amax, bad_k, bad_v), s_red, 0, t)
        k_scale = self.block_codes(kw, mean, amax, mKs, mK8[None, None, (hh, bb)], t, blk, hh, bb, s)
        self.v_codes(vw, t_v, s_vc, mV8t[None, None, (hh, bb)], t, blk)
        if t == 0:
            row = mSt[None, blk, (hh, bb)]
            row[0] = q_scale
            row[1] = k_scale
            row[2] = bad_q
            row[3] = bad_k
            row[4] = bad_v
        cute.arch.cluster_wait()

    @cute.jit
    def block_max(self, vals, s_red, slot: cutlass.Constexpr, t):
        """Each of `vals` (non-negative; fmax drops NaN) maximised over the CTA: warp shuffles,
        then the warps through s_red[:, slot + i] (distinct slots per call: one sync)."""
        warp, lane = t // 32, t % 32
        for i in cutlass.range_constexpr(len(vals)):
            x = vals[i]
            for off in cutlass.range_constexpr(5):
                x = cute.arch.fmax(x, cute.arch.shuffle_sync_bfly(x, offset=1 << off))
            if lane == 0:
                s_red[warp, slot + i] = x
        cute.arch.sync_threads()
        out = []
        for i in cutlass.range_constexpr(len(vals)):
            x = s_red[0, slot + i]
            for k in cutlass.range_constexpr(1, self.threads // 32):
                x = cute.arch.fmax(x, s_red[k, slot + i])
            out.append(x)
        return tuple(out)

    @cute.jit
    def block_codes(self, x, mean, amax, m_scale, g_out, t, blk, hh, bb, s):
        """Block blk's power-of-two scale from its amax, stored at m_scale and returned; the
        thread's rows x 8 channels of x (BF16 pairs) as E4M3 codes into its rows of g_out (words
        of four). With `mean` (the thread's 8 channel means) the rows are K's: each value less
        its mean in one FP32 subtraction, as the reference smooths, and rows past s zero codes."""
        cgs, _, rows = geometry(self.d)
        cg, rg = t % cgs, t // cgs
        scale, inv = pow2_scale(amax)
        if t == 0:
            m_scale[blk, (hh, bb)] = scale
        out = cute.make_rmem_tensor((2,), Int32)
        y = cute.make_rmem_tensor((8,), Float32)
        for r in cutlass.range_constexpr(rows):
            row = blk * 128 + rg * rows + r
            xr = row_of(x, r)
            for j in cutlass.range_constexpr(8):
                if cutlass.const_expr(mean is None):
                    y[j] = bf16(xr, j) * inv  # Q: its rows past s are zero words, so zero codes
                else:
                    y[j] = (bf16(xr, j) - mean[j]) * inv
            out[0] = pack_e4m3x4(y[0], y[1], y[2], y[3])
            out[1] = pack_e4m3x4(y[4], y[5], y[6], y[7])
            if cutlass.const_expr(mean is not None):
                if row >= s:  # one select per word, not per value
                    out[0], out[1] = Int32(0), Int32(0)
            cute.autovec_copy(out, cute.flat_divide(g_out[row, None], (2,))[(None, cg)])
        return scale

    @cute.jit
    def v_codes(self, vw, t_v, s_vc, gV8t, t, blk):
        """V's per-channel codes into shared memory in key order, read back in the kernel's key
        order (column k of a 32-key group holds key SIGMA[k]: four words, then one PRMT per word
        of the piece, `v_gather`; `v_columns` models it) as 16-byte pieces of V^T rows, a warp
        storing four whole 128-byte rows; then direct-p's ones rows."""
        d = self.d
        cgs, _, rows = geometry(d)
        cg, rg = t % cgs, t // cgs
        words = rows // 4
        s_vw = cute.make_tensor(cute.recast_ptr(s_vc.iterator, dtype=Int32),
                                cute.make_layout((d, 32), stride=(33, 1)))  # the same bytes as words
        v_inv = cute.make_rmem_tensor((8,), Float32)
        for j in cutlass.range_constexpr(8):
            v_inv[j] = pow2_scale(t_v[cg * 8 + j])[1]
        for k in cutlass.range_constexpr(words):
            vr = [row_of(vw, 4 * k + i) for i in range(4)]
            for j in cutlass.range_constexpr(8):
                s_vw[cg * 8 + j, rg * words + k] = pack_e4m3x4(
                    bf16(vr[0], j) * v_inv[j], bf16(vr[1], j) * v_inv[j],
                    bf16(vr[2], j) * v_inv[j], bf16(vr[3], j) * v_inv[j])
        cute.arch.sync_threads()
        out = cute.make_rmem_tensor((4,), Int32)
        for it in cutlass.range_constexpr(d * PIECES // self.threads):
            piece = it * self.threads + t
            ch, q = piece // PIECES, piece % PIECES  # V^T row, and its columns 16 q .. 16 q + 15
            # keys 16 q .. 16 q + 15 as four words (a row's stride of 33 words keeps a warp's
            # loads on distinct banks)
            w = [s_vw[ch, 4 * q + m] for m in range(4)]
            for k, (a, b, sel) in enumerate(v_gather()):
                out[k] = byte_perm(w[a], w[b], sel)
            cute.autovec_copy(out, cute.flat_divide(gV8t[ch, None], (4,))[(None, blk * PIECES + q)])
        if self.ones > 0:  # row D all E4M3 1.0, the rest zero, over the block's 128 columns
            row, col = t // 32, t % 32
            if row < self.ones:
                val = Int32(0)
                if row == 0:
                    val = Int32(E4M3_ONE * 0x01010101)
                gV8t[d + row, blk * 32 + col] = val
