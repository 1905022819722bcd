"""How often direct-p's row reference would have to be refreshed: the cost side of a speculative
row max in the sm90 kernel (docs/SM90_GEN2.md, item 4).

A speculative kernel computes a tile's P codes with the reference it already holds and redoes the
tile (exact max, new codes) only when a code shows the reference was too low. A redo is taken by a
whole warp (16 query rows) and holds up its warp group's PV product (64 rows), so what matters is
the share of tiles in which any row of such a group triggers. Two rules are counted on the
quantised operands, tile by tile as the reference walks the keys:

* exact (the running max, fp8's reference): a row triggers whenever its running max moves (`m_new > m_old`);
* slack: the reference is kept until some code of the row, computed with the stale reference,
  rounds above `top` (an E4M3 byte: 120 is p = 1, 126 the largest finite code), a numerics change
  that would let codes run up to 2^((top - 120) / 8).

* headroom (item 12, direct-p's numerics with headroom DIRECT_P_HEADROOM / 8):
  `reference.headroom_codes`, the reference moved only when a code made with it rounds above 126,
  and then so that the largest lands at 120 - 8 headroom. `headroom_error` gives what that rule
  costs in accuracy against exact attention and against the running max, on the input families
  of `input_families`; `pooled_moves` counts its moves over captured attention calls.
"""
from __future__ import annotations

import math

import torch

from .. import reference
from ..modes import DIRECT_P_HEADROOM, DIRECT_P_ONE, DIRECT_P_SLOPE, QK_SCALE_BLOCK, TILE_N, default_scale

WARP_ROWS = 16  # query rows one consumer warp holds
WARP_GROUP_ROWS = 64  # query rows one consumer warp group holds (one PV wgmma)


