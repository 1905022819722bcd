"""Triton kernel: the exact emulation of direct-p-fp4 (docs/NUMERICS.md, "direct-p-fp4") on BF16 tensor cores.

For GPUs without FP4 tensor cores (Hopper, Ampere). The operands are the reference's own
(`formats.nvfp4_quantize_qk(..).dequantize()` for Q and K, `formats.mxfp4_quantize_v(v)
.dequantize_unscaled()` = code_V * alpha_V for V), all exact in BF16, heads first and zero
padded (see `fp4_emulation_attention`). Per 128-query tile, over 128-key tiles in key order:

    s = q-hat . k-hat          BF16 dot, FP32 accumulation (every product is exact)
    keys past S_kv: s = -inf
    per 32-key block (reference.fp4_p_codes, with FP32 constants identical to the reference's):
        g = fl(fl(max s - m) c);  e = clamp(floor(fl(g + 0.41503751)) + 127, 1, 254) - 127
        qb = fl(fma(-m, c, log2 6) - e);  y = fma(s, fl(A c), fma(A, qb, B))
        q = E2M1_rne_satfinite(max(y, 0))
    P~ = q 2^(e - r)           r = running row max of e (see below); exact in BF16
    acc = 2^(r_old - r) acc + P~ . V'   (BF16 dot, FP32);   l = 2^(r_old - r) l + sum P~ (FP32)
    out = acc / (6 l) (0 where l == 0), FP32;  lse = m scale + ln2 (log2(l / 6) + r)

Why a running shift r instead of the reference's fixed 2^-16 (modes.FP4_SCALE_SHIFT): the
reference holds 2^(e-16) q in FP32, exact down to 2^-149, but BF16 (the tensor-core operand)
stops at 2^-133, so a fixed shift is not exact for blocks with e < -116. Scaling every term of a
row by the same power of two changes no FP32 rounding, and 2^(r_old - r) is exact, so the
result equals the reference's up to FP32 accumulation order; terms that fall under 2^-126 of the
row's largest block (which carries a code >= 4, so a mass >= 4 2^r) are dropped, far below one
FP32 ulp of the sums. It also keeps the sums from overflowing (P~ <= 6); the wrapper raises
where the reference's FP32 sums would overflow instead.

Launched with enable_fp_fusion=False: the reference rounds fl(g + 0.41503751) after g, so the
compiler must not fuse a multiply into a following add; the FMAs the contract wants are tl.fma.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ...modes import LN2, P_EXP_MIN

_LN2 = tl.constexpr(LN2)  # compile-time constants: Triton reads globals only as tl.constexpr
_P_EXP_MIN = tl.constexpr(float(P_EXP_MIN))


@triton.jit
def _e2m1_rne(y, LADDER: tl.constexpr):
    """E2M1 round-to-nearest-even, saturating at 6, of y >= 0 (finite), as FP32 values."""
    if LADDER:
        # formats.e2m1_encode's ladder: ties at .25, 1.25, 2.5, 5 go down (strict >), ties at
        # .75, 1.75, 3.5 go up (>=); the halves add up exactly
        q = tl.where(y > 0.25, 0.5, 0.0)
        q += tl.where(y >= 0.75, 0.5, 0.0)
        q += tl.where(y > 1.25, 0.5, 0.0)
        q += tl.where(y >= 1.75, 0.5, 0.0)
        q += tl.where(y > 2.5, 1.0, 0.0)
        q += tl.where(y >= 3.5, 1.0, 0.0)
        q += tl.where(y > 5.0, 2.0, 0.0)
    else:
        # The grid spacing is 0.5 below 2, 1 below 4, 2 above: scale by 2, 1 or 1/2 (exact) and
        # round to an integer with the magic number 1.5*2^23 (FP32 RNE, ties to even = the even
        # E2M1 code); clamp first so the magic add stays in range, saturate at 6 after.
        yc = tl.minimum(y, 8.0)
        k = tl.where(yc < 2.0, 2.0, tl.where(yc < 4.0, 1.0, 0.5))
        kinv = tl.where(yc < 2.0, 0.5, tl.where(yc < 4.0, 1.0, 2.0))
        n = (yc * k + 12582912.0).to(tl.int32, bitcast=True) - 0x4B400000
        q = tl.minimum(n.to(tl.float32) * kinv, 6.0)
    return q


@triton.jit
def _pow2(d):
    """2^d for integer-valued FP32 d <= 0, built from the exponent bits (exact); 0 below 2^-126."""
    di = d.to(tl.int32)
    bits = (tl.maximum(di, -126) + 127) << 23
    return tl.where(di >= -126, bits.to(tl.float32, bitcast=True), 0.0)


@triton.jit
def _block_exponent(smax, m_row, c, pow2_bias):
    """e = clamp(floor(fl(fl(fl(smax - m) c) + bias)) + 127, 1, 254) - 127 (empty block: -inf -> 1)."""
    g = (smax - m_row) * c
    u = tl.floor(g + pow2_bias) + 127.0
    return tl.minimum(tl.maximum(u, 1.0), 254.0) - 127.0


@triton.jit
def _tile(acc, l_i, r_i, q_tile, k_base, v_base, pq_base, pe_base, j, Skv, Skv_pad,
          m_row, qb0, c, ac, aff_a, aff_b, pow2_bias, offs_m, offs_n, offs_d, Sq,
          DP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PB: tl.constexpr,
          MASK: tl.constexpr, RESHAPE: tl.constexpr, LADDER: tl.constexpr,
          IEEE_DOT: tl.constexpr, DEBUG_P: tl.constexpr):
    """One 128-key tile for one query tile."""
    NB: tl.constexpr = BLOCK_N // PB
    keys = j * BLOCK_N + offs_n
    kt = tl.load(k_base + keys[None, :] * DP + offs_d[:, None])  # (DP, BLOCK_N)
    if IEEE_DOT:
        s = tl.dot(q_tile, kt, input_precision="ieee", out_dtype=tl.float32)
    else:
        s = tl.dot(q_tile, kt, out_dtype=tl.float32)
    if MASK:  # keys past S_kv do not exist
        s = tl.where(keys[None, :] < Skv, s, float("-inf"))

    if RESHAPE:
        s3 = tl.reshape(s, (BLOCK_M, NB, PB))
        e = _block_exponent(tl.max(s3, axis=2), m_row[:, None], c, pow2_bias)  # (BLOCK_M, NB)
        bias = tl.fma(qb0[:, None] - e, aff_a, aff_b)  # fma(A, qb, B)
        y = tl.fma(s3, ac, bias[:, :, None])
        qc = _e2m1_rne(tl.maximum(y, 0.0), LADDER)  # -inf scores give y = -inf: code 0
        r_new = tl.maximum(r_i, tl.max(e, axis=1))
        w = _pow2(e - r_new[:, None])
        p = tl.reshape(qc * w[:, :, None], (BLOCK_M, BLOCK_N))
        if DEBUG_P:
            qc2 = tl.reshape(qc, (BLOCK_M, BLOCK_N))
            e2 = tl.reshape(tl.broadcast_to(e[:, :, None], (BLOCK_M, NB, PB)), (BLOCK_M, BLOCK_N))
    else:
        # Without reshapes: each block's max by masking the tile, the per-block values spread
        # back to its 32 keys by selects (more ALU work; for compilers that reject the reshape).
        blk = (offs_n // PB)[None, :]
        e2 = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        bias2 = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for b in tl.static_range(NB):
            smax_b = tl.max(tl.where(blk == b, s, float("-inf")), axis=1)
            e_b = _block_exponent(smax_b, m_row, c, pow2_bias)
            bias_b = tl.fma(qb0 - e_b, aff_a, aff_b)
            e2 = tl.where(blk == b, e_b[:, None], e2)
            bias2 = tl.where(blk == b, bias_b[:, None], bias2)
        y = tl.fma(s, ac, bias2)
        qc2 = _e2m1_rne(tl.maximum(y, 0.0), LADDER)
        r_new = tl.maximum(r_i, tl.max(e2, axis=1))
        p = qc2 * _pow2(e2 - r_new[:, None])

    if DEBUG_P:  # the codes and block exponents, for the codes-level test
        dbg = (offs_m[:, None] * Skv_pad + keys[None, :]).to(tl.int64)
        dmask = (offs_m[:, None] < Sq) & (keys[None, :] < Skv_pad)
        tl.store(pq_base + dbg, qc2, mask=dmask)
        tl.store(pe_base + dbg, e2, mask=dmask)

    alpha = _pow2(r_i - r_new)  # exact power of two; 1 when the shift did not move
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None]
    vt = tl.load(v_base + keys[:, None] * DP + offs_d[None, :])  # (BLOCK_N, DP)
    # P~ is exact in BF16 (a 2-bit code times a power of two >= 2^-127): the round trip through
    # bfloat16 is the identity; under the interpreter (FP32 operands) it checks that claim.
    p_op = p.to(tl.bfloat16).to(vt.dtype)
    if IEEE_DOT:
        acc = tl.dot(p_op, vt, acc, input_precision="ieee", out_dtype=tl.float32)
    else:
        acc = tl.dot(p_op, vt, acc, out_dtype=tl.float32)
    return acc, l_i, r_new


@triton.jit
def fp4_emulation_fwd(q_ptr, k_ptr, v_ptr, m_ptr, out_ptr, lse_ptr, r_ptr, pq_ptr, pe_ptr,
                      Sq, Skv, Skv_pad, H, sob, sos, soh,
                      c, ac, aff_a, aff_b, log2_6, pow2_bias, scale,
                      D: tl.constexpr, DP: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, PB: tl.constexpr, RESHAPE: tl.constexpr,
                      LADDER: tl.constexpr, IEEE_DOT: tl.constexpr, DEBUG_P: tl.constexpr):
    """q (B,H,Sq,DP), k and v (B,H,Skv_pad,DP) exact operands; m (B,H,Sq) row reference (raw
    units); out (B,Sq,H,D) float32 with strides (sob, sos, soh, 1); lse (B,H,Sq) float32;
    r (B,H,Sq) float32: each row's largest block exponent (at -126 or 127: clamped, out of range)."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // H
    h = bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, DP)
    row_ok = offs_m < Sq
    q_tile = tl.load(q_ptr + bh * Sq * DP + offs_m[:, None] * DP + offs_d[None, :],
                     mask=row_ok[:, None], other=0.0)
    m_row = tl.load(m_ptr + bh * Sq + offs_m, mask=row_ok, other=0.0)
    qb0 = tl.fma(-m_row, c, log2_6)  # fl(fma(-m, c, log2 6)); qb = fl(qb0 - e) per block
    k_base = k_ptr + bh * Skv_pad * DP
    v_base = v_ptr + bh * Skv_pad * DP
    pq_base = pq_ptr + bh * Sq * Skv_pad
    pe_base = pe_ptr + bh * Sq * Skv_pad

    acc = tl.zeros([BLOCK_M, DP], tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    r_i = tl.full([BLOCK_M], _P_EXP_MIN, tl.float32)  # the smallest block exponent
    n_full = Skv // BLOCK_N
    for j in range(0, n_full):  # full tiles: no key mask
        acc, l_i, r_i = _tile(acc, l_i, r_i, q_tile, k_base, v_base, pq_base, pe_base, j, Skv,
                              Skv_pad, m_row, qb0, c, ac, aff_a, aff_b, pow2_bias, offs_m,
                              offs_n, offs_d, Sq, DP, BLOCK_M, BLOCK_N, PB, False, RESHAPE,
                              LADDER, IEEE_DOT, DEBUG_P)
    if n_full * BLOCK_N < Skv:  # the ragged last tile
        acc, l_i, r_i = _tile(acc, l_i, r_i, q_tile, k_base, v_base, pq_base, pe_base, n_full,
                              Skv, Skv_pad, m_row, qb0, c, ac, aff_a, aff_b, pow2_bias, offs_m,
                              offs_n, offs_d, Sq, DP, BLOCK_M, BLOCK_N, PB, True, RESHAPE,
                              LADDER, IEEE_DOT, DEBUG_P)

    # out = acc / (6 l) as the reference rounds it: fl(6 l), then a correctly rounded division
    denom = 6.0 * l_i
    safe = tl.where(denom > 0.0, denom, 1.0)
    o = tl.math.div_rn(acc, tl.broadcast_to(safe[:, None], (BLOCK_M, DP)))
    o = tl.where(denom[:, None] > 0.0, o, 0.0)  # every code underflowed: 0, never NaN
    optr = out_ptr + b * sob + h * soh + offs_m[:, None] * sos + offs_d[None, :]
    tl.store(optr, o, mask=row_ok[:, None] & (offs_d[None, :] < D))
    lse = m_row * scale + _LN2 * (tl.log2(l_i / 6.0) + r_i)
    tl.store(lse_ptr + bh * Sq + offs_m, lse, mask=row_ok)
    tl.store(r_ptr + bh * Sq + offs_m, r_i, mask=row_ok)
