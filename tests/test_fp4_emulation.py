"""The Triton direct-p-fp4 emulation kernel against the reference, on CPU (Triton interpreter).

The interpreter runs the kernel's own code: the tiles, the per-32-key block exponents and FMAs,
the E2M1 rounding, the running power-of-two shift and both dots. It cannot multiply BF16 (it
multiplies the raw 16-bit patterns), so here the operands are FP32 tensors holding the same
BF16-exact values, and P~ goes through a BF16 round trip inside the kernel (the interpreter's
cast truncates, so a P~ value not exact in BF16 would change and fail these tests). The BF16
tensor-core path is checked on the GPU by `wan-fp4 check --kernels fp4-emulation`.

Tolerances. Every product of both dots is exact, so kernel and reference differ only in the
FP32 summation order (numpy vs torch): scores move by an ulp, which flips a code only next to
a rounding tie of y or of g + 0.41503751 (expected never at these sizes; allowed: 1e-4 of the
codes). FP32 outputs (float32 inputs): rel L2 <= 1e-5 (a few FP32 ulp of order noise; a
single flipped code anywhere in these tensors gives ~1e-4). BF16 outputs: rel L2 <= 4e-3 (one
BF16 ulp is 2^-8 = 3.9e-3, an order-noise flip of an output rounding moves one element by one
ulp) and at most 1% of them differ. LSE: 1e-4 absolute (log2 of sums that agree to FP32 order).
"""
import importlib
import math
import os
import warnings

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

triton = pytest.importorskip("triton", reason="triton is not installed: the emulation kernel cannot run")
import triton.language as tl  # noqa: E402

from wan_fp4 import formats, reference  # noqa: E402
from wan_fp4.eval.metrics import rel_l2 as _rel_l2  # noqa: E402
from wan_fp4.modes import AFFINE_GENERIC, AFFINE_WAN, FP4Params, FP4RangeWarning  # noqa: E402
from wan_fp4.kernels import fp4_emulation as emu  # noqa: E402
from wan_fp4.kernels.fp4_emulation import fp4_kernel  # noqa: E402

if type(fp4_kernel.fp4_emulation_fwd).__name__ != "InterpretedFunction":
    # imported earlier without the interpreter (another test module): rebuild the kernels
    importlib.reload(fp4_kernel)
    importlib.reload(emu)

REL_L2_FP32 = 1e-5
REL_L2_BF16 = 4e-3
MAX_DIFFERING_BF16 = 0.01
MAX_CODE_MISMATCH = 1e-4
LSE_ATOL = 1e-4


def _inputs(b, sq, skv, h, d, seed, q_std=1.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, sq, h, d, generator=g) * q_std
    k = torch.randn(b, skv, h, d, generator=g) * 1.5 + torch.randn(b, 1, h, d, generator=g)
    v = torch.randn(b, skv, h, d, generator=g)
    return q.bfloat16(), k.bfloat16(), v.bfloat16()


# --------------------------------------------------------------------------------- E2M1 helper
@triton.jit
def _e2m1_probe(x_ptr, y_ptr, n, LADDER: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, fp4_kernel._e2m1_rne(x, LADDER), mask=offs < n)


@pytest.mark.parametrize("ladder", [True, False], ids=["ladder", "magic"])
def test_e2m1_rounding_matches_formats(ladder):
    """Both in-kernel E2M1 roundings equal formats.e2m1_round: every grid point, every tie and
    its FP32 neighbours, random values and far-out values (satfinite)."""
    grid = torch.tensor(formats.E2M1_VALUES)
    mids = (grid[:-1] + grid[1:]) / 2
    pts = torch.cat([grid, mids, torch.tensor([6.5, 7.0, 7.5, 8.0, 9.0, 1e4, 3e38])])
    inf = torch.tensor(float("inf"))
    x = torch.cat([pts, torch.nextafter(pts, inf), torch.nextafter(pts, -inf).clamp(min=0),
                   torch.rand(4000, generator=torch.Generator().manual_seed(1)) * 9.0])
    y = torch.empty_like(x)
    _e2m1_probe[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), LADDER=ladder, BLOCK=1024)
    want = formats.e2m1_round(x)
    bad = y != want
    assert not bad.any(), f"{x[bad][:5].tolist()} -> {y[bad][:5].tolist()}, want {want[bad][:5].tolist()}"


