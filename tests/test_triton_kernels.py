"""The Triton fp8 / direct-p attention kernel against the reference, on CPU (Triton interpreter).

The interpreter runs the kernel's own code: the same tiles, the FP8 dots (it multiplies the E4M3
values exactly and sums in FP32), the FMA-only Direct-P byte map and the online softmax. Two
interpreter casts are wrong (FP32 -> FP8 mis-rounds across a binade, FP32 -> BF16 truncates), so
under the interpreter the kernel uses its bit-arithmetic conversions (HW_CVT=False); the hardware
casts are checked on the GPU by `wan-fp4 check --kernels triton`.

Tolerance against the reference: only the FP32 summation order of the two dots differs
(numpy vs torch), which moves scores by a few ulp; that flips a P byte or a BF16 output rounding
only next to a rounding tie. So outputs agree to a relative L2 error <= 1e-3 (one BF16 ulp is
2^-8 = 3.9e-3; a flip changes one element by about one ulp) and at most 1% of BF16 outputs
differ at all. Against float64 exact attention we check that the kernel's error equals the
reference's (the mode's own error) to 2%.
"""
import importlib
import math
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed: the Triton kernel cannot run")

import wan_fp4  # noqa: E402
from wan_fp4 import reference  # noqa: E402
from wan_fp4.eval.metrics import rel_l2 as _rel_l2  # noqa: E402
from wan_fp4.modes import MAX_SCORE_LOG2  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402

if type(prepare._quant_kernel).__name__ != "InterpretedFunction":
    # imported earlier without the interpreter (another test module): rebuild the kernels
    importlib.reload(prepare)
    if "wan_fp4.kernels.triton.attention" in sys.modules:
        importlib.reload(sys.modules["wan_fp4.kernels.triton.attention"])
from wan_fp4.kernels.triton import attention as tri  # noqa: E402

REL_L2_VS_REF = 1e-3
MAX_DIFFERING_FRACTION = 0.01


def _inputs(b, sq, skv, h, d, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, sq, h, d, generator=g)
    k = torch.randn(b, skv, h, d, generator=g) * 1.5 + torch.randn(b, 1, h, d, generator=g)
    v = torch.randn(b, skv, h, d, generator=g)
    return q.bfloat16(), k.bfloat16(), v.bfloat16()


def _exact(q, k, v, scale):
    qd, kd, vd = (t.double().transpose(1, 2) for t in (q, k, v))
    p = torch.softmax(qd @ kd.transpose(-1, -2) * scale, dim=-1)
    return (p @ vd).transpose(1, 2)


CASES = [  # (B, Sq, Skv, H, D): ragged tiles, Sq != Skv both ways, B > 1, both head dims
    (2, 200, 333, 3, 64),
    (1, 129, 100, 2, 128),
]


@pytest.mark.parametrize("mode", ["fp8", "direct-p"])
@pytest.mark.parametrize("case", CASES, ids=lambda s: "x".join(map(str, s)))
def test_matches_reference(mode, case):
    b, sq, skv, h, d = case
    q, k, v = _inputs(b, sq, skv, h, d, seed=sum(case) + len(mode))
    out, lse = tri.triton_attention(q, k, v, mode, return_lse=True)
    ref, ref_lse = reference.attention(q, k, v, mode, return_lse=True)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert torch.isfinite(out).all()
    err = _rel_l2(out, ref)
    differing = (out != ref).float().mean().item()
    assert err <= REL_L2_VS_REF, f"rel L2 vs reference {err:.2e}"
    assert differing <= MAX_DIFFERING_FRACTION, f"{differing:.2%} of outputs differ"
    # LSE: log of the same l, so it agrees to FP32 rounding of the sums (1e-4 absolute is ~1000 ulp)
    assert (lse - ref_lse).abs().max().item() <= 1e-4
    # The mode's true error (vs float64 exact attention) is the reference's, not ours.
    scale = 1 / math.sqrt(d)
    exact = _exact(q, k, v, scale)
    e_kernel, e_ref = _rel_l2(out, exact), _rel_l2(ref, exact)
    assert abs(e_kernel - e_ref) <= 0.02 * e_ref, f"kernel {e_kernel:.4f} vs reference {e_ref:.4f}"
    assert e_kernel < 0.15, f"{mode} error vs exact attention {e_kernel:.3f} is implausibly large"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_custom_scale_strided_inputs_and_fp16(dtype):
    q, k, v = (t.to(dtype) for t in _inputs(1, 140, 260, 2, 64, seed=9))
    qs = q.transpose(1, 2).contiguous().transpose(1, 2)  # (B, S, H, D) view with head-major storage
    out = tri.triton_attention(qs, k, v, "direct-p", scale=0.05)
    ref = reference.attention(q, k, v, "direct-p", scale=0.05)
    assert out.dtype == dtype
    assert _rel_l2(out, ref) <= REL_L2_VS_REF


