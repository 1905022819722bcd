"""The FP4 emulation's host side: operands from the reference's `formats` functions, the Triton
launch, and the overflow check the reference's FP32 sums imply."""
from __future__ import annotations

import math

import torch

from ... import formats, reference
from ...modes import FP4_SCALE_SHIFT, LN2, LOG2_6, NEAREST_POW2_BIAS, P_BLOCK, TILE_N, FP4Params, default_scale

try:
    import triton

    from . import fp4_kernel as _k
    IMPORT_ERROR = None
except Exception as exc:  # triton is optional: dispatch then keeps the torch reference
    triton = None
    _k = None
    IMPORT_ERROR = exc

# Kernel variants (both exact, both checked): block maxima by reshape (else by masked selects);
# E2M1 by the comparison ladder (else by the magic-number rounding, 14% faster on H200 at S 7680).
# Launch: 128 x 128 tiles, 8 warps, 2 stages (the numerics fix only the 32-key P blocks); head
# dims above 128 use 64-query tiles to keep the FP32 accumulator in registers.
_DEFAULT = {"reshape": True, "ladder": True}


def prepare_operands(q, k, v, guard_margin=None, operand_dtype=None):
    """The kernel's operands, from the reference's formats functions, heads first and padded.

    Returns (q_hat (B,H,Sq,DP), k_hat (B,H,Skv_pad,DP), v' (B,H,Skv_pad,DP), m (B,H,Sq)):
    operands in operand_dtype (BF16 on CUDA, FP32 on CPU), DP = D rounded up to a power of two
    >= 16 (tl.dot and tl.arange need it; zero columns add nothing), Skv_pad = S_kv rounded up to
    128 (zero keys, masked to -inf in the kernel); every value is exact in BF16. m is the row
    reference in raw score units, float32: zeros, or with the guard on, the max of the scores
    against reference.anchor_indices + M ln 2, computed as the reference computes it.
    """
    if operand_dtype is None:
        operand_dtype = torch.bfloat16 if q.is_cuda else torch.float32
    b, sq, h, d = q.shape
    skv = k.shape[1]
    dp = max(16, triton.next_power_of_2(d))
    skv_pad = -(-skv // TILE_N) * TILE_N
    reference.check_finite(q, k, v)  # as the reference: an error, not a saturated code
    q_hat = formats.nvfp4_quantize_qk(q).dequantize().transpose(1, 2)  # (B,H,Sq,D) float32 view
    k_hat = formats.nvfp4_quantize_qk(k).dequantize().transpose(1, 2)
    v_unscaled = formats.mxfp4_quantize_v(v).dequantize_unscaled().transpose(1, 2)  # keys to 32
    qh = torch.zeros(b, h, sq, dp, dtype=operand_dtype, device=q.device)
    qh[..., :d] = q_hat
    kh = torch.zeros(b, h, skv_pad, dp, dtype=operand_dtype, device=q.device)
    kh[:, :, :skv, :d] = k_hat
    vh = torch.zeros_like(kh)
    vh[:, :, : v_unscaled.shape[2], :d] = v_unscaled
    if guard_margin is None:
        m = torch.zeros(b, h, sq, dtype=torch.float32, device=q.device)
    else:
        # The reference's own expression and query chunks, so its FP32 matmul sees the same shapes.
        k_anchor = k_hat[:, :, reference.anchor_indices(skv).to(q.device)].transpose(-1, -2)
        chunk = reference._QUERY_CHUNK
        m = torch.cat([reference.guard_reference(torch.matmul(q_hat[:, :, i:i + chunk], k_anchor),
                                                 guard_margin).squeeze(-1)
                       for i in range(0, sq, chunk)], dim=-1).contiguous()
    return qh, kh, vh, m


def _f32(x: float) -> float:
    """x rounded to FP32 (the kernel's scalar arguments are FP32)."""
    return float(torch.tensor(x, dtype=torch.float32))


def launch(qh, kh, vh, m, out, lse, *, skv, d, scale, affine, rmax=None, block_m=None, num_warps=None,
           num_stages=None, reshape=None, ladder=None, debug_p=None):
    """Run the kernel on prepared operands: writes out (B,Sq,H,D) float32, lse (B,H,Sq) and
    rmax (B,H,Sq), each row's largest P block exponent (None: a scratch tensor); returns all three."""
    b, h, sq, dp = qh.shape
    if rmax is None:
        rmax = torch.empty_like(lse)
    skv_pad = kh.shape[2]
    if block_m is None:
        block_m = 128 if dp <= 128 else 64
    if num_warps is None:
        num_warps = 8 if block_m == 128 else 4
    if num_stages is None:
        num_stages = 2
    c = reference.log2_scale(scale)
    a, bb = _f32(affine[0]), _f32(affine[1])
    ac = _f32(a * c)  # fl(A c), as fp4_p_codes
    pq, pe = (debug_p if debug_p is not None else (out, out))
    grid = (triton.cdiv(sq, block_m), b * h)
    _k.fp4_emulation_fwd[grid](
        qh, kh, vh, m, out, lse, rmax, pq, pe, sq, skv, skv_pad, h,
        out.stride(0), out.stride(1), out.stride(2),
        c, ac, a, bb, _f32(LOG2_6), _f32(NEAREST_POW2_BIAS), float(scale),
        D=d, DP=dp, BLOCK_M=block_m, BLOCK_N=TILE_N, PB=P_BLOCK,
        RESHAPE=_DEFAULT["reshape"] if reshape is None else reshape,
        LADDER=_DEFAULT["ladder"] if ladder is None else ladder,
        IEEE_DOT=qh.dtype == torch.float32, DEBUG_P=debug_p is not None,
        num_warps=num_warps, num_stages=num_stages, enable_fp_fusion=False)
    return out, lse, rmax


def check_overflow(out, lse, m, scale):
    """Raise where the reference's FP32 sums overflow: its denominator 6 sum 2^(e-16) q, or its
    accumulator (= out times that), reaches 2^128. From lse: log2(sum 2^(e-16) q) =
    (lse - m scale) / ln2 - 16 + log2 6."""
    log2_l = (lse - m * scale) / LN2 - FP4_SCALE_SHIFT + math.log2(6.0)  # (B,H,Sq)
    big_out = out.abs().amax(dim=-1).transpose(1, 2).clamp(min=1.0).log2()  # (B,H,Sq)
    worst = (log2_l + math.log2(6.0) + big_out).nan_to_num(nan=-math.inf).max()
    if worst.item() >= 128.0:
        raise FloatingPointError(
            "direct-p-fp4: the represented probabilities overflowed FP32 (scores far above the "
            "shiftless map's E8M0 range); enable the large-logit guard (FP4Params(guard_margin=...))")


def run(q, k, v, mode="direct-p-fp4", scale=None, fp4: FP4Params | None = None, return_lse=False,
        _launch_options=None):
    """The spec's run, on inputs `supports` accepted: (out in q's dtype, LSE or None)."""
    fp4 = fp4 or FP4Params()
    if len(fp4.affine) != 2:
        raise ValueError(f"fp4.affine must be (A, B), got {fp4.affine!r}")
    scale = default_scale(q.shape[-1]) if scale is None else float(scale)
    b, sq, h, d = q.shape
    skv = k.shape[1]
    qh, kh, vh, m = prepare_operands(q, k, v, fp4.guard_margin)
    out = torch.empty(b, sq, h, d, dtype=torch.float32, device=q.device)
    lse = torch.empty(b, h, sq, dtype=torch.float32, device=q.device)
    _, _, rmax = launch(qh, kh, vh, m, out, lse, skv=skv, d=d, scale=scale, affine=fp4.affine,
                        **(_launch_options or {}))
    check_overflow(out, lse, m, scale)
    reference.warn_if_p_scales_at_limit(rmax, fp4.guard_margin is not None)
    return out.to(q.dtype), (lse if return_lse else None)
