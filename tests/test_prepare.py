"""The FP8 pre-pass (wan_fp4.kernels.prepare) gives the reference's codes and scales bit for bit.

Both implementations are checked on CPU: the torch path directly, the Triton kernels under the
Triton interpreter (TRITON_INTERPRET=1 must be set before triton is imported, so it is set here;
on CPU nothing else can run Triton). The GPU run of the same comparison is
`wan-fp4 check --kernels triton`.
"""
import importlib
import math
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import pytest
import torch

from wan_fp4 import formats, reference

triton = pytest.importorskip("triton", reason="triton is not installed: the Triton pre-pass cannot run")
import triton.language as tl  # noqa: E402

from wan_fp4.kernels import prepare  # noqa: E402

if not hasattr(prepare._quant_kernel, "fn") or type(prepare._quant_kernel).__name__ != "InterpretedFunction":
    # imported earlier without the interpreter (another test module): rebuild the kernels
    prepare = importlib.reload(prepare)
    if "wan_fp4.kernels.triton.attention" in sys.modules:
        importlib.reload(sys.modules["wan_fp4.kernels.triton.attention"])


def _inputs(b, sq, skv, h, d, seed):
    """Random BF16 inputs with per-head magnitudes spread over 2^-6..2^6 (different scales per
    block and head) and a K with a large per-channel mean (so smoothing matters)."""
    g = torch.Generator().manual_seed(seed)
    mag = torch.exp2(torch.randint(-6, 7, (1, 1, h, 1), generator=g).float())
    q = torch.randn(b, sq, h, d, generator=g) * mag
    k = torch.randn(b, skv, h, d, generator=g) * mag + 3.0 * torch.randn(b, 1, h, d, generator=g)
    v = torch.randn(b, skv, h, d, generator=g) * mag.flip(2)
    return q.bfloat16(), k.bfloat16(), v.bfloat16()


def _assert_same_as_reference(prep, q, k, v):
    ref = reference.quantize_fp8(q, k, v)
    ours = prep.reference_layout()
    for name, got in ours.items():
        want = getattr(ref, name)
        assert got.shape == want.shape, f"{name}: shape {tuple(got.shape)} != {tuple(want.shape)}"
        if want.dtype == torch.float8_e4m3fn:
            diff = (got.view(torch.uint8) != want.view(torch.uint8)).sum().item()
            assert diff == 0, f"{name}: {diff} of {got.numel()} codes differ from the reference"
        else:
            assert torch.equal(got, want), f"{name}: scales differ from the reference"


# Shapes: S not a multiple of 128, Sq != Skv, B > 1, D a power of two and not (prepare takes any D).
SHAPES = [(2, 200, 333, 3, 64), (1, 129, 60, 2, 80)]


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_codes_and_scales_equal_reference(backend, shape):
    b, sq, skv, h, d = shape
    q, k, v = _inputs(b, sq, skv, h, d, seed=sum(shape))
    prep = prepare.prepare_fp8(q, k, v, backend=backend)
    _assert_same_as_reference(prep, q, k, v)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_layout_padding_and_strided_input(backend):
    b, sq, skv, h, d = 2, 150, 260, 2, 64
    q, k, v = _inputs(b, sq, skv, h, d, seed=7)
    # Non-contiguous views in (B, S, H, D), as a (B, H, S, D) projection transposed gives.
    qs, ks, vs = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    assert not qs.is_contiguous()
    prep = prepare.prepare_fp8(qs, ks, vs, backend=backend)
    assert prep.q8.shape == (b, h, 256, d) and prep.k8.shape == (b, h, 384, d)
    assert prep.v8t.shape == (b, h, d, 384)
    assert prep.q_scale.shape == (b, h, 2) and prep.k_scale.shape == (b, h, 3)
    for t in (prep.q8, prep.k8, prep.v8t):
        assert t.is_contiguous() and t.dtype == torch.float8_e4m3fn
    # Padding is zero codes (kernels rely on it: padded keys add nothing to PV).
    assert (prep.q8[:, :, sq:].view(torch.uint8) == 0).all()
    assert (prep.k8[:, :, skv:].view(torch.uint8) == 0).all()
    assert (prep.v8t[..., skv:].view(torch.uint8) == 0).all()
    _assert_same_as_reference(prep, q, k, v)