def test_dispatch_runs_the_triton_kernel():
    q, k, v = _inputs(1, 130, 131, 2, 64, seed=4)
    out = wan_fp4.attention(q, k, v, mode="fp8", kernel="triton")
    ref = reference.attention(q, k, v, "fp8")
    assert _rel_l2(out, ref) <= REL_L2_VS_REF


def test_unsupported_inputs_are_refused_with_a_reason():
    q, k, v = _inputs(1, 20, 20, 1, 80, seed=2)
    ok, why = tri.is_supported(q, k, v, "direct-p")
    assert not ok and "head dim 80" in why
    with pytest.raises(ValueError, match="head dim 80"):
        tri.triton_attention(q, k, v, "direct-p")
    q, k, v = _inputs(1, 20, 20, 1, 64, seed=2)
    ok, why = tri.is_supported(q, k, v, "direct-p-fp4")
    assert not ok and "mode" in why
    ok, why = tri.is_supported(q, k[:, :, :, :32], v, "fp8")
    assert not ok and "shapes" in why
    assert tri.is_supported(q, k, v, "fp8") == (True, "")


@pytest.mark.parametrize("mode", ["fp8", "direct-p"])
@pytest.mark.parametrize("q_mul, k_mul", [(1e8, 1.0), (1.0, 1e30)])
def test_huge_scores_raise_like_the_reference(mode, q_mul, k_mul):
    # Without the range check these inputs gave NaN rows: direct-p's bias loses its 120, and
    # fp8's FMA fold (p = 2^fl(s qk + fl(8 - m))) overflows on the row max's own rounding error.
    q, k, v = (t.float() for t in _inputs(1, 130, 130, 1, 64, seed=5))
    with pytest.raises(ValueError, match=rf"{mode}: q \. k"):
        reference.attention(q * q_mul, k * k_mul, v, mode)
    with pytest.raises(ValueError, match=rf"{mode}: q \. k"):
        tri.triton_attention(q * q_mul, k * k_mul, v, mode)


@pytest.mark.parametrize("mode", ["fp8", "direct-p"])
def test_scores_just_inside_the_limit_match_the_reference(mode):
    # Keys = queries scaled so each row's own score is 0.9 of the limit. There one ulp of a raw
    # score moves its exponent by ulp(m) = 2^-5: the few rows whose own score the interpreter sums
    # in another FP32 order than torch differ by ~2%. Every other row must match exactly, which
    # the FMA fold does and rounding z before subtracting m (most rows off by up to 1.1%) does not.
    g = torch.Generator().manual_seed(6)
    q = torch.randn(1, 200, 2, 128, generator=g)
    v = torch.randn(1, 200, 2, 128, generator=g).bfloat16()
    c = reference.log2_scale(1 / math.sqrt(128))
    norm = q.norm(dim=-1).max().item()
    q = (q * (0.9 * MAX_SCORE_LOG2 / (c * norm * norm)) ** 0.5).bfloat16()
    out = tri.triton_attention(q, q, v, mode)
    ref = reference.attention(q, q, v, mode)
    assert torch.isfinite(out).all()
    assert (out != ref).any(dim=-1).float().mean() <= 0.1


def test_kernel_takes_the_reference_score_constant(monkeypatch):
    # c reaches the kernel as an FP32 scalar: it must be the reference's (the paper's literal at
    # D = 128), not a separately rounded log2(e) * scale.
    seen = []

    class Spy:
        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append(args[9])  # (q8, k8, v8t, 3 scales, k_mean, out, lse, c, ...)

    monkeypatch.setattr(tri, "_attn_fwd_kernel", Spy())
    q, k, v = _inputs(1, 130, 130, 1, 128, seed=6)
    tri.triton_attention(q, k, v, "direct-p")
    assert seen == [reference.log2_scale(1 / math.sqrt(128))]


