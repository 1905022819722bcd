"""V^T in the sm90 kernel's layout: keys permuted within 32-key blocks, plus the ones rows.

The wgmma accumulator of S = Q K^T gives each thread the score columns {8j + 2t, 8j + 2t + 1}
(t = lane % 4); the register A operand of the PV wgmma wants {4t..4t+3, 16+4t..16+4t+3} per
32-key block. The kernel packs each thread's own scores into its A registers in order (no
shuffles), so A column k of a 32-key block holds the score of key SIGMA[k]; V^T column k must
then hold key SIGMA[k] too. In direct-p, 8 rows are appended (row D = E4M3 1.0, rows D+1.. = 0)
so that the PV product also yields l = sum of the same E4M3 P values (DESIGN §4).
"""
from __future__ import annotations

import torch

try:  # Triton is optional (CPU installs use the torch gather)
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

E4M3_ONE = 0x38  # the E4M3 byte of 1.0
ONES_ROWS = 8  # wgmma N must be a multiple of 8


def _sigma() -> list[int]:
    out = []
    for k in range(32):
        g, t, a = k // 16, (k % 16) // 4, k % 4
        out.append(16 * g + 8 * (a // 2) + 2 * t + (a % 2))
    return out


SIGMA = tuple(_sigma())
assert sorted(SIGMA) == list(range(32))


def key_permutation(s_pad: int, device=None) -> torch.Tensor:
    """Gather index over a padded key axis (s_pad a multiple of 32): column j <- key perm[j]."""
    if s_pad % 32:
        raise ValueError(f"s_pad must be a multiple of 32, got {s_pad}")
    base = torch.arange(0, s_pad, 32, device=device).unsqueeze(1)
    return (base + torch.tensor(SIGMA, device=device).unsqueeze(0)).reshape(-1)


if triton is not None:

    @triton.jit
    def _relayout_kernel(src, dst, s_pad, D: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr,
                         BLOCK_S: tl.constexpr, ONES: tl.constexpr):
        """One BLOCK_S-key block of one (b, h): dst[:, j] = src[:, 32 (j // 32) + SIGMA[j % 32]],
        then (ONES) row D = E4M3 1.0 and rows D+1 .. ROWS-1 = 0. One read, one write per byte."""
        blk = tl.program_id(0)
        bh = tl.program_id(1).to(tl.int64)
        j = blk * BLOCK_S + tl.arange(0, BLOCK_S)
        k = j % 32
        src_col = j - k + 16 * (k // 16) + 8 * ((k % 4) // 2) + 2 * ((k % 16) // 4) + (k % 2)
        d = tl.arange(0, BLOCK_D)
        ok = d[:, None] < D
        x = tl.load(src + bh * D * s_pad + d[:, None] * s_pad + src_col[None, :], mask=ok, other=0)
        tl.store(dst + bh * ROWS * s_pad + d[:, None] * s_pad + j[None, :], x, mask=ok)
        if ONES:
            r = tl.arange(0, 8)
            ones = tl.where(r[:, None] == 0, 0x38, 0).to(tl.uint8) + tl.zeros((8, BLOCK_S), tl.uint8)
            tl.store(dst + bh * ROWS * s_pad + (D + r[:, None]) * s_pad + j[None, :], ones)


def _relayout_triton(raw: torch.Tensor, out: torch.Tensor, direct_p: bool) -> None:
    b, h, d, s_pad = raw.shape
    block_s = 128 if s_pad % 128 == 0 else 32
    _relayout_kernel[(s_pad // block_s, b * h)](
        raw, out, s_pad, D=d, BLOCK_D=triton.next_power_of_2(d), ROWS=out.shape[2], BLOCK_S=block_s,
        ONES=direct_p, num_warps=4)


def sm90_v_layout(v8t: torch.Tensor, direct_p: bool, *, backend: str = "auto") -> torch.Tensor:
    """(B, H, D, S_pad) float8 V^T (prepare.py's v8t) -> the kernel's (B, H, Dv, S_pad) layout.

    On CUDA one fused Triton pass (permute + ones rows, one read and one write per byte);
    elsewhere (or backend="torch") a torch gather, the definition the Triton pass is tested against."""
    if v8t.dtype != torch.float8_e4m3fn or v8t.dim() != 4:
        raise ValueError(f"v8t must be a 4-D float8_e4m3fn tensor, got {v8t.dtype} {tuple(v8t.shape)}")
    b, h, d, s_pad = v8t.shape
    if s_pad % 32:
        raise ValueError(f"S_pad must be a multiple of 32, got {s_pad}")
    use_triton = backend == "triton" or (backend == "auto" and triton is not None and v8t.is_cuda)
    if use_triton:
        rows = d + (ONES_ROWS if direct_p else 0)
        out = torch.empty(b, h, rows, s_pad, dtype=torch.uint8, device=v8t.device)
        _relayout_triton(v8t.contiguous().view(torch.uint8), out, direct_p)
        return out.view(torch.float8_e4m3fn)
    raw = v8t.view(torch.uint8)
    rows = d + (ONES_ROWS if direct_p else 0)
    out = torch.empty(b, h, rows, s_pad, dtype=torch.uint8, device=v8t.device)
    out[:, :, :d] = raw[..., key_permutation(s_pad, v8t.device)]
    if direct_p:
        out[:, :, d:] = 0
        out[:, :, d] = E4M3_ONE  # keys past S_kv see P = 0, so their ones are harmless
    return out.view(torch.float8_e4m3fn)