@pytest.mark.parametrize("programs", [None, *((w, c) for w, chunks in prepare.STATS_PROGRAMS for c in (chunks[0], chunks[-1]))])
def test_column_stats_pass_has_the_reference_bits(programs):
    """The Triton pass for the K mean (float64 partial sums over key chunks of the longest and
    shortest length of each program width it picks from; the length is an argument of one
    compiled loop) and the V channel amax equals reference.key_mean and the torch amax bit for bit,
    with strided (B, S, H, D) inputs and a K whose mean is large."""
    q, k, v = _inputs(2, 10, 1100, 3, 64, seed=21)  # 512-key chunks: two whole and one of 76 keys
    ks, vs = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (k, v))
    k_mean, v_amax = prepare._column_stats_triton(ks, vs, programs)
    assert torch.equal(k_mean, reference.key_mean(k))
    assert torch.equal(v_amax, prepare._v_amax(v))
    if programs is not None:  # the whole pre-pass with them (how the device profile times each)
        _assert_same_as_reference(prepare._prepare_triton(q, ks, vs, hw_cvt=False, programs=programs), q, k, v)


@pytest.mark.parametrize("loads", [16, 5])
def test_totals_in_the_quantise_launch_or_their_own_give_the_same_bytes(monkeypatch, loads):
    """The column totals taken by each K and V block of the quantise launch (16 key chunks of 64
    keys; with 5 partials loaded per step they take four steps, the last one partial) give the bytes
    of the totals' own launch, and both the reference's."""
    from wan_fp4.eval.op_count import count_ops

    q, k, v = _inputs(2, 70, 1000, 2, 64, seed=22)
    k = k + 3.0  # a mean worth subtracting
    monkeypatch.setattr(prepare, "TOTALS_LOADS", loads)
    monkeypatch.setattr(prepare, "FOLD_READS", 0)
    own = prepare._prepare_triton(q, k, v, hw_cvt=False, programs=(1, 64))
    monkeypatch.setattr(prepare, "FOLD_READS", 8192)
    box = {}
    made = count_ops(lambda: box.update(ops=prepare._prepare_triton(q, k, v, hw_cvt=False, programs=(1, 64))))
    assert made.triton == {"_column_stats_kernel": 1, "_quant_kernel": 1}, "2 x 2 heads x 8 blocks x 16 chunks fold"
    folded = box["ops"]
    for name in ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats"):
        a, b = getattr(own, name), getattr(folded, name)
        if a.dtype == torch.float8_e4m3fn:
            a, b = a.view(torch.uint8), b.view(torch.uint8)
        assert torch.equal(a, b), name
    _assert_same_as_reference(folded, q, k, v)


def test_stats_programs_fill_every_sm():
    """One-warp programs, the longest chunk that still gives every SM eight warps (H100/H200: 132
    SMs); four-warp programs where one-warp ones would need chunks under 32 keys."""
    assert prepare.stats_programs(75600, 40, 132) == (1, 512)  # 148 chunks x 40 heads = 5,920 programs
    assert prepare.stats_programs(32760, 12, 132) == (1, 256)  # 128 x 12 = 1,536; 512-key chunks give 768
    assert prepare.stats_programs(4096, 40, 132) == (1, 128)  # 32 x 40 = 1,280
    assert prepare.stats_programs(1024, 40, 132) == (1, 32)  # 32 x 40 = 1,280; 64-key chunks give 640
    assert prepare.stats_programs(1024, 12, 132) == (4, 64)  # 32-key one-warp programs give 384 warps
    assert prepare.stats_programs(512, 12, 132) == (4, 64)  # never below the last choice's shortest


