"""The reference numerics (wan_fp4.reference) against closed forms and float64 attention."""
import math
import warnings

import pytest
import torch

from wan_fp4 import formats, reference
from wan_fp4.eval.metrics import rel_l2 as _rel
from wan_fp4.modes import AFFINE_WAN, MAX_SCORE_LOG2, FP4Params, FP4RangeWarning

LOW_PRECISION = ("fp8", "direct-p", "direct-p-fp4")


def _qkv(b, sq, skv, h, d, seed, q_std=1.0):
    g = torch.Generator().manual_seed(seed)
    q = (torch.randn(b, sq, h, d, generator=g) * q_std).to(torch.bfloat16)
    k = torch.randn(b, skv, h, d, generator=g).to(torch.bfloat16)
    v = torch.randn(b, skv, h, d, generator=g).to(torch.bfloat16)
    return q, k, v


def _exact(q, k, v, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) * scale
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), v.double()), torch.logsumexp(s, -1)


@pytest.mark.parametrize("shape", [(1, 200, 333, 3, 64), (2, 129, 129, 2, 128), (1, 70, 512, 1, 256),
                                   (2, 45, 300, 2, 48)])
def test_bf16_mode_is_exact_attention(shape):
    b, sq, skv, h, d = shape
    q, k, v = _qkv(b, sq, skv, h, d, seed=sum(shape))
    out, lse = reference.attention(q.float(), k.float(), v.float(), "bf16", return_lse=True)
    ref, ref_lse = _exact(q, k, v)
    assert _rel(out, ref) < 1e-5  # FP32 arithmetic on exact BF16 inputs
    assert (lse.double() - ref_lse).abs().max() < 1e-4


# Error bounds against float64 attention on N(0,1) inputs (D=128, 300 x 517 keys). On such data
# attention is nearly uniform, so the output's relative error is close to V's own rounding error:
# E4M3 (3 mantissa bits) rounds with an RMS relative error of about 2^-4/sqrt(3) = 3.6% per value,
# and P adds as much again: ~5% measured, bound 9%. direct-p adds the Mitchell map (<= 6.1% high
# between integer exponents, partly cancelled by the denominator built from the same values):
# bound 10%. E2M1 V and P (1 mantissa bit, MXFP4 blocks) round by ~15-20% RMS each: ~35%
# measured, bound 45%. The lower bounds make sure a mode really quantises.
BOUNDS = {"fp8": (0.02, 0.09), "direct-p": (0.02, 0.10), "direct-p-fp4": (0.15, 0.45)}


@pytest.mark.parametrize("mode", LOW_PRECISION)
@pytest.mark.parametrize("q_std", [1.0, 2.0])
def test_low_precision_error_vs_float64(mode, q_std):
    q, k, v = _qkv(1, 300, 517, 2, 128, seed=11 + int(q_std), q_std=q_std)
    out = reference.attention(q, k, v, mode)
    assert out.dtype == torch.bfloat16 and out.shape == q.shape
    low, high = BOUNDS[mode]
    assert low < _rel(out, _exact(q, k, v)[0]) < high


@pytest.mark.parametrize("mode", LOW_PRECISION)
def test_awkward_shapes_run_and_stay_finite(mode):
    # B > 1, S_q != S_kv, neither a multiple of 128 or 32, odd H, D below 128 and not 2^n.
    q, k, v = _qkv(2, 131, 77, 3, 80, seed=5)
    out = reference.attention(q, k, v, mode)
    assert torch.isfinite(out.float()).all()
    assert _rel(out, _exact(q, k, v)[0]) < BOUNDS[mode][1] * 1.5


def test_cross_attention_to_512_keys():
    q, k, v = _qkv(1, 1000, 512, 2, 128, seed=6)
    ref = _exact(q, k, v)[0]
    for mode in LOW_PRECISION:
        assert _rel(reference.attention(q, k, v, mode), ref) < BOUNDS[mode][1]


