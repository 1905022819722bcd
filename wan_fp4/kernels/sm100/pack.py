"""Operand preparation for the sm100a FP4 kernel: quantise through wan_fp4.formats, then lay the
codes and scale bytes out the way TMA and tcgen05 read them. Pure torch; runs on CPU.

Layouts (BH = batch * heads, heads-major so one (b, h) is one contiguous slab):
  Q, K codes  (BH, S_pad, 64) uint8: two E2M1 codes per byte along D, element 2i in the low
              nibble (the order cvt.rn.*.e2m1x2 and the MMA use).
  V^T codes   (BH, 128, Skv_pad / 2) uint8: V transposed so keys (the P.V reduction axis) are
              contiguous, i.e. K-major for tcgen05, packed two keys per byte.
  SFQ, SFK    E4M3 bytes, 8 per row (one per 16 values of D: pair scale j serves blocks j and
              j + 4, so it is stored twice), in the tcgen05 scale-factor layout below.
  SFV         E8M0 bytes, one per (channel, 32 keys), same scale-factor layout with rows = D.
Skv_pad is a multiple of 128 (whole key tiles) and Sq_pad of 256 (a work item of the kernel is
a pair of 128-row query tiles); the padding is zero codes with zero scales.

Scale-factor layout (CUTLASS's tile_atom_to_shape_SF, checked against the DSL in the tests): rows
in 128-row tiles, scale columns in groups of 4; each (128 x 4) tile is a 512-byte atom where row m,
column k sits at byte 16 * (m % 32) + 4 * (m // 32) + k; atoms run along the scale columns first,
then along rows, then over BH.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ... import formats, reference
from ...modes import P_BLOCK, TILE_M, TILE_N

HEAD_DIM = 128
SF_ATOM_ROWS = 128
SF_ATOM_COLS = 4
SF_ATOM_BYTES = SF_ATOM_ROWS * SF_ATOM_COLS
Q_PAIR_ROWS = 2 * TILE_M  # the kernel's work item: two query tiles (stage 0 / stage 1)


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


# ------------------------------------------------------------------------------ nibble packing
def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """uint8 E2M1 codes (..., K), K even -> (..., K / 2) bytes, element 2i in the low nibble."""
    if codes.dtype != torch.uint8:
        raise TypeError(f"codes must be uint8 E2M1 codes, got {codes.dtype}")
    if codes.shape[-1] % 2:
        raise ValueError(f"codes: the packed axis must have even length, got {codes.shape[-1]}")
    if (codes > 0xF).any():
        raise ValueError("codes: E2M1 codes are 4-bit (0..15)")
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of pack_fp4."""
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed must be uint8, got {packed.dtype}")
    return torch.stack([packed & 0xF, packed >> 4], dim=-1).flatten(-2)


