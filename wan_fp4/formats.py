"""Exact encode/decode of the low-precision formats (docs/NUMERICS.md), in plain PyTorch.

E4M3 is OCP FP8 E4M3FN (max 448, no infinities). E2M1 is FP4 with magnitudes
{0, .5, 1, 1.5, 2, 3, 4, 6}; a code is a byte with the sign in bit 3 and the magnitude index in
bits 0-2, as the hardware packs it. E8M0 is a power-of-two scale byte 2^(u - 127).

Everything here is bit-exact and device-agnostic: the kernels' prepare passes are tested
against these functions code for code.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .modes import E4M3_MAX, NVFP4_BLOCK, NVFP4_INV_6, NVFP4_SCALE_MULTIPLIERS, P_BLOCK

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
# Ties of E2M1 round-to-nearest-even: at .25, 1.25, 2.5 and 5 the even code is below, at .75,
# 1.75 and 3.5 it is above.
_E2M1_TIES_DOWN = (0.25, 1.25, 2.5, 5.0)
_E2M1_TIES_UP = (0.75, 1.75, 3.5)
# NVFP4 Q/K codes (the paper's quantiser): ties round down.
NVFP4_THRESHOLDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


# ----------------------------------------------------------------------------------------- E4M3
def e4m3_encode(x: torch.Tensor) -> torch.Tensor:
    """Round to nearest even onto E4M3FN, saturating at +-448 (like cvt.rn.satfinite). -> uint8."""
    if torch.isnan(x).any():
        raise ValueError("e4m3_encode: input contains NaN")
    clipped = x.to(torch.float32).clamp(-E4M3_MAX, E4M3_MAX)
    return clipped.to(torch.float8_e4m3fn).view(torch.uint8)


def e4m3_decode(code: torch.Tensor) -> torch.Tensor:
    """E4M3FN bytes -> float32 (0x7F/0xFF are NaN, as in the format)."""
    _require_uint8(code, "code")
    return code.view(torch.float8_e4m3fn).to(torch.float32)


def e4m3_round(x: torch.Tensor) -> torch.Tensor:
    """x rounded onto the E4M3 grid, as float32."""
    return e4m3_decode(e4m3_encode(x))


# ----------------------------------------------------------------------------------------- E2M1
def e2m1_encode(x: torch.Tensor) -> torch.Tensor:
    """Round to nearest even onto E2M1, saturating at +-6 (cvt.rn.satfinite.e2m1x2). -> uint8 code."""
    mag = x.to(torch.float32).abs()
    idx = torch.zeros_like(mag, dtype=torch.uint8)
    for t in _E2M1_TIES_DOWN:
        idx += (mag > t).to(torch.uint8)
    for t in _E2M1_TIES_UP:
        idx += (mag >= t).to(torch.uint8)
    return idx | ((x < 0).to(torch.uint8) << 3)


def e2m1_decode(code: torch.Tensor) -> torch.Tensor:
    _require_uint8(code, "code")
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=code.device)
    mag = table[(code & 7).long()]
    return torch.where((code & 8) != 0, -mag, mag)


def e2m1_round(x: torch.Tensor) -> torch.Tensor:
    return e2m1_decode(e2m1_encode(x))


# ----------------------------------------------------------------------------------------- E8M0
def e8m0_decode(u: torch.Tensor) -> torch.Tensor:
    """E8M0 byte -> 2^(u - 127) as float32 (u = 0 gives the subnormal 2^-127)."""
    _require_uint8(u, "u")
    return torch.ldexp(torch.ones_like(u, dtype=torch.float32), u.to(torch.int32) - 127)


def e8m0_nearest_pow2(amax: torch.Tensor) -> torch.Tensor:
    """The MXFP4 V scale byte: the power of two nearest to amax, from amax's FP32 bits.

    The byte is amax's exponent field, plus one when the mantissa is above 1/2, or exactly 1/2
    with an odd exponent field (ties to the even byte). amax <= 1e-38 gives byte 0.
    """
    a = amax.to(torch.float32).contiguous()
    bits = a.view(torch.int32)
    exp_field = (bits >> 23) & 0xFF
    mant = bits & 0x7FFFFF
    half = 1 << 22
    up = (mant > half) | ((mant == half) & ((exp_field & 1) == 1))
    u = (exp_field + up.to(torch.int32)).clamp(max=254)
    u = torch.where(a <= 1e-38, torch.zeros_like(u), u)
    return u.to(torch.uint8)


# ---------------------------------------------------------------------------------------- NVFP4
@dataclass
class NVFP4Tensor:
    """Q or K in NVFP4: E2M1 codes along D and one E4M3 scale per pair of 16-value blocks.

    codes: uint8 (..., Dp) with Dp = D rounded up to a multiple of 32 (the padding is zero).
    scales: uint8 E4M3 bytes (..., Dp // 32); scale j serves blocks j and j + Dp // 32.
    """

    codes: torch.Tensor
    scales: torch.Tensor
    head_dim: int

    def dequantize(self) -> torch.Tensor:
        """Exact float32 values, (..., D)."""
        scale = e4m3_decode(self.scales)  # (..., half the codes // 16)
        per_value = scale.repeat_interleave(NVFP4_BLOCK, dim=-1)  # (..., half the codes)
        per_value = torch.cat([per_value, per_value], dim=-1)
        return (e2m1_decode(self.codes) * per_value)[..., : self.head_dim]


def _nvfp4_threshold_codes(mag_over_scale: torch.Tensor) -> torch.Tensor:
    idx = torch.zeros_like(mag_over_scale, dtype=torch.uint8)
    for t in NVFP4_THRESHOLDS:
        idx += (mag_over_scale > t).to(torch.uint8)
    return idx


def nvfp4_quantize_qk(x: torch.Tensor) -> NVFP4Tensor:
    """NVFP4 with paired-block scales chosen by minimum squared error (docs/NUMERICS.md, "direct-p-fp4").

    For each pair of 16-value blocks (block j and block j + Dp/32, the same place in the two
    halves of D), base = fl(amax * fl32(1/6)) (the paper's arithmetic, not amax / 6) and the
    candidates are E4M3(base * m) for the multipliers in modes.NVFP4_SCALE_MULTIPLIERS; codes
    count the thresholds strictly below |x|/scale; the first candidate with strictly smaller
    squared error wins, the error summed in float64 (exact, so order-free). A zero scale encodes
    code 0.
    """
    if x.dim() < 1:
        raise ValueError("nvfp4_quantize_qk: x must have a head dimension")
    head_dim = x.shape[-1]
    padded = -(-head_dim // (2 * NVFP4_BLOCK)) * (2 * NVFP4_BLOCK)
    xf = x.to(torch.float32)
    if padded != head_dim:
        xf = torch.nn.functional.pad(xf, (0, padded - head_dim))
    half = padded // 2
    groups = half // NVFP4_BLOCK
    # (..., 2, groups, 16) -> (..., groups, 32): the two blocks that share a scale side by side.
    paired = xf.unflatten(-1, (2, groups, NVFP4_BLOCK)).transpose(-3, -2).flatten(-2)
    mag = paired.abs()
    base = mag.amax(dim=-1, keepdim=True) * torch.tensor(NVFP4_INV_6, dtype=torch.float32)

    best_err = None
    best_scale = None
    best_idx = None
    for m in NVFP4_SCALE_MULTIPLIERS:
        scale_byte = e4m3_encode(base * m)
        scale = e4m3_decode(scale_byte)
        q = torch.where(scale > 0, mag / torch.where(scale > 0, scale, 1.0), torch.zeros_like(mag))
        idx = _nvfp4_threshold_codes(q)
        recon = e2m1_decode(idx) * scale
        err = ((recon - mag) ** 2).to(torch.float64).sum(dim=-1, keepdim=True)
        if best_err is None:
            best_err, best_scale, best_idx = err, scale_byte, idx
        else:
            better = err < best_err  # first strictly smaller error wins
            best_err = torch.where(better, err, best_err)
            best_scale = torch.where(better, scale_byte, best_scale)
            best_idx = torch.where(better, idx, best_idx)

    codes = best_idx | ((paired < 0).to(torch.uint8) << 3)
    codes = torch.where(best_idx == 0, torch.zeros_like(codes), codes)  # no negative zeros
    # Back to (..., Dp) in the original order of D.
    codes = codes.unflatten(-1, (2, NVFP4_BLOCK)).transpose(-3, -2).flatten(-3)
    return NVFP4Tensor(codes=codes, scales=best_scale.squeeze(-1), head_dim=head_dim)


# ---------------------------------------------------------------------------------------- MXFP4
@dataclass
class MXFP4Tensor:
    """V in MXFP4: E2M1 codes and one E8M0 scale per 32 keys per channel.

    codes: uint8 (B, Sp, H, D), Sp = S rounded up to a multiple of 32 (padding is zero).
    scales: uint8 E8M0 (B, Sp // 32, H, D).
    """

    codes: torch.Tensor
    scales: torch.Tensor
    seq_len: int

    def dequantize_unscaled(self) -> torch.Tensor:
        """code * alpha_V (exact in BF16), i.e. 6 * V-hat; the 1/6 is folded into the output."""
        alpha = e8m0_decode(self.scales).repeat_interleave(P_BLOCK, dim=1)
        return e2m1_decode(self.codes) * alpha

    def dequantize(self) -> torch.Tensor:
        """V-hat = code * alpha_V / 6, (B, S, H, D)."""
        return (self.dequantize_unscaled() / 6.0)[:, : self.seq_len]


def mxfp4_quantize_v(v: torch.Tensor) -> MXFP4Tensor:
    """MXFP4 along the key axis (the P.V reduction axis) of v (B, S, H, D)."""
    if v.dim() != 4:
        raise ValueError(f"mxfp4_quantize_v: v must be (B, S, H, D), got shape {tuple(v.shape)}")
    seq = v.shape[1]
    padded = -(-seq // P_BLOCK) * P_BLOCK
    vf = v.to(torch.float32)
    if padded != seq:
        vf = torch.nn.functional.pad(vf, (0, 0, 0, 0, 0, padded - seq))
    blocks = vf.unflatten(1, (padded // P_BLOCK, P_BLOCK))  # (B, nb, 32, H, D)
    u = e8m0_nearest_pow2(blocks.abs().amax(dim=2))  # (B, nb, H, D)
    alpha = e8m0_decode(u).unsqueeze(2)
    codes = e2m1_encode(blocks * 6.0 / alpha).flatten(1, 2)
    codes = torch.where((codes & 7) == 0, torch.zeros_like(codes), codes)
    return MXFP4Tensor(codes=codes, scales=u, seq_len=seq)


def _require_uint8(t: torch.Tensor, name: str) -> None:
    if t.dtype != torch.uint8:
        raise TypeError(f"{name} must be a uint8 tensor of codes, got {t.dtype}")
