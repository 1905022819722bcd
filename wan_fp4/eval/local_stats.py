"""Direct-p on statistics that need no pass over all keys: what it would cost in accuracy to make
the FP8 pre-pass one launch (docs/SM90_GEN2.md, item 27).

Every code of today's pre-pass waits for two statistics over all keys of a head: K's per-channel
mean (the smoothing) and V's per-channel amax (V's scale). So a call is at least those statistics,
a launch boundary, the quantisation and the kernel.

* K's mean needs no global pass. Subtracting one vector from every key shifts each row's scores by
  a constant, which softmax ignores; the mean of the first 128-key block smooths as exactly, and
  every quantise program can take it from those rows itself.
* V's scale does, while it is one per channel: the PV product can only factor out a scale that is
  the same for all keys. A scale per 128-key block that is one power of two for all channels can
  instead ride in direct-p's codes. Block b's codes are made with the bias raised by 8 e_b,
  e_b = log2(sv_b / sv_0), which multiplies its P by exactly 2^e_b wherever the code stays normal
  (8 codes are one binade); the ones row of V^T, which sums l on the tensor core, holds 2^-e_b for
  block b's keys, so l still sums the unshifted P; and O = acc * sv_0 / l. A code pushed past 126
  moves the row's reference as any large score does.

`local_direct_p` states that variant (the tile walk of reference._fp8_attention under direct-p's
headroom rule) with either or both statistics made local, and `variant_errors` measures each
against exact attention beside today's numerics. CPU is fine. What the block scale costs: a block
whose scale is below block 0's has its codes pushed down by 8 codes per binade, toward E4M3's
subnormals and zero, so where such blocks carry the attention (text padding in cross attention:
small V, most of the mass) the error grows many times (docs/SM90_GEN2.md item 27 has the figures).
A scale per 128-key block and channel, applied to each tile's PV partial after the product, keeps
every block's codes in range (its cost is in the kernel instead: docs/SM90_GEN2.md item 69).
"""
from __future__ import annotations

import math

import torch

from .. import formats, reference
from ..modes import DIRECT_P_HEADROOM, DIRECT_P_SLOPE, QK_SCALE_BLOCK, TILE_N, default_scale

# which statistics are local: none; K's mean from the first block; that, and V per 128-key block in the
# codes ("local"); K's mean from the first block and V scaled per 128-key block and channel, each key
# tile's PV partial scaled by its block's channel scales before it is added ("block-channel V")
VARIANTS = ("today", "first-block K mean", "local", "block-channel V")


def v_block_scales(vf: torch.Tensor):
    """One power-of-two scale per (batch, 128-key block, head) over all channels, E4M3 codes of V
    with it, and e (B, H, blocks) = log2(sv_b / sv_0), integers."""
    v8, scale = reference.quantize_blocks(vf)
    e = torch.log2(scale / scale[:, :1]).round().to(torch.int32).transpose(1, 2)
    return v8, scale[:, 0], e