@pytest.mark.parametrize("mode", ["fp8", "direct-p"])
def test_query_blocks_are_independent(mode):
    # Rows only share their 128-row Q scale block: the first block alone gives the same rows.
    q, k, v = _qkv(1, 300, 260, 2, 64, seed=7)
    full = reference.attention(q, k, v, mode)
    assert torch.equal(reference.attention(q[:, :128], k, v, mode), full[:, :128])


def test_denominators_are_the_sums_of_the_represented_probabilities():
    # With V constant the output is sum(P v) / l: exactly v when l is the sum of the same P that
    # feed the PV product (direct-p, direct-p-fp4), but not in fp8, whose l sums p before
    # rounding (its deviation is the relative rounding of sum P, < 2^-4).
    q, k, _ = _qkv(1, 150, 300, 2, 128, seed=8, q_std=2.0)
    v = torch.full_like(k, 2.0)  # exact in E4M3 and MXFP4 (code 6, alpha 2)
    for mode, lo, hi in (("direct-p", 0.0, 1e-6), ("direct-p-fp4", 0.0, 1e-6), ("fp8", 1e-6, 2.0 ** -4)):
        out = reference.attention(q.float(), k.float(), v.float(), mode)
        dev = (out / 2.0 - 1).abs().max().item()
        assert lo <= dev <= hi, (mode, dev)


@pytest.mark.parametrize("mode", ["fp8", "direct-p"])
def test_lse_tracks_exact_lse(mode):
    q, k, v = _qkv(1, 100, 300, 2, 128, seed=9, q_std=2.0)
    _, lse = reference.attention(q, k, v, mode, return_lse=True)
    _, ref_lse = _exact(q, k, v)
    # The LSE of the represented probabilities, with K's smoothing shift added back: off by the
    # E4M3 rounding of Q and K in the scores (~0.1 here at score std 2) and, for direct-p, the
    # Mitchell map (<= ln 1.0615).
    assert (lse.double() - ref_lse).abs().max() < 0.2


def _merge(o1, l1, o2, l2):
    top = torch.maximum(l1, l2)
    w1 = torch.exp(l1 - top).transpose(1, 2).unsqueeze(-1).double()
    w2 = torch.exp(l2 - top).transpose(1, 2).unsqueeze(-1).double()
    return (o1.double() * w1 + o2.double() * w2) / (w1 + w2)


@pytest.mark.parametrize("mode", LOW_PRECISION)
def test_key_chunks_merge_through_lse(mode):
    # What ring attention does: attend to two key chunks separately and merge by LSE.
    q, k, v = (t.float() for t in _qkv(1, 100, 300, 2, 128, seed=16, q_std=2.0))
    full = reference.attention(q, k, v, mode)
    merged = _merge(*reference.attention(q, k[:, :256], v[:, :256], mode, return_lse=True),
                    *reference.attention(q, k[:, 256:], v[:, 256:], mode, return_lse=True))
    if mode == "direct-p-fp4":
        # shiftless, chunk cut on a 32-key block: the same codes, so the same result
        assert _rel(merged, full) < 1e-5
    else:
        # each chunk has its own K mean and scales: the merge is as good as either result
        assert _rel(merged, _exact(q, k, v)[0]) < BOUNDS[mode][1]


def test_direct_p_bytes_rne_and_clamp():
    t = torch.tensor([-3.0, 0.5, 1.5, 2.5, 7.49, 119.5, 120.0, 125.5, 126.4, 130.0])
    # up to 126 (448, E4M3's largest finite value) a code is a byte; above, a guard clamp
    assert reference.direct_p_bytes(t).tolist() == [0, 0, 2, 2, 7, 120, 120, 126, 126, 126]


