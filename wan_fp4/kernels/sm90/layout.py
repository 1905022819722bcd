"""V^T in the sm90 kernel's layout: keys permuted within 32-key blocks, plus the ones rows.

The wgmma accumulator of S = Q K^T gives each thread the score columns {8j + 2t, 8j + 2t + 1}
(t = lane % 4); the register A operand of the PV wgmma wants {4t..4t+3, 16+4t..16+4t+3} per
32-key block. The kernel packs each thread's own scores into its A registers in order (no
shuffles), so A column k of a 32-key block holds the score of key SIGMA[k]; V^T column k must
then hold key SIGMA[k] too. In direct-p, 8 rows are appended (row D = E4M3 1.0, rows D+1.. = 0)
so that the PV product also yields l = sum of the same E4M3 P values.

The quantisation pre-pass writes this layout directly (`v_layout_args`); `sm90_v_layout` converts
a plain V^T (the definition the pre-pass is tested against).
"""
from __future__ import annotations

import torch

from ..prepare import E4M3_ONE, key_permutation as _key_permutation

ONES_ROWS = 8  # wgmma N must be a multiple of 8


def _sigma() -> list[int]:
    out = []
    for k in range(32):
        g, t, a = k // 16, (k % 16) // 4, k % 4
        out.append(16 * g + 8 * (a // 2) + 2 * t + (a % 2))
    return out


SIGMA = tuple(_sigma())
assert sorted(SIGMA) == list(range(32))


def v_layout_args(mode: str) -> dict:
    """prepare_fp8 keywords that make it write V^T in this kernel's layout for `mode`."""
    return {"v_perm": SIGMA, "v_ones_rows": ONES_ROWS if mode == "direct-p" else 0}


def key_permutation(s_pad: int, device=None) -> torch.Tensor:
    """Gather index over a padded key axis (s_pad a multiple of 32): column j <- key perm[j]."""
    return _key_permutation(SIGMA, s_pad, device)


def sm90_v_layout(v8t: torch.Tensor, direct_p: bool) -> torch.Tensor:
    """(B, H, D, S_pad) float8 V^T in plain key order -> the kernel's (B, H, Dv, S_pad) layout
    (a torch gather: one extra pass over V; the pre-pass writes this layout directly)."""
    if v8t.dtype != torch.float8_e4m3fn or v8t.dim() != 4:
        raise ValueError(f"v8t must be a 4-D float8_e4m3fn tensor, got {v8t.dtype} {tuple(v8t.shape)}")
    b, h, d, s_pad = v8t.shape
    if s_pad % 32:
        raise ValueError(f"S_pad must be a multiple of 32, got {s_pad}")
    raw = v8t.view(torch.uint8)
    rows = d + (ONES_ROWS if direct_p else 0)
    out = torch.empty(b, h, rows, s_pad, dtype=torch.uint8, device=v8t.device)
    out[:, :, :d] = raw[..., key_permutation(s_pad, v8t.device)]
    if direct_p:
        out[:, :, d:] = 0
        out[:, :, d] = E4M3_ONE  # keys past S_kv see P = 0, so their ones are harmless
    return out.view(torch.float8_e4m3fn)