# ---------------------------------------------------------------------------------- codes level
@pytest.mark.parametrize("guard", [None, 110.0], ids=["shiftless", "guard"])
@pytest.mark.parametrize("reshape", [True, False], ids=["reshape", "select"])
def test_codes_and_exponents_match_reference(guard, reshape):
    """The kernel's E2M1 codes and block exponents equal reference.fp4_p_codes on the same scores."""
    b, sq, skv, h, d = 1, 70, 150, 2, 64
    q, k, v = _inputs(b, sq, skv, h, d, seed=7)
    affine = AFFINE_WAN
    qh, kh, vh, m = emu.prepare_operands(q, k, v, guard)
    skv_pad = kh.shape[2]
    pq = torch.full((b, h, sq, skv_pad), float("nan"))
    pe = torch.full_like(pq, float("nan"))
    out = torch.empty(b, sq, h, d)
    lse = torch.empty(b, h, sq)
    emu.launch(qh, kh, vh, m, out, lse, skv=skv, d=d, scale=1 / math.sqrt(d), affine=affine,
               reshape=reshape, debug_p=(pq, pe))
    s = torch.matmul(qh, kh.transpose(-1, -2))  # the same exact products, FP32
    s[..., skv:] = -math.inf
    code, e = reference.fp4_p_codes(s, m.unsqueeze(-1), reference.log2_scale(1 / math.sqrt(d)), affine)
    e = e.repeat_interleave(32, dim=-1)
    assert torch.isfinite(pq).all() and torch.isfinite(pe).all(), "kernel left codes unwritten"
    code_mismatch = (pq != code).float().mean().item()
    exp_mismatch = (pe != e).float().mean().item()
    assert code_mismatch <= MAX_CODE_MISMATCH and exp_mismatch <= MAX_CODE_MISMATCH, (
        f"codes differ {code_mismatch:.2e}, exponents differ {exp_mismatch:.2e}")
    assert (code[..., :skv] > 0).float().mean() > 0.05  # the scores exercise nonzero codes


# ------------------------------------------------------------------------------ outputs (FP32)
CASES = [  # (B, Sq, Skv, H, D, fp4 params, scale): ragged tiles, Sq != Skv both ways, B > 1
    ((2, 100, 150, 3, 64), FP4Params(affine=AFFINE_WAN), None),
    ((2, 100, 150, 3, 64), FP4Params(affine=AFFINE_GENERIC), None),
    ((2, 100, 150, 3, 64), FP4Params(affine=AFFINE_WAN, guard_margin=110.0), None),
    ((1, 130, 40, 2, 128), FP4Params(affine=AFFINE_WAN), None),
    ((1, 50, 70, 2, 80), FP4Params(affine=AFFINE_GENERIC, guard_margin=110.0), 0.07),  # D padded
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])) + (
    "-guard" if c[1].guard_margin else "") + f"-A{c[1].affine[0]}")
def test_fp32_output_matches_reference(case):
    (b, sq, skv, h, d), fp4, scale = case
    q, k, v = (t.float() for t in _inputs(b, sq, skv, h, d, seed=sq + skv + d))
    out, lse = emu.fp4_emulation_attention(q, k, v, scale=scale, fp4=fp4, return_lse=True)
    ref, ref_lse = reference.attention(q, k, v, "direct-p-fp4", scale, fp4=fp4, return_lse=True)
    assert out.shape == q.shape and out.dtype == torch.float32 and lse.shape == (b, h, sq)
    assert torch.isfinite(out).all()
    err = _rel_l2(out, ref)
    assert err <= REL_L2_FP32, f"rel L2 vs reference {err:.2e}"
    assert (lse - ref_lse).abs().max().item() <= LSE_ATOL


def test_bf16_output_matches_reference():
    q, k, v = _inputs(2, 100, 150, 3, 64, seed=3)
    out = emu.fp4_emulation_attention(q, k, v)
    ref = reference.attention(q, k, v, "direct-p-fp4")
    assert out.dtype == torch.bfloat16
    assert _rel_l2(out, ref) <= REL_L2_BF16
    assert (out != ref).float().mean().item() <= MAX_DIFFERING_BF16


def test_detects_a_different_map():
    """Negative control: the generic affine against a Wan-affine reference fails the FP32 bound."""
    q, k, v = (t.float() for t in _inputs(1, 60, 90, 2, 64, seed=11))
    out = emu.fp4_emulation_attention(q, k, v, fp4=FP4Params(affine=AFFINE_GENERIC))
    ref = reference.attention(q, k, v, "direct-p-fp4", fp4=FP4Params(affine=AFFINE_WAN))
    assert _rel_l2(out, ref) > 100 * REL_L2_FP32