def test_direct_p_map_is_mitchell_on_the_e4m3_grid():
    # x on the 1/8 grid in [-14, 0]: t = 8x + 120 is an exact integer byte.
    x = torch.arange(-14 * 8, 1, dtype=torch.float32) / 8
    p = formats.e4m3_decode(reference.direct_p_bytes(8 * x + 120))
    exact = 256 * torch.exp2(x.double())
    ratio = p.double() / exact
    integer = x == x.round()
    assert torch.equal(p[integer].double(), exact[integer])  # exact at integer exponents
    assert ratio.min() >= 1.0
    f = 1 / math.log(2) - 1  # Mitchell's worst point: (1 + f) / 2^f
    assert ratio.max() <= (1 + f) / 2 ** f + 1e-12 and ratio.max() > 1.06
    assert (p[1:] >= p[:-1]).all()  # monotone
    below = formats.e4m3_decode(reference.direct_p_bytes(torch.tensor([8 * -15.0 + 120])))
    assert below.item() == 0.0


def test_fp4_p_codes_match_closed_form():
    g = torch.Generator().manual_seed(10)
    s = torch.randn(4, 6, 128, generator=g, dtype=torch.float32) * 20
    c = reference.log2_scale(1 / math.sqrt(128))
    q, e = reference.fp4_p_codes(s, torch.zeros(4, 6, 1), c, AFFINE_WAN)
    a, b = AFFINE_WAN
    blocks = s.double().unflatten(-1, (4, 32))
    e_ref = torch.floor(blocks.amax(-1) * c + 0.41503751).clamp(-126, 127)
    assert torch.equal(e.double(), e_ref)
    y = a * (blocks * c + math.log2(6) - e_ref.unsqueeze(-1)) + b
    q_ref = formats.e2m1_round(y.clamp(min=0).float()).double()
    # only values within float32 rounding of an E2M1 tie may differ
    near_tie = torch.zeros_like(y, dtype=torch.bool)
    for t in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0):
        near_tie |= (y - t).abs() < 1e-4
    mismatch = (q.unflatten(-1, (4, 32)).double() != q_ref) & ~near_tie
    assert not mismatch.any()
    # the block's largest score always lands on code 4 or 6 (x_max in [2.17, 3.17) -> y >= 4.42)
    assert (q.unflatten(-1, (4, 32)).amax(-1) >= 4).all()


def test_guard_rescues_large_logits():
    # Scores ~ N(0, 680^2) raw (c*s up to ~230): the shiftless map's block exponents leave the
    # E8M0 range, saturate, and flatten the largest probabilities; the guard's row reference
    # (anchor max + M ln 2) brings them back in range.
    q, k, v = _qkv(1, 64, 256, 1, 128, seed=12, q_std=60.0)
    ref = _exact(q, k, v)[0]
    with pytest.warns(FP4RangeWarning, match="enable the large-logit guard"):
        shiftless = _rel(reference.attention(q, k, v, "direct-p-fp4"), ref)
    with pytest.warns(FP4RangeWarning, match="anchor keys missed"):  # rescued, but not every row
        guarded = _rel(reference.attention(q, k, v, "direct-p-fp4", fp4=FP4Params(guard_margin=110.0)), ref)
    assert shiftless > 0.9  # nearly everything lost
    assert guarded < 0.75 * shiftless


def test_online_max_rescale_is_exact_when_max_does_not_move():
    # Keys ordered so the first tile holds every row's largest score: later tiles never move
    # the max, so tile order must not matter beyond FP32 summation order.
    q, k, v = _qkv(1, 64, 384, 1, 64, seed=13)
    s = torch.einsum("bqhd,bkhd->bqk", q.float(), k.float())
    best = s.argmax(dim=2).unique()
    assert best.numel() <= 128
    rest = torch.tensor([i for i in range(384) if i not in best.tolist()], dtype=torch.long)
    order = torch.cat([best, rest])
    out = reference.attention(q, k[:, order], v[:, order], "direct-p")
    assert _rel(out, _exact(q, k, v)[0]) < BOUNDS["direct-p"][1]