def test_column_stats_refuse_a_chunk_that_is_not_whole_tiles():
    """A chunk that is not a whole number of a program's tiles (STATS_WARP_ROWS keys a warp) would
    read into the next chunk's keys and count them twice: refused by name, never summed."""
    _, k, v = _inputs(1, 10, 300, 2, 64, seed=5)
    assert all(c % (w * prepare.STATS_WARP_ROWS) == 0 for w, chunks in prepare.STATS_PROGRAMS for c in chunks)
    with pytest.raises(ValueError, match="STATS_WARP_ROWS"):
        prepare._column_stats_triton(k, v, (4, 48))


PERM = tuple((7 * i + 3) % 32 for i in range(32))  # any permutation of a 32-key block


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("ones", [0, 8])
def test_kernel_v_layout_permuted_keys_and_ones_rows(backend, ones):
    """A kernel's own V^T layout (keys permuted within 32-key blocks, ones rows appended) written
    by the pre-pass: the same codes as the plain layout, moved; rows after D are 1.0, 0, ..."""
    b, sq, skv, h, d = 2, 100, 300, 3, 64
    q, k, v = _inputs(b, sq, skv, h, d, seed=11)
    plain = prepare.prepare_fp8(q, k, v, backend=backend)
    perm = prepare.prepare_fp8(q, k, v, backend=backend, v_perm=PERM, v_ones_rows=ones)
    assert perm.v8t.shape == (b, h, d + ones, 384) and perm.v8t.is_contiguous()
    raw, got = plain.v8t.view(torch.uint8), perm.v8t.view(torch.uint8)
    for j in (0, 1, 31, 32, 45, 299, 383):
        src = 32 * (j // 32) + PERM[j % 32]
        assert torch.equal(got[:, :, :d, j], raw[:, :, :, src]), j
    if ones:
        assert bool((got[:, :, d] == 0x38).all()) and bool((got[:, :, d + 1:] == 0).all())
    assert torch.equal(perm.plain_v8t().view(torch.uint8), raw)
    _assert_same_as_reference(perm, q, k, v)


def test_kernel_v_layout_arguments_are_checked():
    q, k, v = _inputs(1, 40, 40, 1, 64, seed=1)
    with pytest.raises(ValueError, match="v_perm"):
        prepare.prepare_fp8(q, k, v, backend="torch", v_perm=tuple(range(31)) + (0,))
    with pytest.raises(ValueError, match="v_ones_rows"):
        prepare.prepare_fp8(q, k, v, backend="torch", v_ones_rows=3)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_all_zero_block_gets_scale_one(backend):
    q, k, v = _inputs(1, 300, 140, 2, 64, seed=3)
    q[:, 128:256, 1] = 0.0  # one whole 128-token block of one head
    v[:, :, 0, 5] = 0.0  # one whole V channel
    prep = prepare.prepare_fp8(q, k, v, backend=backend)
    assert prep.q_scale[0, 1, 1].item() == 1.0
    assert prep.v_scale[0, 0, 5].item() == 1.0
    _assert_same_as_reference(prep, q, k, v)


@triton.jit
def _scale_kernel(a_ptr, s_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    scale, inv = prepare._pow2_scale_tl(tl.load(a_ptr + offs, mask=offs < n, other=1.0))
    tl.store(s_ptr + offs, scale, mask=offs < n)


def test_pow2_scale_matches_reference():
    g = torch.Generator().manual_seed(11)
    amax = torch.cat([
        torch.exp2(torch.randn(2000, generator=g) * 30),  # wide range of exponents
        torch.exp2(torch.arange(-140, 120, dtype=torch.float32)) * 448,  # exact powers: no round up
        torch.tensor([0.0, 1e-45, 3e-39, 448.0, 448.00003, 3.0e38]),  # zero, r underflowing or subnormal, edges
    ])
    want = reference.pow2_scale(amax)
    got_tl = torch.empty_like(amax)
    _scale_kernel[(triton.cdiv(amax.numel(), 1024),)](amax, got_tl, amax.numel(), BLOCK=1024)
    assert torch.equal(got_tl, want)
    got = want
    assert torch.all(amax * (1.0 / 448) <= got * (1 + 2**-23))  # the scale covers amax


@triton.jit
def _encode_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    code = prepare.e4m3_rne_sat(x, False).to(tl.uint8, bitcast=True)
    tl.store(y_ptr + offs, code, mask=offs < n)


def test_bit_arithmetic_e4m3_encoder_is_rne_satfinite():
    """The encoder the interpreter path uses (and HW_CVT=False on GPU) equals formats.e4m3_encode
    on every E4M3 value, every tie between neighbours, one FP32 ulp either side of each tie, the
    saturation region and random values over the whole range, both signs."""
    grid = formats.e4m3_decode(torch.arange(0, 127, dtype=torch.uint8))  # 0 .. 448
    mids = (grid[:-1] + grid[1:]) / 2
    up = torch.nextafter(mids, torch.tensor(float("inf")))
    down = torch.nextafter(mids, torch.tensor(0.0))
    g = torch.Generator().manual_seed(5)
    rand = torch.exp2(torch.rand(4000, generator=g) * 30 - 20)
    sat = torch.tensor([447.9, 448.0, 463.99, 464.0, 479.0, 480.0, 1000.0, 3.0e38])
    pos = torch.cat([grid, mids, up, down, rand, sat, torch.tensor([2.0**-10, 2.0**-9 * 1.5, 1e-30])])
    x = torch.cat([pos, -pos]).contiguous()
    y = torch.empty(x.numel(), dtype=torch.uint8)
    _encode_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    want = formats.e4m3_encode(x)
    bad = (y != want).nonzero().flatten()
    assert bad.numel() == 0, f"{bad.numel()} mismatches, e.g. x={x[bad[:5]].tolist()} -> {y[bad[:5]].tolist()} want {want[bad[:5]].tolist()}"


def test_bad_arguments_are_named():
    q, k, v = _inputs(1, 10, 10, 1, 64, seed=1)
    with pytest.raises(ValueError, match="q must be"):
        prepare.prepare_fp8(q[0], k, v)
    with pytest.raises(ValueError, match="k and v"):
        prepare.prepare_fp8(q, k, v[:, :5])
    with pytest.raises(ValueError, match="backend"):
        prepare.prepare_fp8(q, k, v, backend="cuda")


def test_score_range_check_reads_nothing_back_while_a_cuda_graph_is_captured(monkeypatch, caplog):
    # .item() during capture is a CUDA error: the check must stay out of the way there, and say so.
    from wan_fp4.kernels import prepare

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 130, 1, 64, generator=g) for _ in range(3))
    ops = prepare.prepare_fp8(q * 1e8, k, v)
    with pytest.raises(ValueError, match="direct-p"):
        ops.check_score_range("direct-p", 0.125)
    monkeypatch.setattr(prepare, "capturing", lambda: True)
    monkeypatch.setattr(prepare, "_skipped_in_capture", [])
    monkeypatch.setattr(torch.Tensor, "item", lambda self: pytest.fail("read back during capture"))
    with caplog.at_level("WARNING", logger="wan_fp4"):
        ops.check_score_range("direct-p", 0.125)
        ops.check_score_range("direct-p", 0.125)
    assert sum("CUDA graph capture" in r.message for r in caplog.records) == 1