def local_direct_p(q, k, v, variant: str = "local", scale=None, headroom: float = DIRECT_P_HEADROOM / DIRECT_P_SLOPE):
    """Direct-p (B, S, H, D) in q.dtype with `variant`'s statistics: "today" (global K mean, V per
    channel: the numerics of reference.direct_p_headroom), "first-block K mean" (K smoothed by its
    first 128 keys' mean, V per channel), "local" (that, and V per 128-key block, its scale in
    the codes and the ones row) or "block-channel V" (K as "first-block K mean", V scaled per
    128-key block and channel, which scales each key tile's PV partial per column before it is
    added: a kernel's FFMA in place of fold 1's FADD, docs/SM90_GEN2.md item 69)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    reference.check_finite(q, k, v)
    c = reference.log2_scale(default_scale(q.shape[-1]) if scale is None else float(scale))
    qf, kf, vf = (t.to(torch.float32) for t in (q, k, v))
    q8, q_scale = reference.quantize_blocks(qf)
    k_mean = reference.key_mean(k if variant == "today" else k[:, :QK_SCALE_BLOCK])
    k8, k_scale = reference.quantize_blocks(kf - k_mean.unsqueeze(1))
    b, skv, h, d = k.shape
    nblk = -(-skv // TILE_N)
    shift = torch.zeros(b, h, nblk, dtype=torch.int32)  # per key tile: its codes' bias raised by 8 shift
    tile_scale = torch.ones(b, h, nblk, 1)  # per key tile: its PV partial's column scales
    if variant == "local":
        v8, v_out_scale, shift = v_block_scales(vf)
        if shift.abs().max() > 8:  # 2^-e in the ones row: E4M3 holds powers of two 2^-9 .. 2^8
            raise ValueError(f"V's block scales reach {int(shift.abs().max())} binades from the first block's; "
                             "the ones row holds 2^-8 .. 2^8")
        v_out_scale = v_out_scale.unsqueeze(-1)  # (B, H, 1)
    elif variant == "block-channel V":
        padded = torch.nn.functional.pad(vf, (0, 0, 0, 0, 0, nblk * TILE_N - skv))
        block_scale = reference.pow2_scale(padded.unflatten(1, (nblk, TILE_N)).abs().amax(dim=2))  # (B, nblk, H, D)
        v8 = formats.e4m3_encode(vf / block_scale.repeat_interleave(TILE_N, dim=1)[:, :skv]).view(torch.float8_e4m3fn)
        tile_scale = block_scale.transpose(1, 2)  # (B, H, nblk, D)
        v_out_scale = torch.ones(b, h, 1)  # applied per tile instead
    else:
        v_out_scale = reference.pow2_scale(vf.abs().amax(dim=1))  # (B, H, D)
        v8 = formats.e4m3_encode(vf / v_out_scale.unsqueeze(1)).view(torch.float8_e4m3fn)
    reference.check_score_range("direct-p", c, q8.transpose(1, 2), q_scale.transpose(1, 2), k8.transpose(1, 2),
                                k_scale.transpose(1, 2))
    q8, k8, v8 = (t.transpose(1, 2).to(torch.float32) for t in (q8, k8, v8))
    sq = q8.shape[2]
    q_row = q_scale.repeat_interleave(QK_SCALE_BLOCK, dim=1)[:, :sq].transpose(1, 2) * c
    k_tile = k_scale.transpose(1, 2)
    m = torch.full((b, h, sq), -math.inf)
    l = torch.zeros_like(m)
    acc = torch.zeros(b, h, sq, d)
    for tile, start in enumerate(range(0, skv, TILE_N)):
        keys = slice(start, min(start + TILE_N, skv))
        qk = q_row * k_tile[:, :, tile : tile + 1]
        s_raw = torch.matmul(q8, k8[:, :, keys].transpose(-1, -2))
        e = shift[:, :, tile : tile + 1].to(torch.float32)  # (B, H, 1); 0 on the first tile
        # codes made against the reference lowered by e: t + 8 e, the bias raised by 8 e
        t, m_low, _ = reference.headroom_codes(s_raw, qk, m - e, headroom)
        m_new = m_low + e
        alpha = torch.exp2(m - m_new)
        p = formats.e4m3_decode(reference.direct_p_bytes(t))
        pv = torch.matmul(p, v8[:, :, keys]) * tile_scale[:, :, tile].unsqueeze(2)  # powers of two: exact
        acc = acc * alpha.unsqueeze(-1) + pv
        l = l * alpha + p.sum(dim=-1) * torch.exp2(-e)
        m = m_new
    out = acc * v_out_scale.unsqueeze(2) / l.unsqueeze(-1)
    return out.transpose(1, 2).to(q.dtype)


def v_families(v, *, generator=None) -> dict:
    """V inputs that stress one scale per block against one per channel, from N(0,1) v (B, S, H, D):
    N(0,1); a few channels twenty times larger; a few tokens twenty times larger (an outlier in a
    block costs that block's scale); a large shared mean; and a scale drifting by 2^-4 .. 2^4 along
    the keys (the block scales then differ by up to 8 binades)."""
    s, d = v.shape[1], v.shape[-1]
    channels = torch.ones(d)
    channels[torch.randperm(d, generator=generator)[:4]] = 20.0
    tokens = torch.ones(s)
    tokens[torch.randperm(s, generator=generator)[: max(1, s // 256)]] = 20.0
    drift = torch.exp2(torch.linspace(-4.0, 4.0, s))
    return {"N(0,1)": v, "channel outliers": v * channels, "token outliers": v * tokens[:, None, None],
            "large mean": v + 8.0 * torch.randn(d, generator=generator), "drifting scale": v * drift[:, None, None]}


def variant_errors(q, k, v, *, rows: int | None = None) -> dict:
    """Relative L2 error against exact attention of each of VARIANTS over the first `rows` query rows."""
    from .metrics import rel_l2

    if rows is not None:
        q = q[:, :rows]
    exact = reference.attention(q.float(), k.float(), v.float(), "bf16")
    return {variant: rel_l2(local_direct_p(q, k, v, variant), exact) for variant in VARIANTS}