def row_max_moves(q, k, v, *, top: int | None = None, headroom: float | None = None,
                  scale: float | None = None) -> dict:
    """Trigger rates over (B, H, query rows, key tiles) for q, k, v in (B, S, H, D).

    top None: the exact rule; an int in [120, 126]: the slack rule. headroom (log2 units, with top
    None): the headroom rule instead. Returns the share of
    (row, tile) pairs that trigger, and the share of (group, tile) pairs in which any row of a
    warp's or a warp group's rows triggers (rows grouped from 0 in order, as the kernel tiles them;
    S_q is padded with rows that never trigger). The first tile always triggers (no reference yet);
    the same rates with the suffix `_after_first` count the tiles after it only (NaN for one tile)."""
    if top is not None and not DIRECT_P_ONE <= top <= 126:
        raise ValueError(f"top must be None or an E4M3 byte in [{DIRECT_P_ONE}, 126], got {top!r}")
    if headroom is not None and (top is not None or not 0.0 <= headroom <= 8.0):
        raise ValueError(f"headroom must be in [0, 8] log2 units and replaces top, got headroom={headroom!r} top={top!r}")
    reference.check_finite(q, k, v)
    c = reference.log2_scale(default_scale(q.shape[-1]) if scale is None else float(scale))
    ops = reference.quantize_fp8(q, k, v)
    q8, k8 = (t.transpose(1, 2).to(torch.float32) for t in (ops.q8, ops.k8))
    b, h, sq, _ = q8.shape
    skv = k8.shape[2]
    q_row = ops.q_scale.repeat_interleave(QK_SCALE_BLOCK, dim=1)[:, :sq].transpose(1, 2) * c
    k_tile = ops.k_scale.transpose(1, 2)
    m = torch.full((b, h, sq), -math.inf, dtype=torch.float64)
    triggers = []
    for tile, start in enumerate(range(0, skv, TILE_N)):
        qk = (q_row * k_tile[:, :, tile : tile + 1]).double()
        s_raw = torch.matmul(q8, k8[:, :, start : start + TILE_N].transpose(-1, -2)).double()
        if headroom is not None:
            _, m_new, fire = reference.headroom_codes(s_raw.float(), qk.float(), m.float(), headroom)
            m = m_new.double()
        else:
            tile_max = (s_raw * qk.unsqueeze(-1)).to(torch.float32).amax(dim=-1).double()
            if top is None:
                fire = tile_max > m
            else:
                # the stale reference's largest code
                t = reference.direct_p_t(s_raw, qk, m)
                fire = torch.isinf(m) | (torch.round(t.amax(dim=-1)).double() > top)
            m = torch.where(fire, torch.maximum(m, tile_max), m)
        triggers.append(fire)
    fired = torch.stack(triggers, dim=-1)  # (B, H, Sq, tiles)
    out = {"tiles": fired.shape[-1], "rows": sq}
    # On short rows the first tile's trigger dominates the rates: the tiles after it are the moves.
    for suffix, f in (("", fired), ("_after_first", fired[..., 1:])):
        out["row_rate" + suffix] = f.double().mean().item()
        for name, rows in (("warp_rate", WARP_ROWS), ("warp_group_rate", WARP_GROUP_ROWS)):
            padded = torch.nn.functional.pad(f, (0, 0, 0, -sq % rows))
            grouped = padded.reshape(b, h, padded.shape[2] // rows, rows, f.shape[-1])
            out[name + suffix] = grouped.any(dim=3).double().mean().item()
    return out


def pooled_moves(calls, *, headroom: float | None = DIRECT_P_HEADROOM / DIRECT_P_SLOPE) -> dict:
    """`row_max_moves` under the headroom rule (None: the exact max) over attention calls of one
    shape, e.g. the q, k, v (B, S, H, D) captured by `capture.capture_attention` at one kind and
    step over layers and prompts: each rate over all the calls' (row or group, tile) pairs, the
    mean of the calls' rates since their shapes are equal. "calls" counts them."""
    calls = list(calls)
    shapes = {tuple(tuple(t.shape) for t in call) for call in calls}
    if len(shapes) != 1:
        raise ValueError(f"calls must be a non-empty list of (q, k, v) of one shape, got shapes {sorted(shapes)}")
    each = [row_max_moves(q, k, v, headroom=headroom) for q, k, v in calls]
    out = {key: sum(r[key] for r in each) / len(each) for key in each[0] if "_rate" in key}
    return {"calls": len(each), "tiles": each[0]["tiles"], "rows": each[0]["rows"], **out}


def headroom_error(q, k, v, headroom: float, *, rows: int | None = None) -> dict:
    """Relative L2 error of direct-p under the headroom rule against exact attention, and of
    direct-p with the running row max as its reference (`running_max_vs_exact`; `vs_running_max`
    between the two), over the first `rows` query rows."""
    from .metrics import rel_l2

    if rows is not None:
        q = q[:, :rows]
    exact = reference.attention(q.float(), k.float(), v.float(), "bf16")
    running = reference.direct_p_headroom(q, k, v, None)[0]
    out = reference.direct_p_headroom(q, k, v, headroom)[0]
    return {"vs_exact": rel_l2(out, exact), "running_max_vs_exact": rel_l2(running, exact),
            "vs_running_max": rel_l2(out, running)}


def input_families(q, k, *, generator=None) -> dict:
    """The attention inputs issue 16's accuracy target names, from N(0,1) q and k in (B, S, H, D):
    the benchmarks' Gaussian scores, peaky attention (logits of std ~6), a few channels of Q and K
    twenty times larger (the outliers of real activations), a large shared mean on K (what the
    K mean-smoothing absorbs), and huge logits (std ~400, nearly one-hot rows, far inside the
    score-range limit)."""
    d = q.shape[-1]
    outliers = torch.ones(d)
    outliers[torch.randperm(d, generator=generator)[:4]] = 20.0
    k_mean = 8.0 * torch.randn(d, generator=generator)
    return {"N(0,1)": (q, k), "logit std ~6": (q * 6 ** 0.5, k * 6 ** 0.5),
            "channel outliers": (q * outliers, k * outliers), "large mean on K": (q, k + k_mean),
            "huge logits": (q * 20.0, k * 20.0)}