@pytest.mark.parametrize("bad, message", [
    (lambda q, k, v: (q[0], k, v), "4-d"),
    (lambda q, k, v: (q, k[:, :, :1], v), "agree"),
    (lambda q, k, v: (q[..., :32], k, v), "agree"),
])
def test_bad_shapes_name_the_argument(bad, message):
    q, k, v = _qkv(1, 10, 10, 2, 64, seed=14)
    with pytest.raises(ValueError, match=message):
        reference.attention(*bad(q, k, v), "fp8")


def test_unknown_mode():
    q, k, v = _qkv(1, 10, 10, 2, 64, seed=15)
    with pytest.raises(ValueError, match="mode must be one of"):
        reference.attention(q, k, v, "fp4")


def test_key_mean_does_not_depend_on_the_layout():
    # The smoothing mean is summed in float64 (exact for BF16 inputs), so a tensor holding a subset
    # of the heads (Ulysses), a transposed copy, or a permuted key order gives the same bits.
    k = (torch.randn(2, 5000, 6, 64, generator=torch.Generator().manual_seed(17)) * 3).to(torch.bfloat16)
    full = reference.key_mean(k)
    assert torch.equal(reference.key_mean(k[:, :, 2:5].contiguous()), full[:, 2:5])
    assert torch.equal(reference.key_mean(k.transpose(1, 2).contiguous().transpose(1, 2)), full)
    assert torch.equal(reference.key_mean(k[:, torch.randperm(5000)]), full)
    assert (full.double() - k.double().mean(dim=1)).abs().max() < 1e-6


@pytest.mark.parametrize("mode", LOW_PRECISION)
@pytest.mark.parametrize("where, bad", [("q", math.inf), ("k", -math.inf), ("v", math.nan)])
def test_non_finite_inputs_are_an_error_not_a_saturated_code(mode, where, bad):
    q, k, v = (t.float() for t in _qkv(1, 40, 50, 2, 64, seed=18))
    {"q": q, "k": k, "v": v}[where][0, 5, 1, 3] = bad
    with pytest.raises(ValueError, match=f"{where} contains NaN or inf"):
        reference.attention(q, k, v, mode)


# Huge but finite inputs: q * 1e8 or k * 1e30 turned 41-53% of direct-p outputs into NaN (its
# bias fl(120 - 8 m) loses the 120 once |m| >> 2^19), and fp8's kernels gave NaN rows for k * 1e30
# (its FMA fold, below). Both modes name the problem instead, as every kernel does.
@pytest.mark.parametrize("mode", ["fp8", "direct-p"])
@pytest.mark.parametrize("q_mul, k_mul", [(1e8, 1.0), (1.0, 1e30), (1e19, 1e19)])
def test_huge_scores_name_the_problem(mode, q_mul, k_mul):
    q, k, v = (t.float() for t in _qkv(1, 200, 200, 2, 128, seed=19))
    with pytest.raises(ValueError, match=rf"{mode}: q \. k .* q or k is far outside"):
        reference.attention(q * q_mul, k * k_mul, v, mode)


@pytest.mark.parametrize("mode", ["fp8", "direct-p"])
def test_finite_keys_whose_smoothing_overflows_are_an_error_not_nan(mode):
    # k - mean overflows FP32 for finite BF16 keys of opposite sign near its limit: that block's
    # scale would be inf and its codes NaN
    q, k, v = (t.float() for t in _qkv(1, 129, 129, 2, 64, seed=23))
    k[0, 0, 0, 0], k[0, 1:, 0, 0] = 3e38, -3e38
    with pytest.raises(ValueError, match=r"^k less its channel mean overflows FP32"):
        reference.attention(q, k, v, mode)