# ------------------------------------------------------------------------ scale-factor layout
def sf_offsets(rows: int, cols: int, batch: int) -> torch.Tensor:
    """Byte offset of scale (l, m, k) in the tcgen05 scale-factor layout, shape (batch, rows, cols).

    rows must be a multiple of 128 and cols of 4 (pad first).
    """
    if rows % SF_ATOM_ROWS or cols % SF_ATOM_COLS:
        raise ValueError(f"sf_offsets: rows ({rows}) must be a multiple of 128 and cols ({cols}) of 4")
    m = torch.arange(rows).view(1, rows, 1)
    k = torch.arange(cols).view(1, 1, cols)
    l = torch.arange(batch).view(batch, 1, 1)
    k_atoms = cols // SF_ATOM_COLS
    m_atoms = rows // SF_ATOM_ROWS
    in_atom = 16 * (m % 32) + 4 * ((m // 32) % 4) + (k % SF_ATOM_COLS)
    atom = (k // SF_ATOM_COLS) + k_atoms * ((m // SF_ATOM_ROWS) + m_atoms * l)
    return in_atom + SF_ATOM_BYTES * atom


def swizzle_sf(scales: torch.Tensor) -> torch.Tensor:
    """(BH, rows, cols) uint8 scale bytes -> flat uint8 buffer in the tcgen05 layout.

    rows are padded to a multiple of 128 and cols to a multiple of 4 with zero bytes.
    """
    if scales.dtype != torch.uint8 or scales.dim() != 3:
        raise TypeError(f"scales must be a (BH, rows, cols) uint8 tensor, got {scales.dtype} {tuple(scales.shape)}")
    bh, rows, cols = scales.shape
    rp, cp = _round_up(rows, SF_ATOM_ROWS), _round_up(cols, SF_ATOM_COLS)
    padded = torch.zeros(bh, rp, cp, dtype=torch.uint8, device=scales.device)
    padded[:, :rows, :cols] = scales
    out = torch.empty(bh * rp * cp, dtype=torch.uint8, device=scales.device)
    out[sf_offsets(rp, cp, bh).to(scales.device).flatten()] = padded.flatten()
    return out


def unswizzle_sf(buf: torch.Tensor, bh: int, rows: int, cols: int) -> torch.Tensor:
    """Inverse of swizzle_sf for the padded (bh, rows, cols) shape."""
    return buf[sf_offsets(rows, cols, bh).to(buf.device)]


# ----------------------------------------------------------------------------- full operands
@dataclass
class SM100Operands:
    q: torch.Tensor  # (BH, Sq_pad, 64) packed E2M1
    sfq: torch.Tensor  # flat E4M3 scale bytes
    k: torch.Tensor  # (BH, Skv_pad, 64)
    sfk: torch.Tensor
    vt: torch.Tensor  # (BH, 128, Skv_pad / 2)
    sfv: torch.Tensor  # flat E8M0 scale bytes
    batch: int
    heads: int
    seq_q: int
    seq_kv: int
    sq_pad: int
    skv_pad: int
    m: torch.Tensor | None = None  # (BH, Sq) FP32 guard row reference, None = shiftless (m = 0)


def _qk_operand(x: torch.Tensor, seq_pad: int):
    """(B, S, H, 128) -> packed codes (BH, S_pad, 64) and swizzled E4M3 scales, via formats."""
    b, s, h, _ = x.shape
    nv = formats.nvfp4_quantize_qk(x)  # codes (B,S,H,128), scales (B,S,H,4): pair scales
    codes = nv.codes.permute(0, 2, 1, 3).reshape(b * h, s, HEAD_DIM)
    pair = nv.scales.permute(0, 2, 1, 3).reshape(b * h, s, -1)
    per16 = torch.cat([pair, pair], dim=-1)  # block j and j + 4 share pair scale j
    codes_p = torch.zeros(b * h, seq_pad, HEAD_DIM, dtype=torch.uint8, device=x.device)
    codes_p[:, :s] = codes
    sf_p = torch.zeros(b * h, seq_pad, per16.shape[-1], dtype=torch.uint8, device=x.device)
    sf_p[:, :s] = per16
    return pack_fp4(codes_p), swizzle_sf(sf_p)


def _v_operand(v: torch.Tensor, seq_pad: int):
    """(B, S, H, 128) -> V^T packed codes (BH, 128, S_pad / 2) and swizzled E8M0 scales."""
    b, s, h, d = v.shape
    mx = formats.mxfp4_quantize_v(v)  # codes (B, S32, H, D), scales (B, S32/32, H, D)
    s32 = mx.codes.shape[1]
    codes_t = mx.codes.permute(0, 2, 3, 1).reshape(b * h, d, s32)
    codes_p = torch.zeros(b * h, d, seq_pad, dtype=torch.uint8, device=v.device)
    codes_p[:, :, :s32] = codes_t
    sf_t = mx.scales.permute(0, 2, 3, 1).reshape(b * h, d, -1)  # (BH, D, key blocks)
    sf_p = torch.zeros(b * h, d, seq_pad // P_BLOCK, dtype=torch.uint8, device=v.device)
    sf_p[:, :, : sf_t.shape[-1]] = sf_t
    return pack_fp4(codes_p), swizzle_sf(sf_p)


def guard_row_reference(q: torch.Tensor, k: torch.Tensor, margin: float) -> torch.Tensor:
    """The large-logit guard's row reference m (BH, Sq) FP32, computed exactly as the reference.

    m = max over the anchor keys `reference.anchor_indices(S_kv)` (in logical key order: K/V are
    not permuted) of the raw scores q-hat . k-hat of the dequantised NVFP4 operands, + M ln2.
    The same torch ops, the same query chunks and operand shapes as
    `reference._fp4_attention`, so on one device the pre-pass and the reference compute the same
    FP32 m bit for bit (the kernel's own scores differ only in FP32 summation order).
    """
    from ... import reference

    b, sq, h, _ = q.shape
    q_hat = reference._heads_first(formats.nvfp4_quantize_qk(q).dequantize())
    k_hat = reference._heads_first(formats.nvfp4_quantize_qk(k).dequantize())
    k_anchor = k_hat[:, :, reference.anchor_indices(k.shape[1]).to(q_hat.device)].transpose(-1, -2)
    parts = []
    for rows in reference._query_chunks(sq):
        s_anchor = torch.matmul(q_hat[:, :, rows], k_anchor)
        parts.append(reference.guard_reference(s_anchor, margin))
    m = torch.cat(parts, dim=2).squeeze(-1)  # (B, H, Sq)
    return m.to(torch.float32).reshape(b * h, sq).contiguous()


def prepare_operands(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     guard_margin: float | None = None) -> SM100Operands:
    """Quantise q, k, v (B, S, H, 128) exactly as wan_fp4.formats does and lay them out.

    guard_margin: M of the large-logit guard; then ops.m holds each row's reference m
    (guard_row_reference), else None (shiftless).
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4 or t.shape[-1] != HEAD_DIM:
            raise ValueError(f"{name} must be (B, S, H, {HEAD_DIM}), got {tuple(t.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2]:
        raise ValueError(f"q and k must agree on batch and heads, got {tuple(q.shape)} and {tuple(k.shape)}")
    reference.check_finite(q, k, v)  # as the reference: an error, not a NaN scale factor
    b, sq, h, _ = q.shape
    skv = k.shape[1]
    sq_pad, skv_pad = _round_up(sq, Q_PAIR_ROWS), _round_up(skv, TILE_N)
    qc, sfq = _qk_operand(q, sq_pad)
    kc, sfk = _qk_operand(k, skv_pad)
    vt, sfv = _v_operand(v, skv_pad)
    m = None if guard_margin is None else guard_row_reference(q, k, guard_margin)
    return SM100Operands(qc, sfq, kc, sfk, vt, sfv, b, h, sq, skv, sq_pad, skv_pad, m)
