"""Bit-exact torch model of the softmax warpgroups' P map, instruction for instruction (ptx.py,
kernel.py `_softmax`), for checking the kernel's arithmetic against the reference on CPU and for
comparing codes and scales dumped from hardware. Each step names the PTX it stands for.
"""
from __future__ import annotations

import torch

from ... import formats
from ...modes import FP4_SCALE_SHIFT, LOG2_6, NEAREST_POW2_BIAS, P_BLOCK


def _f32(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float32)


def _fma(a, b, c) -> torch.Tensor:
    """fma.rn.f32 (and each lane of fma.rn.f32x2): exact a*b in float64, one rounding after + c."""
    return _f32(a.double() * b.double() + c.double())


def p_map(s: torch.Tensor, c: float, affine: tuple[float, float], valid: int | None = None,
          m: torch.Tensor | None = None):
    """Scores s (..., 128) FP32 of one key tile -> (codes, e, e8m0 bytes, block sums).

    m: the row reference (..., 1) FP32 in raw score units (the guard's, from the host pre-pass
    and read by the softmax WG once per row); None = shiftless (the kernel then uses m = 0).

    codes: E2M1 values (..., 128); e: block exponents (..., 4) before the stored-scale shift;
    bytes: published E8M0 (e - L, floored at byte 0) as the MMA's P scales; qsum: sum of codes
    per block. valid: keys of the tile that exist (the rest are -inf, probability 0).
    """
    s = _f32(s).clone()
    if valid is not None:
        s[..., valid:] = -torch.inf
    one = torch.ones((), dtype=torch.float32)
    c32, a32, b32 = one * c, one * affine[0], one * affine[1]
    ac = _f32(a32.double() * c32.double())  # host: fl(A c)
    m32 = torch.zeros(s.shape[:-1] + (1,), dtype=torch.float32) if m is None else _f32(m)
    row_off = _fma(-m32, c32, one * LOG2_6)  # row_offset: neg.f32; fma.rn.f32 (once per row)
    blocks = s.unflatten(-1, (-1, P_BLOCK))
    bmax = blocks.amax(-1)  # fmax chain
    g = _f32(bmax - m32)  # sub.rn.f32 (exact for m = 0)
    g = _f32(g * c32)  # mul.rn.f32
    g = _f32(g + one * NEAREST_POW2_BIAS)  # add.rn.f32
    g = torch.floor(g).nan_to_num(nan=-126.0).clamp(-126.0, 127.0)  # cvt.rmi; max; min
    e = g.to(torch.int32)  # cvt.rzi.s32.f32
    qb = _f32(row_off - e.to(torch.float32))  # cvt.rn.f32.s32; sub.rn.f32
    bias = _fma(a32, qb, b32)  # fma.rn.f32
    y = _fma(blocks, ac, bias.unsqueeze(-1))  # fma.rn.f32x2
    codes = formats.e2m1_round(torch.nan_to_num(y, nan=0.0).clamp(min=0.0))  # cvt...relu.e2m1x2
    qsum = codes.sum(-1)  # cvt.rn.f16x2.e2m1x2 + add.rn.f16x2 (exact)
    e_pub = torch.clamp(e - FP4_SCALE_SHIFT, min=-127)
    return codes.flatten(-2), e, (e_pub + 127).to(torch.uint8), qsum