def _edge_inputs(kind, b, sq, skv, h, d, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, s, h, d, generator=g) for s in (sq, skv, skv))
    if kind == "zeros":
        q, k, v = q * 0, k * 0, v * 0
    elif kind == "huge":  # near the top of what K's smoothing keeps finite in FP32
        q, k, v = q * 1e30, k * 1e30, v * 3e37
    elif kind == "tiny":  # scales far below 1 (inputs kept clear of FP32's subnormals)
        q, k, v = q * 1e-30, k * 1e-30, v * 1e-30
    elif kind == "mixed":  # one zero head, one huge row, a block of exact ties at E4M3's top
        q[:, :, 0] = 0
        k[:, 5] *= 1e20
        v[:, :128] = 448.0
    return q.bfloat16(), k.bfloat16(), v.bfloat16()


def test_statistics_launch_zeroes_the_range_statistics_and_the_unit_counter_after_them():
    """The sm90 persistent kernel takes its units from the Int32 word after range_stats
    (UNIT_COUNTER): the statistics launch zeroes it with them, and the pre-pass allocates it there."""
    g = torch.Generator().manual_seed(3)
    k, v = (torch.randn(1, 300, 2, 64, generator=g).bfloat16() for _ in range(2))
    words = torch.full((prepare.UNIT_COUNTER + 2,), 7.0)
    prepare._column_partials(k, v, words)
    assert words[: prepare.UNIT_COUNTER + 1].tolist() == [0.0] * (prepare.UNIT_COUNTER + 1)
    assert words[-1] == 7.0  # the launch writes nothing past the counter
    ops = prepare.prepare_fp8(k, k, v, backend="triton", quantise_q=False)
    storage = ops.range_stats.untyped_storage()
    assert ops.range_stats.numel() == prepare.RANGE_STATS
    assert storage.data_ptr() + storage.nbytes() - ops.range_stats.data_ptr() >= 4 * (prepare.UNIT_COUNTER + 1)