def test_rows_with_tiny_exponents():
    """Rows whose every score is ~ -120 in log2 units: block exponents below -116, where the
    reference's fixed 2^(e-16) would underflow BF16; the kernel's running shift stays exact."""
    b, sq, skv, h, d = 1, 40, 100, 2, 64
    g = torch.Generator().manual_seed(5)
    u = torch.randn(1, 1, 1, d, generator=g)
    k = (u + 0.02 * torch.randn(b, skv, h, d, generator=g)).bfloat16().float()
    q = (-u + 0.02 * torch.randn(b, sq, h, d, generator=g)).bfloat16().float()
    v = torch.randn(b, skv, h, d, generator=g).bfloat16().float()
    scale = 121.0 / (u * u).sum().item() / math.log2(math.e)  # scores ~ -121 in log2 units
    qh, kh, _, _ = emu.prepare_operands(q, k, v)
    s = torch.matmul(qh, kh.transpose(-1, -2))[..., :96]  # the 3 full 32-key blocks
    _, e = reference.fp4_p_codes(s, torch.zeros(1), reference.log2_scale(scale), AFFINE_WAN)
    assert e.max() < -116 and e.min() > -126, (e.min(), e.max())  # the region the test is about
    out, lse = emu.fp4_emulation_attention(q, k, v, scale=scale, return_lse=True)
    ref, ref_lse = reference.attention(q, k, v, "direct-p-fp4", scale, return_lse=True)
    assert torch.isfinite(ref_lse).all()  # every row keeps nonzero codes
    assert ref.abs().amax() > 0.1  # the reference still represents these rows
    assert _rel_l2(out, ref) <= REL_L2_FP32
    assert ((lse - ref_lse) / ref_lse).abs().max() <= 1e-6


def test_overflow_raises_like_reference():
    """Scores far above the shiftless range: the reference's FP32 sums overflow and it raises;
    so does the kernel (its own sums cannot overflow, the wrapper checks the reference's)."""
    b, sq, skv, h, d = 1, 3, 300, 1, 32
    g = torch.Generator().manual_seed(2)
    q = (10 + torch.rand(b, sq, h, d, generator=g)).bfloat16()
    k = (10 + torch.rand(b, skv, h, d, generator=g)).bfloat16()
    v = (100 + torch.rand(b, skv, h, d, generator=g)).bfloat16()
    with pytest.raises(FloatingPointError, match="guard"):
        reference.attention(q, k, v, "direct-p-fp4")
    with pytest.raises(FloatingPointError, match="guard"):
        emu.fp4_emulation_attention(q, k, v)
    # with the guard on, both give the same finite result
    fp4 = FP4Params(guard_margin=110.0)
    out = emu.fp4_emulation_attention(q.float(), k.float(), v.float(), fp4=fp4)
    ref = reference.attention(q.float(), k.float(), v.float(), "direct-p-fp4", fp4=fp4)
    assert _rel_l2(out, ref) <= REL_L2_FP32


def test_rejects_bad_arguments():
    q, k, v = _inputs(1, 8, 8, 1, 64, seed=0)
    with pytest.raises(ValueError, match="mode"):
        emu.fp4_emulation_attention(q, k, v, mode="fp8")
    with pytest.raises(ValueError, match="head dim"):
        emu.fp4_emulation_attention(q[..., :63], k[..., :63], v[..., :63])
    with pytest.raises(ValueError, match="must agree"):
        emu.fp4_emulation_attention(q[..., :32], k, v)
    ok, why = emu.is_supported(q, k, v, "direct-p-fp4")
    assert not ok and "CUDA" in why
    ok, why = emu.is_supported(q, k, v, "direct-p")
    assert not ok and "direct-p" in why


@pytest.mark.parametrize("fp4", [FP4Params(), FP4Params(guard_margin=110.0)], ids=["shiftless", "guard"])
def test_scales_at_the_e8m0_limit_warn_like_reference(fp4):
    """Scores too large for the map (q, k * 8, D 64; with the guard the anchors miss them): the
    kernel reports the clamped block scales, as the reference does; ordinary scores stay silent."""
    q, k, v = _inputs(1, 130, 256, 1, 64, seed=3)
    for fn in (reference.attention, emu.fp4_emulation_attention):
        with pytest.warns(FP4RangeWarning):
            fn(q * 8, k * 8, v, "direct-p-fp4", fp4=fp4)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FP4RangeWarning)
            fn(q, k, v, "direct-p-fp4", fp4=fp4)
