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

THREADS = 256  # thread t: channels 8 (t % 16) .. +8, rows 8 (t // 16) .. +8 of the CTA's block
INV_E4M3_MAX = 1.0 / 448.0


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


class ClusterKV:
    def __init__(self, n_blk: int, mode: str = "fp8"):
        assert 1 <= n_blk <= 8
        self.n = n_blk
        self.d = 128
        self.ones = ONES_ROWS if mode == "direct-p" else 0

    @cute.jit
    def __call__(self, p_q, p_k, p_v, p_q8, p_k8, p_v8t, p_qs, p_ks, p_vs, p_km, b: Int32, h: Int32, s: Int32,
                 stream):
        d, n = self.d, self.n
        w = Int64
        s_pad = n * 128
        dw = d // 2  # inputs (B, S, H, D) BF16 as words of channel pairs
        mQ = cute.make_tensor(cute.recast_ptr(p_q, dtype=Int32), cute.make_layout(
            (s, dw, (h, b)), stride=(cute.assume(w(h) * dw, divby=4), 1, (dw, cute.assume(w(s) * h * dw, divby=4)))))
        mK = cute.make_tensor(cute.recast_ptr(p_k, dtype=Int32), cute.make_layout(
            (s, dw, (h, b)), stride=(cute.assume(w(h) * dw, divby=4), 1, (dw, cute.assume(w(s) * h * dw, divby=4)))))
        mV = cute.make_tensor(cute.recast_ptr(p_v, dtype=Int32), cute.make_layout(
            (s, dw, (h, b)), stride=(cute.assume(w(h) * dw, divby=4), 1, (dw, cute.assume(w(s) * h * dw, divby=4)))))
        d4, k4 = d // 4, s_pad // 4  # outputs as words of four codes
        mQ8 = cute.make_tensor(cute.recast_ptr(p_q8, dtype=Int32), cute.make_layout(
            (s_pad, d4, (h, b)), stride=(d4, 1, (w(s_pad) * d4, w(h) * s_pad * d4))))
        mK8 = cute.make_tensor(cute.recast_ptr(p_k8, dtype=Int32), cute.make_layout(
            (s_pad, d4, (h, b)), stride=(d4, 1, (w(s_pad) * d4, w(h) * s_pad * d4))))
        dv = d + self.ones
        mV8t = cute.make_tensor(cute.recast_ptr(p_v8t, dtype=Int32), cute.make_layout(
            (dv, k4, (h, b)), stride=(k4, 1, (w(dv) * k4, w(h) * dv * k4))))
        mQs = cute.make_tensor(p_qs, cute.make_layout((n, (h, b)), stride=(1, (n, w(h) * n))))
        mKs = cute.make_tensor(p_ks, cute.make_layout((n, (h, b)), stride=(1, (n, w(h) * n))))
        mVs = cute.make_tensor(p_vs, cute.make_layout((d, (h, b)), stride=(1, (d, w(h) * d))))
        mKm = cute.make_tensor(p_km, cute.make_layout((d, (h, b)), stride=(1, (d, w(h) * d))))
        self.kernel(mQ, mK, mV, mQ8, mK8, mV8t, mQs, mKs, mVs, mKm, h, s).launch(
            grid=[n, b * h, 1], block=[THREADS, 1, 1], cluster=[n, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mQ, mK, mV, mQ8, mK8, mV8t, mQs, mKs, mVs, mKm, h: Int32, s: Int32):
        t, _, _ = cute.arch.thread_idx()
        blk, bh, _ = cute.arch.block_idx()
        hh, bb = bh % h, bh // h
        cg, rg = t % 16, t // 16
        smem = cutlass.memory.SmemAllocator()
        s_ksum = smem.allocate_tensor(Float64, cute.make_layout((16, 128)), 16)  # (row group, channel)
        s_vmax = smem.allocate_tensor(Float32, cute.make_layout((16, 128)), 16)
        p_k = smem.allocate_tensor(Float64, cute.make_layout(128), 16)  # this CTA's column partials
        p_v = smem.allocate_tensor(Float32, cute.make_layout(128), 16)
        t_k = smem.allocate_tensor(Float32, cute.make_layout(128), 16)  # the head's mean, channel amax
        t_v = smem.allocate_tensor(Float32, cute.make_layout(128), 16)
        s_red = smem.allocate_tensor(Float32, cute.make_layout((8, 2)), 16)  # (warp, K or Q)
        # V's codes in key order, (channel, key) bytes, read back in the kernel's key order
        s_vc = smem.allocate_tensor(cutlass.Uint8, cute.make_layout((128, 128), stride=(132, 1)), 16)

        gK, gV = mK[None, None, (hh, bb)], mV[None, None, (hh, bb)]
        kx = cute.make_rmem_tensor((8, 8), Float32)  # (row, channel) of the thread
        vx = cute.make_rmem_tensor((8, 8), Float32)
        wk = cute.make_rmem_tensor((4,), Int32)
        wv = cute.make_rmem_tensor((4,), Int32)
        for r in cutlass.range_constexpr(8):
            row = blk * 128 + rg * 8 + r
            for j in cutlass.range_constexpr(4):
                wk[j] = Int32(0)
                wv[j] = Int32(0)
            if row < s:
                cute.autovec_copy(cute.flat_divide(gK[row, None], (4,))[(None, cg)], wk)
                cute.autovec_copy(cute.flat_divide(gV[row, None], (4,))[(None, cg)], wv)
            for j in cutlass.range_constexpr(4):
                kx[r, 2 * j] = bf16_lo(wk[j])
                kx[r, 2 * j + 1] = bf16_hi(wk[j])
                vx[r, 2 * j] = bf16_lo(wv[j])
                vx[r, 2 * j + 1] = bf16_hi(wv[j])
        # column partials: the thread's 8 rows, then the CTA's 16 row groups, in float64 (exact for
        # BF16 inputs, so the head's total does not depend on the order)
        for j in cutlass.range_constexpr(8):
            acc = Float64(0.0)
            mx = Float32(0.0)
            for r in cutlass.range_constexpr(8):
                acc = acc + Float64(kx[r, j])
                mx = cute.arch.fmax(mx, cute.math.absf(vx[r, j]))
            s_ksum[rg, cg * 8 + j] = acc
            s_vmax[rg, cg * 8 + j] = mx
        cute.arch.sync_threads()
        if t < 128:
            acc = Float64(0.0)
            mx = Float32(0.0)
            for g in cutlass.range_constexpr(16):
                acc = acc + s_ksum[g, t]
                mx = cute.arch.fmax(mx, s_vmax[g, t])
            p_k[t] = acc
            p_v[t] = mx
        # the cluster's partials: every CTA adds all blocks' in block order
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()
        if t < 128:
            acc = Float64(0.0)
            mx = Float32(0.0)
            for r in cutlass.range_constexpr(self.n):
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

        # K: smoothed, the block's scale, codes (rows past s stay zero codes)
        amax = Float32(0.0)
        for r in cutlass.range_constexpr(8):
            row = blk * 128 + rg * 8 + r
            for j in cutlass.range_constexpr(8):
                x = Float32(0.0)
                if row < s:
                    x = kx[r, j] - t_k[cg * 8 + j]
                kx[r, j] = x
                amax = cute.arch.fmax(amax, cute.math.absf(x))
        gV8t = mV8t[None, None, (hh, bb)]
        out = cute.make_rmem_tensor((2,), Int32)
        self.block_codes(kx, amax, s_red, 0, mKs, mK8[None, None, (hh, bb)], out, t, blk, bh, h)
        # V: per-channel scales; the codes go through shared memory so that each thread stores 8
        # columns of the kernel's key order (column k of a 32-key group holds key SIGMA[k])
        s_vw = cute.make_tensor(cute.recast_ptr(s_vc.iterator, dtype=Int32),
                                cute.make_layout((128, 32), stride=(33, 1)))  # the same bytes as words
        for j in cutlass.range_constexpr(8):
            v_inv = pow2_scale(t_v[cg * 8 + j])[1]
            s_vw[cg * 8 + j, rg * 2] = pack_e4m3x4(vx[0, j] * v_inv, vx[1, j] * v_inv, vx[2, j] * v_inv, vx[3, j] * v_inv)
            s_vw[cg * 8 + j, rg * 2 + 1] = pack_e4m3x4(vx[4, j] * v_inv, vx[5, j] * v_inv, vx[6, j] * v_inv, vx[7, j] * v_inv)
        cute.arch.sync_threads()
        base = (rg // 4) * 32
        for j in cutlass.range_constexpr(8):
            ch = cg * 8 + j
            for m in cutlass.range_constexpr(4):
                if rg % 4 == m:
                    for half in cutlass.range_constexpr(2):
                        word = Int32(0)
                        for i in cutlass.range_constexpr(4):
                            key = base + SIGMA[8 * m + 4 * half + i]
                            word = word | (Int32(s_vc[ch, key]) << (8 * i))
                        out[half] = word
            cute.autovec_copy(out, cute.flat_divide(gV8t[ch, None], (2,))[(None, blk * 16 + rg)])
        if self.ones > 0:  # row D all E4M3 1.0, the rest zero, over the block's 128 columns
            row, col = t // 32, t % 32
            if row < self.ones:
                val = Int32(0)
                if row == 0:
                    val = Int32(E4M3_ONE * 0x01010101)
                gV8t[self.d + row, blk * 32 + col] = val
        # Q: its own block's scale and codes (kx's registers again)
        gQ = mQ[None, None, (hh, bb)]
        amax = Float32(0.0)
        for r in cutlass.range_constexpr(8):
            row = blk * 128 + rg * 8 + r
            for j in cutlass.range_constexpr(4):
                wk[j] = Int32(0)
            if row < s:
                cute.autovec_copy(cute.flat_divide(gQ[row, None], (4,))[(None, cg)], wk)
            for j in cutlass.range_constexpr(4):
                kx[r, 2 * j] = bf16_lo(wk[j])
                kx[r, 2 * j + 1] = bf16_hi(wk[j])
                amax = cute.arch.fmax(amax, cute.math.absf(kx[r, 2 * j]))
                amax = cute.arch.fmax(amax, cute.math.absf(kx[r, 2 * j + 1]))
        self.block_codes(kx, amax, s_red, 1, mQs, mQ8[None, None, (hh, bb)], out, t, blk, bh, h)
        cute.arch.cluster_wait()


    @cute.jit
    def block_codes(self, x, amax, s_red, slot: cutlass.Constexpr, m_scale, g_out, out, t, blk, bh, h):
        """A 128-row block's power-of-two scale from every thread's amax (warp shuffles, then the 8
        warps through s_red[:, slot]), stored at m_scale; the thread's (8 rows, 8 channels) of x as
        E4M3 codes into its rows of g_out (words of four codes)."""
        warp, lane, cg, rg = t // 32, t % 32, t % 16, t // 16
        for off in cutlass.range_constexpr(5):
            amax = cute.arch.fmax(amax, cute.arch.shuffle_sync_bfly(amax, offset=1 << off))
        if lane == 0:
            s_red[warp, slot] = amax
        cute.arch.sync_threads()
        amax = s_red[0, slot]
        for i in cutlass.range_constexpr(1, 8):
            amax = cute.arch.fmax(amax, s_red[i, slot])
        scale, inv = pow2_scale(amax)
        if t == 0:
            m_scale[blk, (bh % h, bh // h)] = scale
        for r in cutlass.range_constexpr(8):
            out[0] = pack_e4m3x4(x[r, 0] * inv, x[r, 1] * inv, x[r, 2] * inv, x[r, 3] * inv)
            out[1] = pack_e4m3x4(x[r, 4] * inv, x[r, 5] * inv, x[r, 6] * inv, x[r, 7] * inv)
            cute.autovec_copy(out, cute.flat_divide(g_out[blk * 128 + rg * 8 + r, None], (2,))[(None, cg)])


def _args(n_blk, ptrs=None, sizes=(1, 1, 128), stream=None):
    from cutlass.cute.runtime import make_fake_stream, make_ptr
    from cutlass.cute.typing import AddressSpace

    f8, f32, bf16 = cutlass.Float8E4M3FN, cutlass.Float32, cutlass.BFloat16
    dtypes = (bf16, bf16, bf16, f8, f8, f8, f32, f32, f32, f32)
    ptrs = ptrs or (0,) * len(dtypes)
    p = [make_ptr(dt, int(a), AddressSpace.gmem, assumed_align=16) for dt, a in zip(dtypes, ptrs)]
    return (*p, *(Int32(x) for x in sizes), stream if stream is not None else make_fake_stream())


def compile_for(n_blk: int, mode: str = "fp8", options: str = ""):
    return cute.compile(ClusterKV(n_blk, mode), *_args(n_blk), options=f"--gpu-arch sm_90a {options}".strip())


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

    kernels = {}
    d = 128
    for mode in ("direct-p", "fp8"):
        ones = ONES_ROWS if mode == "direct-p" else 0
        for b, s, h in ((1, 1024, 40), (2, 1000, 3), (1, 300, 12), (1, 512, 40), (1, 77, 5)):
            n = -(-s // 128)
            if (n, mode) not in kernels:
                kernels[n, mode] = compile_for(n, mode)
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            k = k + 3.0 * torch.randn(1, 1, h, d, device="cuda", dtype=torch.bfloat16)  # a mean to remove
            v = v * torch.rand(1, 1, h, d, device="cuda", dtype=torch.bfloat16) * 4  # scales per channel
            ref = prepare.prepare_fp8(q, k, v, **v_layout_args(mode))
            sp = n * 128

            def poisoned(*shape, f8=True):
                if f8:
                    return torch.full(shape, 0x7F, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)
                return torch.full(shape, float("nan"), device="cuda")

            q8, k8, v8t = poisoned(b, h, sp, d), poisoned(b, h, sp, d), poisoned(b, h, d + ones, sp)
            qs, ks = poisoned(b, h, n, f8=False), poisoned(b, h, n, f8=False)
            vs, km = poisoned(b, h, d, f8=False), poisoned(b, h, d, f8=False)
            ptrs = tuple(x.data_ptr() for x in (q, k, v, q8, k8, v8t, qs, ks, vs, km))

            def run():  # on the current stream (a graph captures on its own)
                stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
                kernels[n, mode](*_args(n, ptrs, (b, h, s), stream))

            run()
            torch.cuda.synchronize()
            same = {name: torch.equal(mine.view(torch.uint8) if mine.dtype == torch.float8_e4m3fn else mine,
                                      theirs.view(torch.uint8) if theirs.dtype == torch.float8_e4m3fn else theirs)
                    for name, mine, theirs in (("q8", q8, ref.q8), ("k8", k8, ref.k8), ("v8t", v8t, ref.v8t),
                                               ("q_scale", qs, ref.q_scale), ("k_scale", ks, ref.k_scale),
                                               ("v_scale", vs, ref.v_scale), ("k_mean", km, ref.k_mean))}
            print(f"{mode} B{b} H{h} S{s}: bitwise equal to prepare_fp8 {same}", flush=True)
            if (b, s, h) != (1, 1024, 40):
                continue
            ops = prepare.PreparedFP8(q8, k8, v8t, qs, ks, vs, km, s, s, torch.zeros(prepare.RANGE_STATS, device="cuda"),
                                      ref.v_perm, ref.v_ones_rows)
            out_chain = sm90.launch(ops, mode, d)[0]
            out_call = wan_fp4.attention(q, k, v, mode, kernel="sm90-cute")
            print(f"{mode} B{b} H{h} S{s}: the kernel on these operands == the whole call's output: "
                  f"{torch.equal(out_chain, out_call)}", flush=True)
            qkv8 = torch.empty(3, b, s, h, d, dtype=torch.float8_e4m3fn, device="cuda")

            def cast_qkv():
                qkv8[0].copy_(q)
                qkv8[1].copy_(k)
                qkv8[2].copy_(v)

            times = {
                "one cluster launch (statistics, Q, K, V codes)": graph_us(run),
                "prepare_fp8 (the pre-pass as it is)": graph_us(lambda: prepare.prepare_fp8(q, k, v, **v_layout_args(mode))),
                "torch E4M3 casts of Q, K and V (three copies)": graph_us(cast_qkv),
                "the kernel alone": graph_us(lambda: sm90.launch(ops, mode, d)),
                "the cluster launch, then the kernel": graph_us(lambda: (run(), sm90.launch(ops, mode, d))),
                "the whole call (wan_fp4.attention)": graph_us(lambda: wan_fp4.attention(q, k, v, mode, kernel="sm90-cute")),
            }
            for name, us in times.items():
                print(f"{mode} B{b} H{h} S{s} D{d} {name:50s} {us:6.1f} us from a CUDA graph", flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["compile"]:
        from wan_fp4.kernels.sm90.compile import ptx_of

        for n in (8, 3, 1):
            ptx = ptx_of(compile_for(n, "direct-p", "--keep-ptx"))
            counts = {i: ptx.count(i) for i in ("ld.global.v4", "ld.global.nc.v4", "st.global.v2", "mapa",
                                                 "ld.shared::cluster", "barrier.cluster.arrive", "barrier.cluster.wait",
                                                 "cvt.rn.satfinite.e4m3x2", "div.rn.f64", "cvt.rn.f32.f64")}
            print(f"compiled for sm_90a, {n} key blocks per head: {counts}")
    else:
        main_gpu()
