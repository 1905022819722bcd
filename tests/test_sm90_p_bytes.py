"""The sm90 kernel's two direct-p P-byte paths, as bit-exact numpy models of their PTX, give the
same E4M3 bytes (kernel.py `codes`/`pack`; docs/NUMERICS.md, direct-p):

    default    fma.rn.sat.f32(s, fl(qk 8/128), fl(bias/128)) + 1.5*2^16 -> low byte (PRMT)
    f16_bytes  fma.rn.f32(s, fl(qk 8 2^-24), fl(bias 2^-24)) -> cvt.rn.relu.f16 -> low byte (PRMT)

with bias = fma.rn.f32(m, -8, 120). The rounding tail is checked on every float32 t where
rounding decides a byte, and against the reference's clamp(rne(t), 0, 120); the whole chain on
(s, qk, m) drawn over all exponents, with exact ties.
"""
import numpy as np
import pytest
import torch

from wan_fp4 import reference
from wan_fp4.modes import DIRECT_P_ONE, DIRECT_P_SLOPE, MAX_SCORE_LOG2

F32 = np.float32


def fma_f32(a, b, c):
    """fma.rn.f32: a*b + c rounded once. The float64 product of two floats is exact; the sum is
    split exactly (TwoSum) and rounded to odd in float64 before the float32 rounding, which makes
    the double rounding exact (53 >= 24 + 2 bits)."""
    a, b, c = (np.asarray(x, dtype=F32).astype(np.float64) for x in (a, b, c))
    with np.errstate(invalid="ignore", over="ignore"):
        p = a * b
        hi = p + c
        bb = hi - p
        lo = (p - (hi - bb)) + (c - bb)
        even = (hi.view(np.int64) & 1) == 0
        nudge = np.isfinite(hi) & (lo != 0) & even
        hi = np.where(nudge, np.nextafter(hi, np.where(lo > 0, np.inf, -np.inf)), hi)
    return hi.astype(F32)


def bias_of(m):
    return fma_f32(m, -DIRECT_P_SLOPE, float(DIRECT_P_ONE))


def sat_path(s, qk, m):
    """The default path's bytes (uint8)."""
    x = fma_f32(s, F32(qk) * F32(DIRECT_P_SLOPE / 128.0), bias_of(m) * F32(1.0 / 128.0))
    x = np.where(np.isnan(x), F32(0), np.clip(x, F32(0), F32(1)))  # .sat: NaN -> +0
    y = (x + F32(1.5 * 2.0**16)).astype(F32)
    return (y.view(np.uint32) & 0xFF).astype(np.uint8)


def f16_path(s, qk, m):
    """The f16_bytes path's bytes (uint8). cvt.rn.relu.f16.f32: IEEE rne with f16 subnormals;
    relu makes negatives +0 and NaN the canonical 0x7fff."""
    x = fma_f32(s, F32(qk) * F32(DIRECT_P_SLOPE * 2.0**-24), bias_of(m) * F32(2.0**-24))
    h = x.astype(np.float16)
    assert np.array_equal(h.view(np.uint16), torch.from_numpy(x).to(torch.float16).numpy().view(np.uint16))
    bits = np.where(np.isnan(h), np.uint16(0x7FFF), np.where(h < 0, np.uint16(0), h.view(np.uint16)))
    return (bits & 0xFF).astype(np.uint8)


# s = t exactly: 8 qk = 1 and m = 15, so bias = 0 and t = fma(s, 1, 0) = s
T_QK, T_M = 0.125, 15.0


def _floats(lo_bits, hi_bits):
    return np.arange(lo_bits, hi_bits, dtype=np.uint32).view(F32)


def test_every_float_where_rounding_decides_a_byte():
    """Every float32 t in [0.25, 121]: both paths give clamp(rne(t), 0, 120), the reference's byte."""
    lo, hi = np.float32(0.25).view(np.uint32), np.float32(121.0).view(np.uint32)
    step = 1 << 21
    for start in range(int(lo), int(hi) + 1, step):
        t = _floats(start, min(start + step, int(hi) + 1))
        want = reference.direct_p_bytes(torch.from_numpy(t)).numpy()
        sel = t <= 120.5  # t's top end under the score-range guard (test_chain...)
        for path in (sat_path, f16_path):
            got = path(t, T_QK, T_M)
            bad = np.flatnonzero(sel & (got != want))
            assert bad.size == 0, f"{path.__name__}: t={t[bad[:5]]} got {got[bad[:5]]} want {want[bad[:5]]}"


