"""The sm90 kernel's tail split (config options `split_tail` and `tail_rows`, docs/SM90_GEN2.md
items 29 and 41): where a launch's last partial wave of CTAs is spread over the idle SMs by
splitting those query tiles into CTAs of their own. `split_tail` splits a tile's keys into
segments, whose partial (m, l, acc) the last of them to finish merges; `tail_rows` splits its rows
into its two consumer warp groups' halves, each a CTA whose other warp group idles (one warp group
alone takes 75% of two's time per key tile for half the rows, and needs no merge).

A launch has one CTA per 128-row query tile (a pair with cluster 2), ordered query tile fastest,
then head, then batch element. With C CTAs, the last C mod W of them form a partial wave that
leaves SMs idle; each of those tiles is split into k = min(W // (C mod W), n // 32) segments of
contiguous key tiles (segment s: tiles [s n // k, (s + 1) n // k) of n; at least 32 each, which
pays for the merge), so the partial wave fills about a whole wave with shorter CTAs. W is fixed
at 132 (H100/H200 SXM: one CTA per SM), not read off the device, so the split, and with it every
output bit, depends on the shape alone.

The numerics follow: a split row runs its mode's rule per segment from a fresh state, and the
segments merge in FP32 (reference.attention's `segments`, docs/NUMERICS.md "Keys in segments").
Split by rows, every row runs exactly as unsplit: the same bits.
Torch is imported only by the functions that make tensors.
"""
from __future__ import annotations

from typing import NamedTuple

from ...modes import TILE_M, TILE_N

SPLIT_WAVE = 132  # CTAs in a wave of the plan: H100/H200 SXM's SM count (one CTA per SM)
# A segment's fewest key tiles: its merge (partial state out, a ticket, k - 1 states in) costs a
# few microseconds, which a short segment does not win back. Measured on the H200 (BENCHMARKS.md,
# 2026-12-05), the kernel alone: segments of 4 key tiles (1,024 tokens) 6-17% slower, of 12 (7,680)
# within 1.4% either way, of 85 (32,760) 1.5-2.7% faster.
MIN_SEGMENT_TILES = 32
# The split by rows only where the launch fills at most this many waves: there a CTA's fixed cost
# and the partial wave are a large part of the kernel, while at many waves the decode each CTA then
# does costs more than the partial wave's half tiles save. Paired with the plain kernel on an H100
# (BENCHMARKS.md, 2026-12-06 seventh run): the kernel 2-3.6% faster at B1 H40 1,024 tokens D128
# (2.4 waves), the same at D64, 9% faster at B2 H3 1,000 D64 (0.4 waves, every tile split); 1.8%
# slower for the 1.3B model's cross attention (23 waves), within the spread at 18-179 waves.
ROW_SPLIT_WAVES = 4
# A split launch's grid is one-dimensional, and its CTA index arithmetic (cta_work) is 32-bit: no
# plan splits a launch of more CTAs than that dimension takes.
GRID_X_MAX = 2**31 - 1


class SplitPlan(NamedTuple):
    """One launch's plan: `ctas` query-tile CTAs (`tiles_m` per head, a multiple of the cluster);
    the last `split` of them split into `segments` CTAs each; `grid` CTAs in all."""

    ctas: int
    tiles_m: int
    split: int
    segments: int

    @property
    def grid(self) -> int:
        return self.ctas - self.split + self.split * self.segments


