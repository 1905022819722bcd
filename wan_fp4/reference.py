"""The numerics contract: a PyTorch reference of every attention mode (docs/NUMERICS.md).

This module is the only place the numerics are defined in code. It follows the kernels block
for block: 128-key tiles in key order with a running row max for fp8/direct-p, 32-key P blocks
for direct-p-fp4, FP32 everywhere, and FMAs emulated in float64 with one rounding to FP32. Only
the FP32 accumulation order of the matrix products is free to differ in a kernel.

Pure torch: it runs on CPU, and on CUDA it is the exact emulation of direct-p-fp4 on GPUs
without FP4 tensor cores. Inputs and output are (B, S, H, D), diffusers' layout.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

import torch

from . import formats
from .modes import (
    DIRECT_P_HEADROOM,
    DIRECT_P_ONE,
    DIRECT_P_SLOPE,
    DIRECT_P_TOP,
    E4M3_MAX,
    FP4_SCALE_SHIFT,
    LN2,
    LOG2_6,
    LOG2_P_SCALE,
    MAX_SCORE_LOG2,
    NEAREST_POW2_BIAS,
    P_BLOCK,
    P_EXP_MAX,
    P_EXP_MIN,
    PAPER_LOG2E_RSQRT128,
    QK_SCALE_BLOCK,
    TILE_N,
    FP4Params,
    FP4RangeWarning,
    check_mode,
    default_scale,
)

_INV_E4M3_MAX = 1.0 / E4M3_MAX
# Queries are independent rows: process them in chunks (a multiple of the Q-scale block) to
# bound memory at Wan shapes.
_QUERY_CHUNK = 4096


def attention(q, k, v, mode="bf16", scale=None, *, fp4: FP4Params | None = None, return_lse=False,
              segments: torch.Tensor | None = None):
    """Attention of q (B,Sq,H,D) over k, v (B,Skv,H,D) in the given mode.

    Returns out (B,Sq,H,D) in q.dtype, and with return_lse=True also the natural-log
    log-sum-exp of the represented probabilities, (B,H,Sq) float32.
    segments (fp8 and direct-p): per (batch, head, query row) the number of contiguous runs of
    key tiles its keys are split into, (B, H, Sq) integers (docs/NUMERICS.md, "Keys in segments";
    the sm90 kernel's tail split, kernels/sm90/split.py); None = one.
    """
    check_mode(mode)
    _check_shapes(q, k, v)
    scale = default_scale(q.shape[-1]) if scale is None else float(scale)
    if segments is not None and mode not in ("fp8", "direct-p"):
        raise ValueError(f"segments applies to modes 'fp8' and 'direct-p', got mode {mode!r}")
    if mode != "bf16":
        check_finite(q, k, v)
    if mode == "bf16":
        out, lse = _exact_attention(q, k, v, scale)
    elif mode in ("fp8", "direct-p"):
        direct_p = mode == "direct-p"
        out, lse = _fp8_attention(q, k, v, scale, direct_p, DIRECT_P_HEADROOM / DIRECT_P_SLOPE if direct_p else None,
                                  segments)
    else:
        out, lse = _fp4_attention(q, k, v, scale, fp4 or FP4Params())
    out = out.to(q.dtype)
    return (out, lse) if return_lse else out


def check_finite(q, k, v) -> None:
    """The quantisers need finite inputs: NaN or inf would otherwise turn into a scale or a
    saturated code (a finite, wrong output) instead of an error."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not torch.isfinite(t).all():
            raise non_finite_error(name)


def non_finite_error(name: str) -> ValueError:
    """The error every low-precision path raises for a NaN or inf in input `name`."""
    return ValueError(f"{name} contains NaN or inf; the low-precision modes need finite inputs")


def smoothing_overflow_error() -> ValueError:
    """The error for finite keys whose smoothing, k less its channel mean, overflows FP32: the
    block's scale would be inf and its codes NaN."""
    return ValueError("k less its channel mean overflows FP32 (finite keys of both signs near FP32's "
                      "limit); k is far outside attention's usual range: rescale it, or use mode='bf16'")


@lru_cache(maxsize=256)  # asked on every kernel call; rounding through torch costs host time
def log2_scale(scale: float) -> float:
    """c, the score-to-log2 factor every mode uses: fl(log2(e) * scale), except at the default
    scale of D = 128, where it is the paper's FP32 literal (modes.PAPER_LOG2E_RSQRT128)."""
    if scale == default_scale(128):
        return _f32(PAPER_LOG2E_RSQRT128)
    return _f32(math.log2(math.e) * scale)


# --------------------------------------------------------------------------------- bf16 (exact)
def _exact_attention(q, k, v, scale):
    """Exact softmax attention with FP32 arithmetic (the control's numerics)."""
    qf, kf, vf = (_heads_first(t).to(torch.float32) for t in (q, k, v))
    outs, lses = [], []
    for rows in _query_chunks(qf.shape[2]):
        s = torch.matmul(qf[:, :, rows], kf.transpose(-1, -2)) * scale
        lse = torch.logsumexp(s, dim=-1)
        outs.append(torch.matmul(torch.exp(s - lse.unsqueeze(-1)), vf))
        lses.append(lse)
    return _seq_first(torch.cat(outs, dim=2)), torch.cat(lses, dim=2)


# ----------------------------------------------------------------------------- fp8 / direct-p
@dataclass
class FP8Operands:
    """Q, K, V quantised for the fp8 and direct-p modes (layout (B,S,H,D), like the inputs)."""

    q8: torch.Tensor  # float8_e4m3fn
    k8: torch.Tensor  # float8_e4m3fn, of the smoothed K
    v8: torch.Tensor  # float8_e4m3fn
    q_scale: torch.Tensor  # (B, ceil(Sq/128), H) float32, powers of two
    k_scale: torch.Tensor  # (B, ceil(Skv/128), H)
    v_scale: torch.Tensor  # (B, H, D)
    k_mean: torch.Tensor  # (B, H, D) float32


def pow2_scale(amax: torch.Tensor) -> torch.Tensor:
    """The smallest power of two s with amax * fl(1/448) <= s, from FP32 bits; amax 0 -> 1."""
    r = (amax.to(torch.float32) * _INV_E4M3_MAX).contiguous()
    bits = r.view(torch.int32)
    exp_field = (bits >> 23) & 0xFF
    mant = bits & 0x7FFFFF
    exponent = exp_field - 127 + (mant != 0).to(torch.int32)
    s = torch.ldexp(torch.ones_like(r), exponent)
    return torch.where(amax > 0, s, torch.ones_like(s))


def quantize_blocks(x: torch.Tensor):
    """Per (batch, 128-token block, head) power-of-two scale and E4M3 codes of x (B,S,H,D) fp32."""
    b, s, h, d = x.shape
    nblk = -(-s // QK_SCALE_BLOCK)
    padded = torch.nn.functional.pad(x, (0, 0, 0, 0, 0, nblk * QK_SCALE_BLOCK - s))
    amax = padded.unflatten(1, (nblk, QK_SCALE_BLOCK)).abs().amax(dim=(2, 4))  # (B, nblk, H)
    scale = pow2_scale(amax)
    per_token = scale.repeat_interleave(QK_SCALE_BLOCK, dim=1)[:, :s].unsqueeze(-1)
    return formats.e4m3_encode(x / per_token).view(torch.float8_e4m3fn), scale


def key_mean(k: torch.Tensor) -> torch.Tensor:
    """K's per-(batch, head, channel) mean over keys, (B, H, D) float32, for the smoothing.

    Summed in float64, where sums of BF16 values are exact over any realistic range, so the FP32
    result does not depend on the summation order: a kernel's pre-pass, another device, or a
    tensor holding fewer heads (Ulysses) gets the same bits.
    """
    # dtype= accumulates in float64 without materialising a float64 copy of K
    return (torch.sum(k, dim=1, dtype=torch.float64) / k.shape[1]).to(torch.float32)


def quantize_fp8(q, k, v) -> FP8Operands:
    """The fp8/direct-p operands (docs/NUMERICS.md): Q, smoothed K per 128-token block, V per channel."""
    qf, kf, vf = (t.to(torch.float32) for t in (q, k, v))
    q8, q_scale = quantize_blocks(qf)
    k_mean = key_mean(k)
    smoothed = kf - k_mean.unsqueeze(1)
    if not torch.isfinite(smoothed).all() and torch.isfinite(kf).all():
        raise smoothing_overflow_error()
    k8, k_scale = quantize_blocks(smoothed)
    v_scale = pow2_scale(vf.abs().amax(dim=1))  # (B, H, D)
    v8 = formats.e4m3_encode(vf / v_scale.unsqueeze(1)).view(torch.float8_e4m3fn)
    return FP8Operands(q8, k8, v8, q_scale, k_scale, v_scale, k_mean)


# Slack on the score bound: kernels sum q8 . k8 in FP32 or (Hopper's FP8 tensor cores) with less
# precision, ~1e-4 relative; the bound must hold for their sums too.
_SCORE_BOUND_SLACK = 1.01


def check_score_range(mode: str, c: float, q8, q_scale, k8, k_scale, *, scale_product: float | None = None) -> None:
    """Raise ValueError if a score z = (q8 . k8) sq sk c of these FP8 operands can reach
    modes.MAX_SCORE_LOG2, beyond which the modes' FP32 arithmetic fails (wrong or NaN rows).

    Layout of the kernels' pre-pass: codes (B, H, S, D), scales (B, H, ceil(S / 128)); S may be
    padded to whole blocks. The bound is Cauchy-Schwarz per head: the largest scaled code-row norm
    of Q times that of K. First from the scales alone (a code row's norm is at most 448 sqrt(D)),
    which clears ordinary inputs with one small reduction; the row norms are read only if needed.
    scale_product: a caller's upper bound on that per-head largest q_scale x k_scale (e.g. the
    largest Q scale times the largest K scale, read already), instead of reducing the scales here.
    """
    row_max = E4M3_MAX * math.sqrt(q8.shape[-1])
    loose = scale_product
    if loose is None:
        loose = (q_scale.double().amax(dim=-1) * k_scale.double().amax(dim=-1)).amax().item()
    if loose * row_max * row_max * c * _SCORE_BOUND_SLACK < MAX_SCORE_LOG2:
        return
    bound = (_scaled_row_norm_max(q8, q_scale) * _scaled_row_norm_max(k8, k_scale)).amax().item()
    bound *= c * _SCORE_BOUND_SLACK
    if not math.isfinite(bound):  # finite inputs (checked before) whose smoothed K overflowed
        raise smoothing_overflow_error()
    if bound >= MAX_SCORE_LOG2:
        raise ValueError(
            f"{mode}: q . k * scale can reach {bound * LN2:.3g} for these q and k, beyond the "
            f"{MAX_SCORE_LOG2 * LN2:.3g} (natural-log units) that {mode}'s FP32 arithmetic represents; q or k "
            "is far outside attention's usual range: rescale it, or use mode='bf16'")


def _scaled_row_norm_max(x8: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """max over tokens of ||x8 row|| * its block's scale, (B, H) float64; read in token chunks."""
    out = torch.zeros(x8.shape[:2], dtype=torch.float64, device=x8.device)
    per_row = scale.double().repeat_interleave(QK_SCALE_BLOCK, dim=-1)
    for rows in _query_chunks(x8.shape[2]):
        norms = torch.linalg.vector_norm(x8[:, :, rows].to(torch.float32), dim=-1).double()
        out = torch.maximum(out, (norms * per_row[..., rows]).amax(dim=-1))
    return out


def direct_p_t(s_raw: torch.Tensor, qk: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Direct-P's pre-rounding code t = fma(s_raw, 8 qk, fl(120 - 8 m)) per score, float32: one
    rounding, z never rounded on its own (the kernels fold the score scale into the FMA).
    s_raw (..., rows, keys); qk and the row reference m (..., rows)."""
    bias = _f32_tensor(float(DIRECT_P_ONE) - DIRECT_P_SLOPE * m.double())
    return _f32_tensor(s_raw.double() * (DIRECT_P_SLOPE * qk).unsqueeze(-1).double() + bias.unsqueeze(-1).double())


def direct_p_bytes(t: torch.Tensor) -> torch.Tensor:
    """The Direct-P E4M3 byte of t = fl(8 z + 120 - 8 m): clamp(rne(t), 0, 126) as uint8 (the row
    reference keeps rne(t) <= 126, E4M3's largest finite byte: the top clamp is a guard)."""
    return torch.round(t.clamp(0.0, float(DIRECT_P_TOP))).to(torch.uint8)


def headroom_codes(s_raw, qk, m, headroom: float):
    """One key tile of direct-p's row-reference rule (docs/NUMERICS.md, "Row reference"): the codes
    are made with the reference the row holds, so they need not wait for the tile's row max.

    A row with a reference m makes its codes with it, t = direct_p_t(s_raw, qk, m), rounded as the
    kernels round them: c = rne16(t), the f16 value t * 2^-24 (relu; the integer rne(t) for
    t < 2048). If its largest code c_max is above DIRECT_P_TOP (126, E4M3's largest finite byte),
    the reference moves by k / 8 with k = c_max - (120 - 8 headroom), an integer, so that code
    lands at 120 - 8 headroom: m_new = fl(m + k / 8), and its codes move with it, relu(c - k)
    (exact; the sm90 kernel subtracts k from the f16 code words it holds in two exact steps). Codes
    from t >= 2048 (a tile max 256 log2 units above the reference) carry f16's rounding of t into
    the move; the max lands exactly. A row with no reference yet (m = -inf, the first tile) takes
    its tile max + headroom.
    headroom in log2 units (DIRECT_P_HEADROOM / 8 for direct-p). Returns (t, m_new, moved), all per
    row but t; every code of t rounds to at most 126."""
    f32 = torch.float32
    first = torch.isinf(m)
    z_max = (s_raw * qk.unsqueeze(-1)).amax(dim=-1)
    held = torch.where(first, z_max + headroom, m)
    t = direct_p_t(s_raw, qk, held)
    c = _rne16(t.clamp(min=0.0))
    c_max = c.amax(dim=-1)
    moved = first | (c_max > DIRECT_P_TOP)
    k = (c_max - (DIRECT_P_ONE - DIRECT_P_SLOPE * headroom)).to(f32)  # exact: integers below 2^24
    m_new = torch.where(moved & ~first, (held.double() + k.double() / DIRECT_P_SLOPE).to(f32), held)
    shifted = (c - k.unsqueeze(-1)).clamp(min=0.0)  # exact in FP32: both below 2^24, integers
    return torch.where((moved & ~first).unsqueeze(-1), shifted, t), m_new, moved


def _rne16(t: torch.Tensor) -> torch.Tensor:
    """t (an FP32 code count) rounded as its f16 value t * 2^-24 rounds (rne; exact integers below
    2048), back in code units, float32."""
    return (t * 2.0 ** -24).to(torch.float16).to(torch.float32) * 2.0 ** 24


def direct_p_headroom(q, k, v, headroom: float | None, scale=None, *, segments=None):
    """Direct-P with another row reference: the rule of `headroom_codes` with this headroom (log2
    units; the sm90 kernel's `headroom` option, in codes, is 8 times it), or with None the running
    row max (the sm90 kernel's `headroom` 0). segments: as `attention`'s. (out in q.dtype,
    natural-log LSE)."""
    _check_shapes(q, k, v)
    check_finite(q, k, v)
    scale = default_scale(q.shape[-1]) if scale is None else float(scale)
    out, lse = _fp8_attention(q, k, v, scale, True, None if headroom is None else float(headroom), segments)
    return out.to(q.dtype), lse


def _check_segments(segments, b, h, sq, skv):
    if not isinstance(segments, torch.Tensor) or segments.is_floating_point() or segments.is_complex():
        raise ValueError(f"segments must be an integer tensor, got {type(segments).__name__}")
    if tuple(segments.shape) != (b, h, sq):
        raise ValueError(f"segments must have shape (B, H, S_q) = {(b, h, sq)}, got {tuple(segments.shape)}")
    key_tiles = -(-skv // TILE_N)
    if segments.numel() and (int(segments.min()) < 1 or int(segments.max()) > key_tiles):
        raise ValueError(f"segments must be in [1, {key_tiles}] (the key tiles), got "
                         f"[{int(segments.min())}, {int(segments.max())}]")


def _merge_segment(done, cur, rows):
    """Fold the finished segment `cur` = (m, l, acc) into `done` where `rows` (a bool per row):
    both rescaled to their larger reference, in FP32 (docs/NUMERICS.md, "Keys in segments")."""
    (m0, l0, a0), (m1, l1, a1) = done, cur
    m = torch.maximum(m0, m1)
    w0, w1 = torch.exp2(m0 - m), torch.exp2(m1 - m)  # w0 = 0 while nothing is done (m0 = -inf)
    merged = (m, l0 * w0 + l1 * w1, a0 * w0.unsqueeze(-1) + a1 * w1.unsqueeze(-1))
    return tuple(torch.where(rows if x.dim() == rows.dim() else rows.unsqueeze(-1), y, x)
                 for x, y in zip(done, merged))


def _fp8_attention(q, k, v, scale, direct_p, headroom=None, segments=None):
    """headroom (direct-p, log2 units): the row reference of `headroom_codes` (direct-p's:
    DIRECT_P_HEADROOM / 8); None = the running row max (fp8's). segments: see `attention`."""
    if headroom is not None and not direct_p:
        raise ValueError("headroom applies to direct-p only")
    if segments is not None:
        _check_segments(segments, q.shape[0], q.shape[2], q.shape[1], k.shape[1])
    ops = quantize_fp8(q, k, v)
    c = log2_scale(scale)
    check_score_range("direct-p" if direct_p else "fp8", c, _heads_first(ops.q8), ops.q_scale.transpose(1, 2),
                      _heads_first(ops.k8), ops.k_scale.transpose(1, 2))
    q8, k8, v8 = (_heads_first(t).to(torch.float32) for t in (ops.q8, ops.k8, ops.v8))
    b, h, sq, _ = q8.shape
    skv = k8.shape[2]
    # Scale products are exact (powers of two) except for the one rounding through c.
    q_row_scale = ops.q_scale.repeat_interleave(QK_SCALE_BLOCK, dim=1)[:, :sq].transpose(1, 2) * c
    k_tile_scale = ops.k_scale.transpose(1, 2)  # (B, H, ntiles): K-scale blocks are key tiles
    key_tiles = -(-skv // TILE_N)
    outs, lses = [], []
    for rows in _query_chunks(sq):
        qs = q8[:, :, rows]
        m = torch.full((b, h, qs.shape[2]), -math.inf, device=q8.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(b, h, qs.shape[2], v8.shape[-1], device=q8.device)
        if segments is not None:
            # each row's segment count, and the segments finished so far (none: m = -inf)
            kseg = segments.to(q8.device)[:, :, rows]
            done = (m.clone(), l.clone(), acc.clone())
        for tile, start in enumerate(range(0, skv, TILE_N)):
            if segments is not None and tile:
                # segment s of k holds key tiles [s n // k, (s + 1) n // k): a row whose segment
                # changes here banks its state and starts the next segment afresh
                starts = ((tile + 1) * kseg - 1) // key_tiles != (tile * kseg - 1) // key_tiles
                if starts.any():
                    done = _merge_segment(done, (m, l, acc), starts)
                    m = torch.where(starts, -math.inf, m)
                    l = torch.where(starts, 0.0, l)
                    acc = torch.where(starts.unsqueeze(-1), 0.0, acc)
            keys = slice(start, min(start + TILE_N, skv))
            qk = q_row_scale[:, :, rows] * k_tile_scale[:, :, tile : tile + 1]
            s_raw = torch.matmul(qs, k8[:, :, keys].transpose(-1, -2))
            z = s_raw * qk.unsqueeze(-1)
            if headroom is None:
                m_new = torch.maximum(m, z.amax(dim=-1))
                t = direct_p_t(s_raw, qk, m_new) if direct_p else None
            else:
                t, m_new, _ = headroom_codes(s_raw, qk, m, headroom)
            alpha = torch.exp2(m - m_new)  # exactly 1 where the max did not move
            if direct_p:
                p = formats.e4m3_decode(direct_p_bytes(t))
                p_mma, p_sum = p, p.sum(dim=-1)
            else:
                # p = fl(2^fl(s_raw qk + fl(8 - m))), which carries P's factor 256: the kernels fold
                # the score scale and the 256 into one FMA against the row max, so neither z nor
                # 256 p is rounded on its own here either
                bias = _f32_tensor(LOG2_P_SCALE - m_new.double())
                arg = _f32_tensor(s_raw.double() * qk.unsqueeze(-1).double() + bias.unsqueeze(-1).double())
                p = _f32_tensor(torch.exp2(arg.double()))
                p_mma, p_sum = formats.e4m3_round(p), p.sum(dim=-1)
            acc = acc * alpha.unsqueeze(-1) + torch.matmul(p_mma, v8[:, :, keys])
            l = l * alpha + p_sum
            m = m_new
        if segments is not None:
            m, l, acc = _merge_segment(done, (m, l, acc), torch.ones_like(m, dtype=torch.bool))
        outs.append(acc * ops.v_scale.unsqueeze(2) / l.unsqueeze(-1))
        # z is in log2 units; l carries P's 256 in both modes (P ~ 256 * 2^(z - m)). Smoothing K shifted
        # each row's scores by q . mean_k: add it back so LSEs of different key chunks compare
        # (ring attention merges them).
        shift = torch.matmul(qs * q_row_scale[:, :, rows].unsqueeze(-1), ops.k_mean.unsqueeze(-1)).squeeze(-1)
        lses.append(LN2 * (m + shift + torch.log2(l) - LOG2_P_SCALE))
    return _seq_first(torch.cat(outs, dim=2)), torch.cat(lses, dim=2)


# ------------------------------------------------------------------------------- direct-p-fp4
def fp4_p_codes(s, m, c, affine):
    """Direct-P FP4 codes of raw scores s (..., Sk) with Sk a multiple of 32 (-inf = no key).

    m: row reference in raw score units, broadcastable to s[..., :1] (0 for the shiftless map).
    Returns (q, e): q the E2M1 values (..., Sk) float32, e the per-block exponents (..., Sk/32)
    so that P-hat = 2^e q / 6.
    """
    a, b = _f32(affine[0]), _f32(affine[1])  # the kernel holds FP32 constants
    blocks = s.unflatten(-1, (-1, P_BLOCK))
    smax = blocks.amax(dim=-1)  # (..., nb)
    g = _f32_tensor((smax - m).to(torch.float32).double() * c)
    u = torch.floor(_f32_tensor(g.double() + _f32(NEAREST_POW2_BIAS))) + 127.0
    e = u.nan_to_num(nan=1.0).clamp(1.0, 254.0) - 127.0  # -inf (empty block) clamps to u = 1
    qb = _f32_tensor(_f32_tensor(-m.double() * c + _f32(LOG2_6)).double() - e.double())  # fma, then -e
    ac = _f32(a * c)
    bias = _f32_tensor(a * qb.double() + b)  # fma(A, qb, B)
    y = _f32_tensor(blocks.double() * ac + bias.unsqueeze(-1).double())  # fma(s, A c, bias)
    q = formats.e2m1_round(torch.clamp(y, min=0.0))
    return q.flatten(-2), e


def guard_reference(s_anchor, margin):
    """Large-logit guard row reference: max of s over the anchor keys + M ln 2, raw units."""
    return s_anchor.amax(dim=-1, keepdim=True) + margin * LN2


def anchor_indices(seq_len: int, count: int = 128) -> torch.Tensor:
    """The guard's anchor keys: `count` keys spread evenly over the sequence."""
    return torch.linspace(0, seq_len - 1, count).round().long().unique()


def warn_if_p_scales_at_limit(rmax: torch.Tensor, guarded: bool) -> None:
    """Warn (FP4RangeWarning) if any row's largest P block exponent `rmax` sits at the E8M0 limits:
    its scores left the map's range relative to m, and its output is wrong. Saturation at the top
    is what large logits do to the shiftless map."""
    if not bool(((rmax >= P_EXP_MAX) | (rmax <= P_EXP_MIN)).any()):
        return
    advice = ("the guard's anchor keys missed larger scores; raise guard_margin, or run these layers "
              "in fp8 or direct-p"
              if guarded else "enable the large-logit guard for these layers (FP4Params(guard_margin=...), "
              "or enable(..., guard_layers=..., guard_margin=...))")
    warnings.warn("direct-p-fp4: some rows' P block scales hit the E8M0 limit (scores beyond the map's "
                  f"range), so their outputs are wrong; {advice}", FP4RangeWarning, stacklevel=2)


def _fp4_attention(q, k, v, scale, fp4):
    c = log2_scale(scale)
    q_hat = _heads_first(formats.nvfp4_quantize_qk(q).dequantize())
    k_hat = _heads_first(formats.nvfp4_quantize_qk(k).dequantize())
    v_mx = formats.mxfp4_quantize_v(v)
    v_unscaled = _heads_first(v_mx.dequantize_unscaled())  # code * alpha_V, exact in BF16
    skv = k.shape[1]
    padded = v_unscaled.shape[2]
    anchors = anchor_indices(skv).to(q_hat.device)
    b, h, sq, _ = q_hat.shape
    outs, lses, rmaxes = [], [], []
    for rows in _query_chunks(sq):
        qs = q_hat[:, :, rows]
        if fp4.guard_margin is None:
            m = torch.zeros(b, h, qs.shape[2], 1, device=qs.device)
        else:
            s_anchor = torch.matmul(qs, k_hat[:, :, anchors].transpose(-1, -2))
            m = guard_reference(s_anchor, fp4.guard_margin)
        acc = torch.zeros(b, h, qs.shape[2], v.shape[-1], device=qs.device)
        l = torch.zeros(b, h, qs.shape[2], device=qs.device)
        rmax = torch.full_like(l, float(P_EXP_MIN))  # each row's largest block exponent
        for start in range(0, padded, TILE_N):
            stop = min(start + TILE_N, padded)
            s = torch.full((b, h, qs.shape[2], stop - start), -math.inf, device=qs.device)
            real = min(stop, skv) - start
            if real > 0:
                s[..., :real] = torch.matmul(qs, k_hat[:, :, start : start + real].transpose(-1, -2))
            qcode, e = fp4_p_codes(s, m, c, fp4.affine)
            rmax = torch.maximum(rmax, e.amax(dim=-1))
            # 2^(e - L) q: exact in FP32; the shift L cancels in O and keeps sums finite.
            p_unscaled = qcode * torch.exp2(e - FP4_SCALE_SHIFT).repeat_interleave(P_BLOCK, dim=-1)
            acc = acc + torch.matmul(p_unscaled, v_unscaled[:, :, start:stop])
            l = l + p_unscaled.sum(dim=-1)
        # O = sum(2^e q * code_V alpha_V) / (6 sum 2^e q); a row whose every code underflowed
        # (scores far below m; use the guard) has l = 0 and gives 0, never NaN.
        denom = (6.0 * l).unsqueeze(-1)
        outs.append(torch.where(denom > 0, acc / torch.where(denom > 0, denom, 1.0), 0.0))
        lses.append(m.squeeze(-1) * scale + LN2 * (torch.log2(l / 6.0) + FP4_SCALE_SHIFT))
        rmaxes.append(rmax)
    out = _seq_first(torch.cat(outs, dim=2))
    if not torch.isfinite(out).all():
        raise FloatingPointError(
            "direct-p-fp4: the represented probabilities overflowed FP32 (scores far above the "
            "shiftless map's E8M0 range); enable the large-logit guard (FP4Params(guard_margin=...))")
    warn_if_p_scales_at_limit(torch.cat(rmaxes, dim=2), fp4.guard_margin is not None)
    return out, torch.cat(lses, dim=2)


# ---------------------------------------------------------------------------------- utilities
def _check_shapes(q, k, v):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{name} must be a 4-d tensor (B, S, H, D)")
    if k.shape[:3] != v.shape[:3]:
        raise ValueError(f"k and v must agree in (B, S, H), got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} must agree in B, H and D")


def _heads_first(t):
    return t.transpose(1, 2)


def _seq_first(t):
    return t.transpose(1, 2)


def _query_chunks(sq):
    return [slice(i, min(i + _QUERY_CHUNK, sq)) for i in range(0, sq, _QUERY_CHUNK)]


def _f32(x: float) -> float:
    return float(torch.tensor(x, dtype=torch.float32))


def _f32_tensor(x: torch.Tensor) -> torch.Tensor:
    """One rounding to FP32 (of a float64 tensor holding an exact or fma-exact value)."""
    return x.to(torch.float32)