@pytest.mark.parametrize("kind", ["zeros", "huge", "tiny", "mixed"])
@pytest.mark.parametrize("d", [64, 128])
def test_one_launch_pre_pass_matches_torch_and_reference_at_the_edges(kind, d):
    """The Triton pre-pass (Q, K, V in one launch; column totals in another) gives the torch
    path's bytes, in the sm90 direct-p layout too, and the reference's codes and scales, for
    lengths that are not whole tiles and inputs at the edges of the range."""
    from wan_fp4.kernels.sm90.layout import v_layout_args

    q, k, v = _edge_inputs(kind, 2, 77, 300, 2, d, seed=d)
    for layout in ({}, v_layout_args("direct-p")):
        tri = prepare.prepare_fp8(q, k, v, backend="triton", **layout)
        ref = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
        for name in ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats"):
            got, want = getattr(tri, name), getattr(ref, name)
            if want.dtype == torch.float8_e4m3fn:
                got, want = got.view(torch.uint8), want.view(torch.uint8)
            assert got.shape == want.shape and torch.equal(got, want), f"{kind} D{d} {layout}: {name} differs"
        assert torch.equal(tri.range_stats, torch.stack((tri.q_scale.max(), tri.k_scale.max(), *torch.zeros(3))))
    _assert_same_as_reference(prepare.prepare_fp8(q, k, v, backend="triton"), q, k, v)


def test_pre_pass_and_score_check_launch_counts(monkeypatch):
    """The CUDA path's per-call work, counted on CPU: two Triton launches (three past FOLD_READS)
    and no torch kernel in the pre-pass, and a score-range check on ordinary inputs that runs no
    kernel and reads nothing back from the code tensors (only the range statistics the pre-pass
    wrote)."""
    from wan_fp4.eval.op_count import count_ops

    q, k, v = _inputs(1, 300, 300, 2, 128, seed=3)
    box = {}
    made = count_ops(lambda: box.update(ops=prepare.prepare_fp8(q, k, v, backend="triton")))
    assert made.triton == {"_column_stats_kernel": 1, "_quant_kernel": 1}
    assert made.torch_kernels == 0 and made.host_reads == 0 and made.allocations <= 5, made.summary()
    monkeypatch.setattr(prepare, "FOLD_READS", 0)  # as a call too long to fold
    long = count_ops(lambda: prepare.prepare_fp8(q, k, v, backend="triton"))
    assert long.triton == {"_column_stats_kernel": 1, "_column_totals_kernel": 1, "_quant_kernel": 1}
    checked = count_ops(lambda: box["ops"].check_score_range("direct-p", 128 ** -0.5))
    assert checked.summary()["launches"] == 0 and checked.host_reads == 0, checked.summary()