def test_small_and_negative_t_give_byte_zero():
    """|t| < 0.25 (every binade down to the subnormals, sampled densely) and every negative t,
    -0 and -inf (the masked keys past S_kv) give byte 0 in both paths."""
    rng = np.random.default_rng(0)
    parts = [np.array([0.0, -0.0, -np.inf, np.float32(2.0**-149), -np.float32(2.0**-149)], dtype=F32)]
    for e in range(-149, 8):  # binade [2^e, 2^(e+1)): both ends, a few ulps in, random inside
        base = np.float32(2.0**e).view(np.uint32) if e >= -126 else np.uint32(1 << (e + 149))
        width = (1 << 23) if e >= -126 else (1 << (e + 149))
        offs = np.concatenate([np.arange(min(8, width)), width - 1 - np.arange(min(8, width)),
                               rng.integers(0, width, 4096)]).astype(np.uint32)
        vals = (base + offs).view(F32)
        parts += [vals, -vals]
    t = np.concatenate(parts)
    t = t[(t < 0.25) | (t < 0)]
    assert t.size > 500_000
    for path in (sat_path, f16_path):
        assert not path(t, T_QK, T_M).any(), path.__name__


def test_nan_scores_follow_the_ruling():
    """docs/NUMERICS.md: NaN scores lie outside the contract (the reference refuses non-finite
    inputs); the default path turns one into byte 0, the f16 path into the E4M3 NaN byte."""
    t = np.array([np.nan], dtype=F32)
    assert sat_path(t, T_QK, T_M)[0] == 0
    assert f16_path(t, T_QK, T_M)[0] == 0xFF


def _chain_case(rng, n_rows, width, exps):
    """Rows of raw scores s, the tile's qk and the row max m = fl(max s * qk), as in the kernel."""
    s = (rng.standard_normal((n_rows, width)) * 2.0 ** rng.integers(-30, 25, (n_rows, 1))).astype(F32)
    qk = (2.0 ** rng.integers(exps[0], exps[1], (n_rows, 1)) * rng.uniform(1, 2, (n_rows, 1))).astype(F32)
    m = (s.max(axis=1, keepdims=True) * qk).astype(F32)  # fl(max s * qk): numpy rounds once
    return s, qk, m


@pytest.mark.parametrize("exps", [(-140, -100), (-100, 20)], ids=["qk tiny (8 qk 2^-24 underflows)", "qk normal"])
def test_chain_gives_the_same_bytes(exps):
    """Whole chain on random s and qk over all magnitudes (rows inside the score-range guard):
    same bytes, and t <= 120.5 (so neither path needs a clamp at 120)."""
    rng = np.random.default_rng(1)
    s, qk, m = _chain_case(rng, 20_000, 128, exps)
    keep = (np.abs(m) < MAX_SCORE_LOG2)[:, 0]
    s, qk, m = s[keep], qk[keep], m[keep]
    assert s.shape[0] > 5_000
    t = fma_f32(s, qk * F32(DIRECT_P_SLOPE), bias_of(m))
    assert np.nanmax(t) <= 120.5
    a, b = sat_path(s, qk, m), f16_path(s, qk, m)
    assert np.array_equal(a, b)
    want = reference.direct_p_bytes(torch.from_numpy(t)).numpy()
    assert np.array_equal(a, want)
    if exps[0] > -120:
        assert len(np.unique(a)) == DIRECT_P_ONE + 1  # every byte occurs


def test_chain_ties_round_to_even_in_both_paths():
    """qk a power of two and s on a half-integer lattice of t: t hits every k + 0.5 exactly, where
    rne decides; both paths round to the even integer, as the reference."""
    rows = []
    for e in range(-20, 4):
        qk = F32(2.0**e)
        for m in (F32(0.0), F32(-3.0), F32(17.0), F32(2.0**e * 1000)):
            bias = bias_of(m)
            k = np.arange(-4, 125, dtype=np.float64) + 0.5
            s = ((k - np.float64(bias)) / 2.0 ** (e + 3)).astype(F32)
            rows.append((s, qk, m))
    for s, qk, m in rows:
        t = fma_f32(s, qk * F32(DIRECT_P_SLOPE), bias_of(m))
        sel = t <= 120.5
        want = reference.direct_p_bytes(torch.from_numpy(t)).numpy()
        assert np.array_equal(sat_path(s, qk, m)[sel], want[sel])
        assert np.array_equal(f16_path(s, qk, m)[sel], want[sel])