COMPILE_FOR_SM90 = r'''
import re, struct, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from wan_fp4.modes import LN2
from wan_fp4.kernels import prepare
from wan_fp4.kernels.triton import attention as A
from wan_fp4.kernels.fp4_emulation import fp4_kernel as F

def ptx(fn, types, consts, **opts):
    fn = fn.fn if isinstance(fn, triton.runtime.Autotuner) else fn
    sig = {n: "constexpr" if n in consts else types.get(n, "i32") for n in fn.arg_names}
    src = ASTSource(fn=fn, signature=sig, constexprs=consts)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts).asm["ptx"]

ln2 = "0f%08X" % struct.unpack("<I", struct.pack("<f", LN2))[0]
f8, f32 = "*fp8e4nv", "*fp32"
for mode in (0, 1):
    text = ptx(A._attn_fwd_kernel, dict(q8=f8, k8=f8, v8t=f8, q_scale=f32, k_scale=f32, v_scale=f32,
               k_mean=f32, out="*bf16", lse=f32, c="fp32"),
               dict(D=128, BLOCK_M=128, BLOCK_N=128, MODE=mode, HW_CVT=True, WRITE_LSE=True, ROUND_BF16=False,
                    PV_SPLIT=True, QK_SPLIT=False, PROMOTE=0), num_warps=8, num_stages=2)
    assert ln2 in text, f"mode {mode}: no LN2 in the LSE"
text = ptx(F.fp4_emulation_fwd, {**{n: f32 for n in F.fp4_emulation_fwd.arg_names if n.endswith("_ptr")},
           **dict.fromkeys(("c", "ac", "aff_a", "aff_b", "log2_6", "pow2_bias", "scale"), "fp32")},
           dict(D=128, DP=128, BLOCK_M=128, BLOCK_N=128, PB=32, RESHAPE=True, LADDER=True, IEEE_DOT=False,
                DEBUG_P=False), num_warps=8, num_stages=2, enable_fp_fusion=False)
assert ln2 in text, "fp4 emulation: no LN2 in the LSE"
def quant_ptx(fold, keep, pdl, shape=prepare.QUANT_LONG, first=None):
    warps, maxnreg = shape
    return ptx(prepare._quant_kernel, dict(q_ptr="*bf16", k_ptr="*bf16", v_ptr="*bf16",
        mean_ptr=f32, amax_ptr=f32, ksum_ptr="*fp64", vmax_ptr=f32, perm_ptr="*i32", q8_ptr=f8, k8_ptr=f8,
        v8_ptr="*u8", q_scale_ptr=f32, k_scale_ptr=f32, v_scale_ptr=f32, stats_ptr=f32), dict(D=128, BLOCK_D=128,
        BLOCK_S=128, HW_CVT=True, PERM=True, ONES_ROWS=8, ONE_CODE=0x38, FOLD=fold, GROUP=prepare.TOTALS_LOADS,
        KEEP=keep, READ_FIRST=keep if first is None else first, PDL=pdl), num_warps=warps, **({} if maxnreg is None else {"maxnreg": maxnreg}))
quant = {args: quant_ptx(*args)
         for args in ((False, False, False), (True, False, False), (True, True, False), (True, False, True))}
stats, totals = ({pdl: ptx(prepare._column_stats_kernel, dict(k_ptr="*bf16", v_ptr="*bf16", ksum_ptr="*fp64",
    vmax_ptr=f32, stats_ptr=f32), dict(D=128, BLOCK_D=128, ROWS=prepare.STATS_WARP_ROWS, PDL=pdl),
    num_warps=1, maxnreg=prepare.STATS_MAXNREG) for pdl in (False, True)},
    {pdl: ptx(prepare._column_totals_kernel, dict(ksum_ptr="*fp64", vmax_ptr=f32, mean_ptr=f32, amax_ptr=f32),
    dict(D=128, BLOCK_D=128, GROUP=prepare.TOTALS_LOADS, PDL=pdl), num_warps=4, maxnreg=prepare.TOTALS_MAXNREG)
    for pdl in (False, True)})
# the maxima that flag non-finite inputs keep NaN (plain max.f32 returns the other operand)
for name, text in (("quantise", quant[False, False, False]), ("quantise, totals folded", quant[True, False, False]),
                   ("column stats", stats[False]), ("column totals", totals[False])):
    assert "max.NaN.f32" in text and not re.search(r"\bmax\.f32", text), name
# PDL: the statistics launch lets its dependents start at its top, the totals launch too before it
# waits, the quantise launch too (the attention kernel after it waits for it to finish) before its
# blocks wait (Q's only before their atomics); without PDL neither
assert "griddepcontrol.launch_dependents" in stats[True] and "griddepcontrol.wait" not in stats[True]
tot = totals[True]
assert -1 < tot.find("griddepcontrol.launch_dependents") < tot.find("griddepcontrol.wait") < tot.find("ld.global")
q_pdl = quant[True, False, True]
assert -1 < q_pdl.find("griddepcontrol.launch_dependents") < min(q_pdl.find("ld.global"), q_pdl.find("griddepcontrol.wait"))
# Q's code stores come before any wait; the first atomic and the first read of the partials after one
wait = q_pdl.find("griddepcontrol.wait")
partials = re.search(r"ld\.global(\.\S+)?\.(b|u|f)64", q_pdl).start()
assert -1 < q_pdl.find("st.global.b8") < wait < min(q_pdl.find("atom.global"), partials)
assert not any("griddepcontrol" in t for t in (*quant.values(), stats[False], totals[False]) if t is not q_pdl)
# every block (Q's, K's and V's, in that order in the PTX, one wait each) issues its rows' loads
# before it waits, so that none is left after the last wait; so does the short launches' shape (a
# call's at B1 H40 1,024 tokens: totals folded, codes kept in L2, PDL), under its register limit
short = quant_ptx(True, True, True, prepare.QUANT_SHORT)
assert f".maxnreg {prepare.QUANT_SHORT[1]}" in short and ".maxnreg" not in q_pdl
for text, load in ((q_pdl, "ld.global.b16"), (short, "ld.global.L1::evict_first.L2::cache_hint.b16")):
    waits = [m.start() for m in re.finditer(r"griddepcontrol\.wait", text)]
    rows = [text[a:b].count(load) for a, b in zip([0, *waits], [*waits, len(text)])]
    assert len(waits) == 3 and min(rows[:3]) > 0 and rows[3] == 0, rows
# KEEP: every code store is evict-last in L2 and every Q, K, V load evict-first; without it no hint at all
kept, plain = quant[True, True, False], quant[True, False, False]
first = kept.count("ld.global.L1::evict_first.L2::cache_hint.b16")
assert first and "ld.global.b16" not in kept, "a BF16 input read without evict-first"
assert kept.count("st.global.L1::evict_last.L2::cache_hint.b8") >= first, "codes stored without evict-last"
assert "createpolicy.fractional.L2::evict_last" in kept and "evict_" not in plain and "cache_hint" not in plain
# READ_FIRST off: the codes still stored evict-last, the inputs read with no hint
codes_only = quant_ptx(True, True, False, first=False)
assert "evict_first" not in codes_only and codes_only.count("ld.global.b16") == first
assert codes_only.count("st.global.L1::evict_last.L2::cache_hint.b8") == kept.count("st.global.L1::evict_last.L2::cache_hint.b8")
# folded, a K block's TOTALS_LOADS loads of its head's partial sums are unrolled (not one chunk per loop trip)
body = quant[True, False, False]
assert body.count("ld.global.b64") + body.count("ld.global.u64") + body.count("ld.global.f64") >= prepare.TOTALS_LOADS
print("ok")
'''