def test_score_check_clears_ordinary_inputs_on_the_scale_maxima_and_raises_on_huge(monkeypatch):
    q, k, v = _inputs(1, 200, 200, 2, 128, seed=4)
    ops = prepare.prepare_fp8(q, k, v, backend="triton")
    monkeypatch.setattr(reference, "_scaled_row_norm_max", lambda *a: pytest.fail("read the code rows"))
    check = ops.start_score_range_check("direct-p", 128 ** -0.5)
    check.finish()
    monkeypatch.undo()
    huge = prepare.prepare_fp8(q * 1e8, k, v, backend="triton")
    for mode in ("direct-p", "fp8"):
        with pytest.raises(ValueError, match=rf"{mode}: q \. k .* can reach .* q or k is far outside"):
            huge.start_score_range_check(mode, 128 ** -0.5).finish()


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("name, value, block", [("q", float("nan"), 0), ("k", float("inf"), 2),
                                                ("v", float("nan"), 1), ("v", -float("inf"), 2)])
def test_non_finite_inputs_raise_naming_the_tensor(backend, name, value, block):
    """A NaN or inf anywhere (here one element in one 128-row block) raises the reference's error
    from the score check, whichever path quantised: on the GPU the amax can drop a NaN, and the
    kernels would give NaN rows or silently drop the key."""
    q, k, v = _inputs(1, 300, 300, 2, 64, seed=5)
    t = {"q": q, "k": k, "v": v}[name]
    t[0, block * 128 + 5, 1, 7] = value
    ops = prepare.prepare_fp8(q, k, v, backend=backend)
    assert ops.range_stats[2:].tolist() == [float(n == name) for n in ("q", "k", "v")]
    with pytest.raises(ValueError, match=rf"^{name} contains NaN or inf"):
        ops.check_score_range("direct-p", 64 ** -0.5)
    with pytest.raises(ValueError, match=rf"^{name} contains NaN or inf"):
        reference.attention(q, k, v, mode="direct-p")


def test_finite_keys_whose_smoothing_overflows_raise_not_nan():
    """k - mean overflows FP32 for finite keys of both signs near its limit. The torch path flags
    no non-finite input; its scale is inf, its codes NaN and the score bound NaN, which the check
    must not let through. (Triton's flag, taken after smoothing, raises
    the non-finite error instead.)"""
    q, k, v = _inputs(1, 129, 129, 2, 64, seed=7)
    k[0, 0, 0, 0], k[0, 1:, 0, 0] = 3e38, -3e38
    ops = prepare.prepare_fp8(q, k, v, backend="torch")
    assert ops.range_stats[2:].tolist() == [0.0, 0.0, 0.0] and math.isinf(ops.range_stats[1])
    with pytest.raises(ValueError, match=r"^k less its channel mean overflows FP32"):
        ops.check_score_range("direct-p", 64 ** -0.5)


@triton.jit
def _load_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32), mask=offs < n)


def _interpreter_loads_bf16_subnormals_exactly() -> bool:
    x = torch.tensor([2.0**-127, 2.0**-130 * 3, 2.0**-133]).bfloat16()
    y = torch.empty(3)
    _load_kernel[(1,)](x, y, 3, BLOCK=4)
    return torch.equal(y, x.float())


def _subnormal_inputs(dtype):
    """Q, K (with a per-channel mean) and V at their dtype's smallest normal (head 0) and 2^-7 of it
    (head 1): mostly subnormal values; for BF16 and FP32 inputs, FP32 subnormals."""
    g = torch.Generator().manual_seed(9)
    tiny = torch.finfo(dtype).tiny
    gain = torch.tensor([tiny, tiny * 2**-7]).view(1, 1, 2, 1)
    q, k, v = (torch.randn(1, s, 2, 64, generator=g) for s in (150, 300, 300))
    k = k + torch.randn(1, 1, 2, 64, generator=g)
    return tuple((t * gain).to(dtype) for t in (q, k, v))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float16])