def tail_split(ctas: int, key_tiles: int, wave: int = SPLIT_WAVE,
               min_tiles: int = MIN_SEGMENT_TILES) -> tuple[int, int]:
    """(split, segments) for `ctas` CTAs of `key_tiles` key tiles each: (0, 1) when the last wave
    is whole or too full to split (segments < 2), or its tiles too short for two segments of
    `min_tiles` key tiles."""
    if ctas < 1 or key_tiles < 1:
        raise ValueError(f"ctas and key_tiles must be positive, got {ctas} and {key_tiles}")
    rem = ctas % wave
    if rem == 0:
        return 0, 1
    segments = min(wave // rem, key_tiles // min_tiles)
    return (rem, segments) if segments >= 2 else (0, 1)


def row_split(ctas: int, wave: int = SPLIT_WAVE, max_waves: int = ROW_SPLIT_WAVES) -> tuple[int, int]:
    """(split, 2) for `ctas` CTAs of at most `max_waves` waves when their last partial wave's
    tiles, split by rows into two CTAs each, still fit one wave; else (0, 1)."""
    if ctas < 1:
        raise ValueError(f"ctas must be positive, got {ctas}")
    rem = ctas % wave
    return (rem, 2) if 0 < 2 * rem <= wave and ctas <= max_waves * wave else (0, 1)


def plan(b: int, h: int, s_q: int, s_kv: int, cluster: int = 1,
         min_tiles: int = MIN_SEGMENT_TILES, rows: bool = False) -> SplitPlan:
    """The tail split of a launch of the sm90 kernel (128-row query tiles, `cluster` CTAs per
    cluster along them); min_tiles: see tail_split (the kernel's is MIN_SEGMENT_TILES); rows: the
    split by rows (tail_rows, row_split; cluster 1)."""
    tiles_m = -(-s_q // TILE_M)
    tiles_m = -(-tiles_m // cluster) * cluster
    ctas = tiles_m * h * b
    if rows and cluster != 1:
        raise ValueError(f"the split by rows takes cluster 1, got {cluster}")
    p = SplitPlan(ctas, tiles_m, *(row_split(ctas) if rows else
                                   tail_split(ctas, -(-s_kv // TILE_N), min_tiles=min_tiles)))
    if p.grid > GRID_X_MAX:
        p = SplitPlan(ctas, tiles_m, 0, 1)
    # the split tiles start on a cluster boundary (ctas and SPLIT_WAVE are multiples of it), so a
    # cluster's CTAs are the same segment of neighbouring tiles
    assert p.split % cluster == 0, (p.split, cluster)
    return p


def cta_work(lin, n_full, parts, div_m, div_h, cluster: int, as_int=int):
    """The work of CTA `lin` of a split launch, both kinds (the kernel calls this with its Int32
    values, the launch's multiply-shift divisors and as_int=Int32; the tests with Python ints):
    (m_blk, head, batch, split, part), its query tile, head and batch element, its place among the
    split tiles (its tile - n_full, negative for a whole tile) and its part of that tile (0 for a
    whole tile): the segment of keys (split_tail, `parts` = the plan's segments) or the consumer
    warp group whose rows it computes (tail_rows, parts = 2). CTAs below n_full are whole tiles in
    order (query tile fastest, then head, then batch element); then each split tile's `parts`
    CTAs, a cluster's CTAs the same part of neighbouring tiles (their K/V loads are shared).
    div_m, div_h: the query tiles per head and the heads, as ints or as the kernel's divisors (the
    same divmod either way). Branch-free, so the same arithmetic runs in both (a whole tile's terms
    are multiplied by 0; j >= 0 otherwise)."""
    tail = as_int(lin >= n_full)
    j = lin - n_full
    part = tail * _mod(_div(j, cluster), parts)
    tile = lin + tail * (_div(j, cluster * parts) * cluster + _mod(j, cluster) - j)
    rest, m_blk = divmod(tile, div_m)
    batch, head = divmod(rest, div_h)
    return m_blk, head, batch, tile - n_full, part


def _div(x, d):
    """x // d; by a power-of-two constant, a shift (the kernel's Int32 floor division by a constant
    otherwise carries the fix-ups of a negative x)."""
    return x >> (d.bit_length() - 1) if isinstance(d, int) and d & (d - 1) == 0 else x // d


def _mod(x, d):
    """x % d; by a power-of-two constant, a mask (see _div)."""
    return x & (d - 1) if isinstance(d, int) and d & (d - 1) == 0 else x % d


def tile_segments(split, segments, as_int=int):
    """The segments of a split_tail CTA's tile (split from cta_work): 1 for a whole tile."""
    return 1 + as_int(split >= 0) * (segments - 1)


def segment_keys(split, seg, segments, key_tiles, as_int=int):
    """(ks, t0, count) of a split_tail CTA (split, seg from cta_work): its tile's segments
    (tile_segments) and its key tiles [t0, t0 + count)."""
    ks = tile_segments(split, segments, as_int)
    t0, stop = key_range(seg, ks, key_tiles)
    return ks, t0, stop - t0


def key_range(segment, segments, key_tiles):
    """The key tiles [start, stop) of a split tile's segment (Python or the kernel's Int32 values)."""
    return segment * key_tiles // segments, (segment + 1) * key_tiles // segments


def row_segments(b: int, h: int, s_q: int, s_kv: int, cluster: int = 1, device=None):
    """Segments per (batch, head, query row) under the plan, (B, H, S_q) int64: what
    reference.attention's `segments` takes to follow the split kernel."""
    import torch

    p = plan(b, h, s_q, s_kv, cluster)
    lin = torch.arange(p.ctas, device=device).view(b, h, p.tiles_m)
    per_tile = torch.where(lin >= p.ctas - p.split, p.segments, 1)
    return per_tile.repeat_interleave(TILE_M, dim=2)[:, :, :s_q]