def test_fp8_fold_breaks_past_the_score_limit(monkeypatch):
    # fp8 takes p = 2^fl(s qk + fl(8 - m)), the kernels' FMA fold: the row max's own exponent is 8
    # plus z's rounding errors, each up to ulp(m) / 2, not exactly 8. At k * 1e30 (|m| ~ 2^103) 2^that overflows or
    # vanishes, so without the range check rows come out NaN, as they did on the H200.
    monkeypatch.setattr(reference, "check_score_range", lambda *args: None)
    q, _, v = (t.float() for t in _qkv(1, 200, 200, 2, 128, seed=19))
    out = reference.attention(q, (q * 1e30).bfloat16().float(), v, "fp8")
    assert not torch.isfinite(out).all()


def _just_inside_the_score_limit(seed):
    """q and keys = q scaled so that each row's own score is 0.9 of modes.MAX_SCORE_LOG2."""
    q, _, v = _qkv(1, 200, 200, 2, 128, seed=seed)
    c = reference.log2_scale(1 / math.sqrt(128))
    norm = q.float().norm(dim=-1).max().item()
    q = (q.float() * (0.9 * MAX_SCORE_LOG2 / (c * norm * norm)) ** 0.5).bfloat16()
    return q, q, v


@pytest.mark.parametrize("mode", ["fp8", "direct-p"])
def test_scores_just_inside_the_limit_keep_the_modes_accuracy(mode):
    q, k, v = _just_inside_the_score_limit(seed=22)
    out = reference.attention(q, k, v, mode)
    assert _rel(out, _exact(q, k, v)[0]) < BOUNDS[mode][1]


def test_score_range_check_passes_large_ordinary_scores():
    # Scores up to ~5,000 (natural units) are far inside direct-p's range: no false alarm, and the
    # same output as fp8's up to its map (both near one-hot here).
    q, k, v = (t.float() for t in _qkv(1, 200, 200, 2, 128, seed=20))
    out = reference.attention(q * 30, k * 30, v, "direct-p")
    assert torch.isfinite(out).all()
    assert _rel(out, reference.attention(q * 30, k * 30, v, "fp8")) < 0.05


def _fp4_quiet(q, k, v, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FP4RangeWarning)
        return reference.attention(q, k, v, "direct-p-fp4", **kw)


def test_fp4_scales_at_the_e8m0_limit_warn():
    # q, k * 8: every row's shiftless block exponents saturate at 127, and the output is wrong
    # (cosine ~0.2 against exact attention). It used to be silent.
    q, k, v = _qkv(1, 256, 256, 2, 64, seed=21)
    with pytest.warns(FP4RangeWarning, match="enable the large-logit guard"):
        out = reference.attention(q * 8, k * 8, v, "direct-p-fp4")
    assert torch.nn.functional.cosine_similarity(out.double().flatten(), _exact(q * 8, k * 8, v)[0].flatten(),
                                                 dim=0) < 0.5
    _fp4_quiet(q, k, v)  # ordinary scores: silent
    # every score ~ -200 (log2 units) below m: all block exponents clamp at -126, every code is 0
    u = torch.nn.functional.normalize(torch.randn(1, 1, 1, 64, generator=torch.Generator().manual_seed(22)), dim=-1)
    with pytest.warns(FP4RangeWarning):
        reference.attention(-u.expand(1, 40, 2, 64) * 40, u.expand(1, 50, 2, 64) * 40, v[:, :50], "direct-p-fp4")


def test_score_constant_is_the_papers_fp32_literal_at_d128():
    # The paper's kernel holds log2(e)/sqrt(128) as the FP32 literal 0.12751706, 25 ulps below the
    # correctly rounded value; other head dims (and explicit scales) use fl(log2(e) * scale).
    f32 = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731
    c = reference.log2_scale(1 / math.sqrt(128))
    assert c == f32(0.12751706).item()
    assert (f32(math.log2(math.e) / math.sqrt(128)).view(torch.int32) - f32(c).view(torch.int32)).item() == 25
    assert reference.log2_scale(1 / math.sqrt(64)) == f32(math.log2(math.e) / 8).item()
    assert reference.log2_scale(0.05) == f32(math.log2(math.e) * 0.05).item()