def test_subnormal_inputs_give_the_reference_codes(dtype):
    """Subnormals are kept, never flushed: both paths give the reference's codes for subnormal Q, K
    and V. Triton's CPU interpreter converts subnormal BF16 to FP32 wrongly (its float conversion
    renormalises the mantissa but keeps exponent 0), so there the Triton path gets the same values
    as FP32, which the reference quantises identically; the GPU loads BF16 exactly and
    `wan-fp4 check --kernels triton` (the "prepare subnormal" cases) checks BF16 there."""
    q, k, v = _subnormal_inputs(dtype)
    assert all(((t.abs() < torch.finfo(dtype).tiny) & (t != 0)).sum() > t.numel() // 2 for t in (q, k, v))
    _assert_same_as_reference(prepare.prepare_fp8(q, k, v, backend="torch"), q, k, v)
    tq, tk, tv = q, k, v
    if dtype == torch.bfloat16 and not _interpreter_loads_bf16_subnormals_exactly():
        tq, tk, tv = (t.float() for t in (q, k, v))
        ref, ref32 = (vars(reference.quantize_fp8(*t)) for t in ((q, k, v), (tq, tk, tv)))
        bits = lambda t: t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t  # noqa: E731
        assert all(torch.equal(bits(ref[name]), bits(ref32[name])) for name in ref)
    _assert_same_as_reference(prepare.prepare_fp8(tq, tk, tv, backend="triton"), q, k, v)


def test_the_quantise_launch_takes_its_lengths_as_arguments_even_when_one():
    """Triton makes an integer argument equal to 1 a compile-time constant; so compiled for one
    token, the quantise launch left padding rows wrong on the GPU (BENCHMARKS.md, 2026-12-05 fifth
    run). Its lengths stay arguments (under the interpreter the setting is kept unused)."""
    kern = prepare._quant_kernel
    if hasattr(kern, "params"):  # compiled: the JIT function's own parameters
        kept = {p.name for p in kern.params if p.do_not_specialize}
    else:  # the interpreter keeps the decorator's settings
        kept = set(kern.kwargs["do_not_specialize"])
    assert set(prepare.LENGTH_ARGS) <= kept
    assert set(prepare.LENGTH_ARGS) <= set(kern.arg_names)


@pytest.mark.parametrize("l2", [0, 1 << 40])
def test_codes_kept_in_l2_or_not_are_the_same_bytes(monkeypatch, l2):
    """Keeping the codes in L2 (KEEP_CODES_IN_L2) only adds cache hints to the quantise launch: with
    an L2 that holds them or one that does not, the Triton path gives the reference's bytes."""
    monkeypatch.setattr(prepare, "_l2_bytes", lambda device: l2)
    q, k, v = _inputs(2, 200, 333, 3, 64, seed=31)
    _assert_same_as_reference(prepare._prepare_triton(q, k, v, hw_cvt=False), q, k, v)


def test_codes_are_kept_in_l2_only_where_they_all_fit(monkeypatch):
    """The quantise launch keeps its codes in L2 for the kernel when all of them fit (B1 H40 D128:
    2,048 tokens are 31.5 MB of codes, 4,096 tokens 63 MB, against the H100's and H200's 50 MB), and
    the launch is told so."""
    monkeypatch.setattr(prepare, "_l2_bytes", lambda device: 50 << 20)
    gpu = torch.device("cuda", 0)  # only a key here: _l2_bytes is stood in
    assert prepare.keep_codes(3 * 40 * 2048 * 128, gpu)
    assert not prepare.keep_codes(3 * 40 * 4096 * 128, gpu)
    seen = []

    class Spy:
        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append((kw["KEEP"], kw["READ_FIRST"]))

    monkeypatch.setattr(prepare, "_quant_kernel", Spy())
    q, k, v = _inputs(1, 130, 130, 2, 64, seed=32)  # 3 x 2 x 256 x 64 bytes of codes
    for l2 in (3 * 2 * 256 * 64, 3 * 2 * 256 * 64 - 1):
        monkeypatch.setattr(prepare, "_l2_bytes", lambda device, l2=l2: l2)
        prepare._prepare_triton(q, k, v, hw_cvt=False)
    monkeypatch.setattr(prepare, "_l2_bytes", lambda device: 50 << 20)
    monkeypatch.setattr(prepare, "READ_INPUTS_FIRST", False)
    prepare._prepare_triton(q, k, v, hw_cvt=False)  # codes kept, inputs read plainly
    monkeypatch.setattr(prepare, "KEEP_CODES_IN_L2", False)
    monkeypatch.setattr(prepare, "READ_INPUTS_FIRST", True)
    prepare._prepare_triton(q, k, v, hw_cvt=False)  # no hints: the input hint only comes with the codes'
    assert seen == [(True, True), (False, False), (True, False), (False, False)]


def test_the_quantise_launch_shape_follows_its_length(monkeypatch):
    """Eight warps at 80 registers (QUANT_SHORT) for a launch of a few rounds at head dim 128, four
    warps at ptxas's own registers elsewhere (H100/H200: 132 SMs), and the launch is given them."""
    short, long = prepare.QUANT_SHORT, prepare.QUANT_LONG
    assert short == (8, 80) and long == (4, None)
    assert prepare.quant_launch((8 + 16) * 40, 132, 128) == short  # B1 H40 1,024 tokens: 960 blocks
    assert prepare.quant_launch((16 + 32) * 40, 132, 128) == short  # 2,048 tokens: 1,920 blocks
    assert prepare.quant_launch((32 + 64) * 40, 132, 128) == long  # 4,096 tokens: 3,840 blocks
    assert prepare.quant_launch((256 + 8) * 12, 132, 128) == long  # the 1.3B model's cross attention
    assert prepare.quant_launch((8 + 16) * 40, 132, 64) == long  # head dim 64: eight warps measured slower
    seen = []

    class Spy:
        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append((kw["num_warps"], kw["maxnreg"]))

    monkeypatch.setattr(prepare, "_quant_kernel", Spy())
    monkeypatch.setattr(prepare, "_sm_count", lambda device: 1)
    q, k, v = _inputs(1, 130, 130, 2, 128, seed=33)  # (2 + 4) x 2 = 12 blocks on one SM
    prepare._prepare_triton(q, k, v, hw_cvt=False)
    monkeypatch.setattr(prepare, "QUANT_SHORT_BLOCKS", 11)
    prepare._prepare_triton(q, k, v, hw_cvt=False)
    assert seen == [short, long]


@pytest.mark.parametrize("pdl", [False, True])
def test_the_launches_after_the_statistics_go_as_its_programmatic_dependents(monkeypatch, pdl):
    """PDL_PREPASS: where `_pdl` allows it (sm90+ on the GPU; never under the interpreter) the
    statistics launch lets the next start at once (PDL), and the totals and quantise launches go
    as its programmatic dependents (Triton's launch_pdl), their kernels compiled to wait where they
    read what it wrote (tests/test_triton_kernels.py reads that in the sm_90 PTX). Otherwise every
    launch is a plain one."""
    assert prepare._pdl(torch.zeros(1)) is False  # a CPU tensor
    seen = []

    class Spy:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append((self.name, kw["PDL"], kw.get("launch_pdl", False)))

    for name in ("_column_stats_kernel", "_column_totals_kernel", "_quant_kernel"):
        monkeypatch.setattr(prepare, name, Spy(name))
    monkeypatch.setattr(prepare, "_pdl", lambda t: pdl)
    monkeypatch.setattr(prepare, "FOLD_READS", 0)  # the totals in a launch of their own
    q, k, v = _inputs(1, 130, 130, 2, 64, seed=33)
    prepare._prepare_triton(q, k, v, hw_cvt=False)
    assert seen == [("_column_stats_kernel", pdl, False), ("_column_totals_kernel", pdl, pdl),
                    ("_quant_kernel", pdl, pdl)]