def _run_compile_script(script: str, timeout: int) -> None:
    """Run a script that compiles kernels with Triton's compiler (no GPU needed) in a fresh
    interpreter outside TRITON_INTERPRET, from the repo root; it must end by printing ok."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_kernels_compile_for_sm90_with_the_modes_constants():
    """The interpreter does not run Triton's compiler, which is stricter (e.g. about the globals a
    kernel reads): compile the attention, FP4-emulation and pre-pass kernels for sm_90, which
    needs no GPU, and find the modes' LN2 in the LSE code."""
    _run_compile_script(COMPILE_FOR_SM90, 900)


STATS_LOOP_SASS = r'''
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from wan_fp4.eval.sass_profile import _branch_target, _cuobjdump, find_cuobjdump, parse_sass
from wan_fp4.kernels import prepare

types = dict(k_ptr="*bf16", v_ptr="*bf16", ksum_ptr="*fp64", vmax_ptr="*fp32", stats_ptr="*fp32")
# what a launch specialises on: aligned pointers, unit column strides, the other strides and the
# chunk length multiples of 16 (every chunk of STATS_PROGRAMS is)
aligned = ("k_ptr", "v_ptr", "ksum_ptr", "vmax_ptr", "stats_ptr", "chunk_len", "skb", "sks", "skh", "svb", "svs", "svh")
exe = find_cuobjdump()


def compiled(fn, types, consts, aligned, **options):
    """fn compiled for sm_90a with `consts` as constexprs, the other arguments typed by `types`
    (default i32) and the `aligned` ones 16-divisible, as a launch specialises them."""
    names = list(fn.arg_names)
    sig = {n: "constexpr" if n in consts else types.get(n, "i32") for n in names}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in aligned}
    return triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options=options)


def loop_loads(kernel, reads):
    """(loads in the loop closed by the last backward branch, how many issue before the first
    instruction of `reads`) in the kernel's SASS."""
    ins = parse_sass(_cuobjdump(kernel.asm["cubin"], "-sass", exe))
    back = [i for i in ins if i.pred and (_branch_target(i) or i.addr) < i.addr]  # the loop's back edge
    body = [i for i in ins if _branch_target(back[-1]) <= i.addr < back[-1].addr]
    loads = [n for n, i in enumerate(body) if i.base == "LDG"]
    first = min(n for n, i in enumerate(body) if i.base in reads)
    return len(loads), sum(n < first for n in loads)


for warps, chunks in prepare.STATS_PROGRAMS:
    assert all(c % 16 == 0 for c in chunks), chunks
    consts = dict(D=128, BLOCK_D=128, ROWS=warps * prepare.STATS_WARP_ROWS, PDL=True, skd=1, svd=1)
    k = compiled(prepare._column_stats_kernel, types, consts, aligned, num_warps=warps, maxnreg=prepare.STATS_MAXNREG)
    loads, first = loop_loads(k, ("F2F", "HFMA2", "PRMT", "DADD", "FMNMX"))
    assert loads == 8, (warps, loads)  # K and V: 4 rows of 16 bytes a thread each
    assert first == loads, (warps, first, "loads issue before the first read of a loaded value")
# the totals' own launch: a step's TOTALS_LOADS float64 sums and as many maxima, all issued first
types = dict(ksum_ptr="*fp64", vmax_ptr="*fp32", mean_ptr="*fp32", amax_ptr="*fp32")
k = compiled(prepare._column_totals_kernel, types, dict(D=128, BLOCK_D=128, GROUP=prepare.TOTALS_LOADS, PDL=True),
             types, num_warps=4, maxnreg=prepare.TOTALS_MAXNREG)
loads, first = loop_loads(k, ("DADD", "FMNMX"))
assert loads == 2 * prepare.TOTALS_LOADS, loads
assert first == loads, ("totals", first, "loads issue before the first add")
print("ok")
'''


def test_statistics_loops_issue_all_their_loads_before_they_read_one():
    """The column statistics' loop, compiled for sm_90a as a launch specialises it, for each program
    width: each step's 8 loads (K's and V's rows, 16 bytes a thread) all issue before the first
    instruction that reads a loaded value, so that a step costs one round trip, not several.
    ptxas without STATS_MAXNREG (Triton 3.9 on the CPU, 3.6 on an H100) compiles some chunk lengths
    with each load read before the next issues (BENCHMARKS.md, 2026-12-06 second run). The same for
    the totals' own launch, whose 32 loads a step issue 6 before the first add without
    TOTALS_MAXNREG (Triton 3.9; BENCHMARKS.md, 2026-12-06 third run)."""
    from wan_fp4.eval.sass_profile import find_cuobjdump

    if find_cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton's bundled copy)")
    _run_compile_script(STATS_LOOP_SASS, 600)
