"""The sm90 tail split (kernels/sm90/split.py) and the reference's keys in segments: the plan by
the shape alone, and the numerics a split row follows (docs/NUMERICS.md, "Keys in segments")."""
import math

import pytest
import torch

from wan_fp4 import formats, reference
from wan_fp4.eval.metrics import rel_l2
from wan_fp4.kernels.sm90.split import (MIN_SEGMENT_TILES, ROW_SPLIT_WAVES, SPLIT_WAVE, cta_work, key_range, plan,
                                         row_segments, row_split, segment_keys, tail_split)
from wan_fp4.modes import LOG2_P_SCALE, TILE_N


def _qkv(b, sq, skv, h, d, seed):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, s, h, d, generator=g).to(torch.bfloat16) for s in (sq, skv, skv))


@pytest.mark.parametrize("b, h, s_q, s_kv, cluster, want", [
    (1, 12, 32760, 32760, 2, (3072, 36, 3)),    # 23.27 waves: the last 36 tiles in thirds
    (1, 40, 32760, 32760, 2, (10240, 0, 1)),    # 77.58 waves: too full to split
    (1, 40, 75600, 75600, 2, (23680, 52, 2)),   # 591 tiles rounded to pairs: 179.39 waves
    (1, 40, 75600, 75600, 1, (23640, 12, 11)),  # 179.09 waves
    (1, 40, 1024, 1024, 1, (320, 0, 1)),        # 2.42 waves, but segments of 4 key tiles do not pay
    (1, 40, 7680, 7680, 1, (2400, 0, 1)),       # 60 key tiles: not two segments of 32
    (1, 40, 1024, 8192, 1, (320, 56, 2)),       # the same tiles over 64 key tiles: in halves
    (1, 2, 2048, 16384, 1, (32, 32, 4)),        # fewer CTAs than a wave: every tile split
    (1, 1, 100, 100, 1, (1, 0, 1)),
    (1, 66, 384, 384, 2, (264, 0, 1)),          # whole waves
])
def test_plan_by_the_shape(b, h, s_q, s_kv, cluster, want):
    p = plan(b, h, s_q, s_kv, cluster)
    assert (p.ctas, p.split, p.segments) == want
    assert p.grid == p.ctas - p.split + p.split * p.segments
    # the split wave fits a wave of the plan, and each segment has MIN_SEGMENT_TILES key tiles
    assert p.split * p.segments <= SPLIT_WAVE or p.split == 0
    assert p.split == 0 or -(-s_kv // TILE_N) // p.segments >= MIN_SEGMENT_TILES


def test_no_split_past_the_one_dimensional_grid():
    """A split launch's grid is 1-D with 32-bit index arithmetic: a launch of more CTAs stays whole
    (65,535 batch elements of 4,096 heads, 9 query tiles each: 2.4 G CTAs)."""
    p = plan(65535, 4096, 1152, 1152, min_tiles=1)
    assert p.ctas > 2**31 - 1 and (p.split, p.segments) == (0, 1)
    assert tail_split(p.ctas, 9, min_tiles=1)[0] > 0  # it would split, but for the grid
    assert plan(1000, 40, 1024, 1024, min_tiles=1).split > 0


def test_tail_split_edges():
    assert tail_split(132, 100) == (0, 1)
    assert tail_split(133, 100) == (1, 3)  # one tile left over: as many segments of 32 as it has
    assert tail_split(133, 10, min_tiles=1) == (1, 10)
    assert tail_split(133, 63) == (0, 1)
    assert tail_split(200, 1000) == (0, 1)  # 68 left over: 132 // 68 = 1, no split
    with pytest.raises(ValueError, match="key_tiles"):
        tail_split(10, 0)


@pytest.mark.parametrize("n, k", [(8, 2), (256, 3), (591, 11), (5, 5), (7, 3)])
def test_key_ranges_cover_the_keys_once(n, k):
    ranges = [key_range(s, k, n) for s in range(k)]
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(stop > start for start, stop in ranges)


@pytest.mark.parametrize("b, h, s_q, s_kv, cluster", [
    (1, 40, 1024, 1024, 1), (1, 12, 32760, 32760, 2), (2, 3, 1000, 900, 2), (1, 2, 200, 700, 1),
    (1, 40, 75600, 75600, 2)])
def test_cta_work_covers_each_tile_and_key_once(b, h, s_q, s_kv, cluster):
    """The kernel's CTA -> work arithmetic (split.cta_work, traced into the kernel with Int32), run
    on Python ints: every query tile's key tiles are covered exactly once, split tiles by their
    `segments` CTAs in segment order at the end of the grid, and a cluster's CTAs share their
    segment (so their K/V loads, shared by multicast, are the same tiles)."""
    p = plan(b, h, s_q, s_kv, cluster, min_tiles=1)  # short segments too: the arithmetic is the same
    n = -(-s_kv // TILE_N)
    n_full = p.ctas - p.split
    seen = {}
    works = [cta_work(lin, n_full, p.segments, p.tiles_m, h, cluster) for lin in range(p.grid)]
    works = [w + segment_keys(w[3], w[4], p.segments, n) for w in works]
    for lin, (m_blk, hh, bb, split, seg, ks, t0, count) in enumerate(works):
        tile = m_blk + p.tiles_m * (hh + h * bb)
        assert 0 <= m_blk < p.tiles_m and 0 <= hh < h and 0 <= bb < b
        assert split == tile - n_full and (ks > 1) == (split >= 0) and (ks == p.segments or ks == 1)
        assert (t0, t0 + count) == key_range(seg, ks, n) and count >= 1
        seen.setdefault(tile, []).append((seg, t0, t0 + count))
        if lin % cluster:  # the cluster's other CTA: the neighbouring tile, the same keys
            prev = works[lin - 1]
            assert prev[4:] == (seg, ks, t0, count) and prev[3] == split - 1 and prev[0] == m_blk - 1
    assert sorted(seen) == list(range(p.ctas))
    for tile, parts in seen.items():
        assert [s for s, _, _ in parts] == list(range(len(parts)))
        assert parts[0][1] == 0 and parts[-1][2] == n and all(a[2] == c[1] for a, c in zip(parts, parts[1:]))


@pytest.mark.parametrize("b, h, s_q, want", [
    (1, 40, 1024, (320, 56, 2)),   # 2.42 waves: the last 56 tiles in halves, 112 CTAs in one wave
    (2, 3, 1000, (48, 48, 2)),     # under one wave: every tile in halves
    (2, 4, 320, (24, 24, 2)),      # the trained model's self attention
    (1, 12, 1024, (96, 0, 1)),     # 0.73 waves: halves would not fit one wave
    (1, 40, 2048, (640, 0, 1)),    # 4.85 waves, the last 112 tiles: too full
    (1, 12, 32760, (3072, 0, 1)),  # 23 waves: more than ROW_SPLIT_WAVES
    (1, 66, 256, (132, 0, 1)),     # a whole wave
])
def test_row_split_by_the_shape(b, h, s_q, want):
    """tail_rows' plan: the last partial wave's tiles in halves where the halves fit one wave and
    the launch has at most ROW_SPLIT_WAVES waves; the keys play no part."""
    p = plan(b, h, s_q, 99, rows=True)
    assert (p.ctas, p.split, p.segments) == want and p.grid == p.ctas + p.split
    assert row_split(ROW_SPLIT_WAVES * SPLIT_WAVE + 1) == (0, 1) and row_split(3 * SPLIT_WAVE + 66) == (66, 2)
    with pytest.raises(ValueError, match="cluster 1"):
        plan(b, h, s_q, 99, cluster=2, rows=True)
    with pytest.raises(ValueError, match="ctas"):
        row_split(0)


@pytest.mark.parametrize("b, h, s_q", [(1, 40, 1024), (2, 3, 1000), (2, 4, 320), (3, 5, 129)])
def test_cta_work_by_rows_covers_each_tile_once_and_split_tiles_by_both_halves(b, h, s_q):
    """The same arithmetic for tail_rows (parts 2, cluster 1), run on Python ints: whole tiles
    first, one CTA each; each split tile then by two neighbouring CTAs, halves 0 and 1."""
    p = plan(b, h, s_q, 99, rows=True)
    n_full = p.ctas - p.split
    seen = {}
    for lin in range(p.grid):
        m_blk, hh, bb, split, half = cta_work(lin, n_full, 2, p.tiles_m, h, 1)
        tile = m_blk + p.tiles_m * (hh + h * bb)
        assert split == tile - n_full and (split >= 0) == (lin >= n_full)
        assert 0 <= m_blk < p.tiles_m and 0 <= hh < h and 0 <= bb < b
        seen.setdefault(tile, []).append(half if split >= 0 else -1)
    assert sorted(seen) == list(range(p.ctas))
    assert all(halves == ([-1] if tile < n_full else [0, 1]) for tile, halves in seen.items())


def test_row_segments_mark_the_last_ctas():
    seg = row_segments(2, 3, 1000, 9000, cluster=2)  # 8 tiles per head: 48 CTAs, all split
    assert seg.shape == (2, 3, 1000) and bool((seg == 2).all())
    seg = row_segments(1, 40, 1024, 8192)[0, :, ::128].flatten()  # the last 56 of 320 CTAs
    assert bool((seg[:264] == 1).all()) and bool((seg[264:] == 2).all())
    # cluster 2 with an odd tile count: the padding CTA counts in the plan, its rows do not exist
    assert row_segments(1, 1, 300, 300, cluster=2).shape == (1, 1, 300)


@pytest.mark.parametrize("mode", ["fp8", "direct-p"])
def test_one_segment_everywhere_is_the_mode(mode):
    q, k, v = _qkv(1, 300, 517, 2, 64, seed=1)
    ones = torch.ones(1, 2, 300, dtype=torch.long)
    a = reference.attention(q, k, v, mode, return_lse=True)
    b = reference.attention(q, k, v, mode, return_lse=True, segments=ones)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("mode", ["fp8", "direct-p"])
def test_split_rows_stay_as_accurate_and_the_rest_are_unchanged(mode):
    q, k, v = _qkv(1, 300, 1100, 2, 128, seed=2)
    seg = torch.ones(1, 2, 300, dtype=torch.long)
    seg[0, 1, 128:256], seg[0, 1, 256:] = 3, 9  # head 1's query tiles 1 and 2 split
    base, base_lse = reference.attention(q, k, v, mode, return_lse=True)
    out, lse = reference.attention(q, k, v, mode, return_lse=True, segments=seg)
    exact = reference.attention(q.float(), k.float(), v.float(), "bf16")
    same = torch.ones(300, 2, dtype=torch.bool)
    same[128:, 1] = False
    assert torch.equal(out[:, same], base[:, same])
    assert not torch.equal(out[:, ~same], base[:, ~same])  # split rows round their codes afresh
    err, base_err = rel_l2(out[:, ~same], exact[:, ~same]), rel_l2(base[:, ~same], exact[:, ~same])
    assert err < 1.2 * base_err + 1e-4
    # the LSE of the represented probabilities: fp8's are exact up to rounding, direct-p's move by
    # the codes' map error (up to 6.1% high between integer exponents)
    assert (lse - base_lse).abs().max() < (1e-5 if mode == "fp8" else 0.03)


def test_fp8_with_every_key_tile_its_own_segment_is_the_merge_of_tile_softmaxes():
    """Independent of the reference's loop: each key tile a fresh online softmax (its own max),
    merged by rescaling to the rows' largest max."""
    b, sq, skv, h, d = 1, 130, 300, 1, 64
    q, k, v = _qkv(b, sq, skv, h, d, seed=3)
    n = -(-skv // TILE_N)
    out = reference.attention(q, k, v, "fp8", segments=torch.full((1, 1, sq), n))
    ops = reference.quantize_fp8(q, k, v)
    c = reference.log2_scale(1 / math.sqrt(d))
    q8, k8, v8 = (x[0, :, 0].double() for x in (ops.q8.float(), ops.k8.float(), ops.v8.float()))
    sq_rows = ops.q_scale[0, :, 0].double().repeat_interleave(128)[:sq] * c
    states = []
    for t in range(n):
        keys = slice(t * TILE_N, min((t + 1) * TILE_N, skv))
        s_raw = (q8 @ k8[keys].T).float().double()
        qk = (sq_rows * ops.k_scale[0, t, 0].double()).float().double()
        m = (s_raw * qk[:, None]).float().amax(-1).double()
        arg = (s_raw * qk[:, None] + (LOG2_P_SCALE - m).float().double()[:, None]).float().double()
        p = torch.exp2(arg).float()
        states.append((m, p.double().sum(-1), formats.e4m3_round(p).double() @ v8[keys]))
    big = torch.stack([m for m, _, _ in states]).amax(0)
    acc = sum(a * torch.exp2(m - big)[:, None] for m, _, a in states)
    l = sum(s * torch.exp2(m - big) for m, s, _ in states)
    want = acc * ops.v_scale[0, 0].double() / l[:, None]
    assert rel_l2(out[0, :, 0], want) < 2e-3  # FP32 sums in another order, BF16 output


def test_bad_segments_name_the_argument():
    q, k, v = _qkv(1, 200, 300, 2, 64, seed=4)
    with pytest.raises(ValueError, match=r"segments must have shape \(B, H, S_q\)"):
        reference.attention(q, k, v, "fp8", segments=torch.ones(1, 2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"segments must be in \[1, 3\]"):
        reference.attention(q, k, v, "fp8", segments=torch.full((1, 2, 200), 4))
    with pytest.raises(ValueError, match="segments must be an integer tensor"):
        reference.attention(q, k, v, "fp8", segments=torch.ones(1, 2, 200))
    with pytest.raises(ValueError, match="segments applies to modes"):
        reference.attention(q, k, v, "bf16", segments=torch.ones(1, 2, 200, dtype=torch.long))
