"""FP8 quantisation pre-pass for the fp8 and direct-p kernels (docs/NUMERICS.md, "operands").

Input: BF16/FP16/FP32 q, k, v of shape (B, S, H, D) (diffusers' layout, any strides).
Output: a `PreparedFP8` in the layout every FP8 attention kernel of this package consumes
(the Triton kernel here and the CuTe sm90 kernel):

    q8     (B, H, Sq_pad, D)   float8_e4m3fn, contiguous; rows >= Sq are zero codes
    k8     (B, H, Skv_pad, D)  float8_e4m3fn, contiguous; K smoothed by its mean; rows >= Skv zero
    v8t    (B, H, D, Skv_pad)  float8_e4m3fn, contiguous: V transposed, so the PV product reads
                               it K-major (keys contiguous), as FP8 wgmma needs; columns >= Skv zero.
                               A kernel may ask for its own V^T layout in the same pass (see
                               `prepare_fp8`'s v_perm / v_ones_rows): keys permuted within 32-key
                               blocks, and rows appended after D (row D all E4M3 1.0, the rest 0).
    q_scale (B, H, Sq_pad/128)  float32, one power-of-two scale per 128-query block
    k_scale (B, H, Skv_pad/128) float32, one per 128-key block (of the smoothed K)
    v_scale (B, H, D)           float32, one per channel over all keys
    k_mean  (B, H, D)           float32, the per-channel key mean that was subtracted

S_pad is S rounded up to a multiple of 128 (TILE_N), so a kernel's full 128-row tiles never read
out of bounds; padded keys must still be masked (probability 0), padded queries not written.
Every (b, h) slice is contiguous, so it is a plain 2-D TMA box for a Hopper kernel.

Codes and scales equal `wan_fp4.reference.quantize_fp8` bit for bit (tests/test_prepare.py;
`wan-fp4 check --kernels triton` on the GPU). Two implementations:
- Triton (CUDA tensors on sm89+, or any tensor under TRITON_INTERPRET=1): two launches per call,
  three for long sequences. The K mean and the V channel amax are whole-sequence reductions and run
  first, as partials over key chunks; their totals (the amax is order-free, and the mean is summed
  in float64 like the reference's `key_mean`, where the sum is exact, so it has the same bits) are
  taken by each K and V block of the quantise launch itself, or, where that would read more
  partials than a launch costs (FOLD_READS), by a launch of their own. The quantise launch does Q,
  K and V (per tile: load, amax, power-of-two scale, scale, cast, store) and keeps the largest Q and
  K scales, and whether Q, K or V held a NaN or inf, for the score-range check, which then reads
  five floats back (`range_stats`) instead of reducing the scales itself. Where all the codes fit
  in L2 it leaves them there for the kernel (KEEP_CODES_IN_L2). On sm90+ the later launches start
  as programmatic dependents of the statistics launch, so that Q's blocks, which need nothing
  from it, run beside it (PDL_PREPASS); the quantise launch lets the attention kernel after it
  start early in turn (the sm90 kernel's `pdl` option).
- torch (everything else): the same arithmetic in plain PyTorch, used on CPU.
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from functools import lru_cache

import torch

from ..modes import E4M3_MAX, E4M3_ONE, QK_SCALE_BLOCK, TILE_N  # noqa: F401 - E4M3_ONE: sm90.layout imports it from here
from ..reference import check_score_range, key_mean, log2_scale, non_finite_error, pow2_scale, quantize_blocks

log = logging.getLogger("wan_fp4")
_skipped_in_capture: list = []


def capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (nothing may synchronise then)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()

try:  # Triton is optional: CPU installs use the torch path.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None
try:  # grid dependency control (programmatic dependent launch), Triton 3.3+
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover - an older Triton: the launches stay plainly ordered
    gdc_launch_dependents = gdc_wait = None



RANGE_STATS = 5  # PreparedFP8.range_stats: Q and K scale maxima, then Q, K, V non-finite flags
# the Int32 word after them, zeroed with them by the statistics launch: the sm90 persistent kernel's
# unit counter (kernel.UNIT_COUNTER), which its last request puts back to 0
UNIT_COUNTER = RANGE_STATS
# the quantise launch's length arguments, compiled as arguments even when 1 (see _quant_kernel)
LENGTH_ARGS = ("Sq", "Skv", "nq", "nk", "n_chunks")


@dataclass
class PreparedFP8:
    q8: torch.Tensor | None  # None: Q's codes are made in the kernel (prepare_fp8's quantise_q)
    k8: torch.Tensor
    v8t: torch.Tensor
    q_scale: torch.Tensor
    k_scale: torch.Tensor
    v_scale: torch.Tensor
    k_mean: torch.Tensor
    seq_q: int
    seq_kv: int
    # (5,) float32: the largest Q and K block scales, then 1 where Q, K, V held a NaN or inf
    range_stats: torch.Tensor
    v_perm: tuple | None = None  # v8t column j holds key 32 (j // 32) + v_perm[j % 32]
    v_ones_rows: int = 0  # rows of v8t after D (row D all E4M3 1.0, the rest 0)
    q_source: torch.Tensor | None = None  # with q8 None: the Q whose codes the kernel makes

    def start_score_range_check(self, mode: str, scale: float) -> "ScoreRangeCheck":
        """Begin `check_score_range` without waiting for the device: `range_stats` starts its
        copy to the host, and the result's `finish()` waits for that copy alone. Queue the
        attention kernel between the two, and the GPU never idles waiting on the host.

        CUDA graph capture forbids reading back: while a graph is being captured the check is
        skipped (logged once), so a graph captured on ordinary inputs replays without it."""
        if capturing():
            if not _skipped_in_capture:
                _skipped_in_capture.append(True)
                log.warning("wan_fp4: the score-range check is skipped inside CUDA graph capture")
            return ScoreRangeCheck(None, mode, 0.0, None, None)
        stats, event = self.range_stats, None
        if stats.is_cuda:
            host = torch.empty(stats.shape, dtype=torch.float32, pin_memory=True)
            host.copy_(stats, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
            stats = host
        return ScoreRangeCheck(self, mode, log2_scale(scale), stats, event)

    def check_score_range(self, mode: str, scale: float) -> None:
        """Raise before a launch whose inputs held a NaN or inf, or whose scores would exceed what
        `mode`'s FP32 arithmetic represents (reference.check_finite and check_score_range; the
        reference raises for the same inputs).
        Waits for the pre-pass; `start_score_range_check` lets a launch go first."""
        self.start_score_range_check(mode, scale).finish()

    def plain_v8t(self) -> torch.Tensor:
        """v8t in the plain (B, H, D, Skv_pad) key order, whatever layout it was written in."""
        d = self.k8.shape[-1]
        vt = self.v8t[:, :, :d]
        if self.v_perm is None:
            return vt
        inverse = torch.argsort(key_permutation(self.v_perm, vt.shape[-1], vt.device))
        return vt.view(torch.uint8)[..., inverse].view(torch.float8_e4m3fn)

    def reference_layout(self) -> dict:
        """The fields of `reference.quantize_fp8` in its layout ((B,S,H,D) codes, (B,blocks,H) scales)."""
        return {
            "q8": self.q8[:, :, : self.seq_q].permute(0, 2, 1, 3),
            "k8": self.k8[:, :, : self.seq_kv].permute(0, 2, 1, 3),
            "v8": self.plain_v8t()[..., : self.seq_kv].permute(0, 3, 1, 2),
            "q_scale": self.q_scale.transpose(1, 2),
            "k_scale": self.k_scale.transpose(1, 2),
            "v_scale": self.v_scale,
            "k_mean": self.k_mean,
        }


@dataclass
class ScoreRangeCheck:
    """A score-range check under way (PreparedFP8.start_score_range_check); ops None: skipped."""
    ops: PreparedFP8 | None
    mode: str
    c: float
    stats: torch.Tensor | None  # range_stats' host copy, or on its way to the host
    event: object

    def finish(self) -> None:
        """Raise ValueError if q, k or v held a NaN or inf (reference.check_finite's error), or if
        these operands' scores can leave the mode's range (reference.check_score_range). Ordinary
        inputs clear it on the scale maxima alone; only inputs the loose bound cannot clear read
        the code rows (a blocking read, inputs far from usual ranges)."""
        if self.ops is None:
            return
        if self.event is not None:
            self.event.synchronize()
        q_max, k_max, *non_finite = self.stats.tolist()
        for name, bad in zip(("q", "k", "v"), non_finite):
            if bad:
                raise non_finite_error(name)
        o = self.ops
        q8 = o.q8
        if q8 is None:  # made in the kernel: the same codes again, read only past the loose bound
            q8 = quantize_blocks(o.q_source.to(torch.float32))[0].permute(0, 2, 1, 3)
        check_score_range(self.mode, self.c, q8, o.q_scale, o.k8, o.k_scale, scale_product=q_max * k_max)


def key_permutation(perm, s_pad: int, device=None) -> torch.Tensor:
    """Gather index over a padded key axis (s_pad a multiple of 32): column j <- key
    32 (j // 32) + perm[j % 32]."""
    if s_pad % 32:
        raise ValueError(f"s_pad must be a multiple of 32, got {s_pad}")
    base = torch.arange(0, s_pad, 32, device=device).unsqueeze(1)
    return (base + torch.tensor(perm, device=device).unsqueeze(0)).reshape(-1)


def _check_v_layout(v_perm, v_ones_rows) -> None:
    if v_perm is not None and sorted(v_perm) != list(range(32)):
        raise ValueError(f"v_perm must be a permutation of range(32), got {v_perm!r}")
    if v_ones_rows not in (0, 8):
        raise ValueError(f"v_ones_rows must be 0 or 8, got {v_ones_rows!r}")


def _padded(s: int) -> int:
    return -(-s // TILE_N) * TILE_N


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"{name} must be (B, S, H, D), got shape {tuple(t.shape)}")
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating tensor, got {t.dtype}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    (bq, _, hq, dq), (bk, skv, hk, dk) = q.shape, k.shape
    if (bq, hq, dq) != (bk, hk, dk):
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} disagree in B, H or D")
    if skv == 0 or q.shape[1] == 0:
        raise ValueError("sequence lengths must be positive")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")




def _v_amax(v: torch.Tensor) -> torch.Tensor:
    """Per-(b, h, channel) max |v| over keys -> (B, H, D) float32 (order-free, hence exact anywhere)."""
    lo, hi = torch.aminmax(v, dim=1)
    return torch.maximum(-lo, hi).to(torch.float32)


def _e4m3_torch(x: torch.Tensor) -> torch.Tensor:
    """RNE, saturating at +-448 (torch's own cast turns overflow into NaN, so clamp first)."""
    return x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


# ------------------------------------------------------------------------------------ torch path
def _prepare_torch(q, k, v, v_perm=None, v_ones_rows=0) -> PreparedFP8:
    B, Sq, H, D = q.shape
    Skv = k.shape[1]
    sq_pad, skv_pad = _padded(Sq), _padded(Skv)

    def blockwise(x: torch.Tensor, s_pad: int):  # x: (B, H, S, D) float32
        x = torch.nn.functional.pad(x, (0, 0, 0, s_pad - x.shape[2]))
        blocks = x.view(B, H, s_pad // QK_SCALE_BLOCK, QK_SCALE_BLOCK, D)
        scale = pow2_scale(blocks.abs().amax(dim=(3, 4)))
        codes = _e4m3_torch(blocks / scale[..., None, None]).view(B, H, s_pad, D)
        return codes, scale

    q8, q_scale = blockwise(q.to(torch.float32).permute(0, 2, 1, 3), sq_pad)
    k_mean = key_mean(k)
    ks = k.to(torch.float32).permute(0, 2, 1, 3) - k_mean[:, :, None, :]
    k8, k_scale = blockwise(ks, skv_pad)
    v_scale = pow2_scale(_v_amax(v))
    vt = v.to(torch.float32).permute(0, 2, 3, 1) / v_scale[..., None]
    v8t = _e4m3_torch(torch.nn.functional.pad(vt, (0, skv_pad - Skv))).view(torch.uint8)
    if v_perm is not None:
        v8t = v8t[..., key_permutation(v_perm, skv_pad, v8t.device)]
    if v_ones_rows:
        extra = torch.zeros(B, H, v_ones_rows, skv_pad, dtype=torch.uint8, device=v8t.device)
        extra[:, :, 0] = E4M3_ONE  # keys past S_kv see P = 0, so their ones are harmless
        v8t = torch.cat([v8t, extra], dim=2)
    v8t = v8t.contiguous().view(torch.float8_e4m3fn)
    return PreparedFP8(q8.contiguous(), k8.contiguous(), v8t, q_scale, k_scale, v_scale, k_mean, Sq, Skv,
                       _torch_range_stats(q, k, v, q_scale, k_scale), v_perm, v_ones_rows)


def _torch_range_stats(q, k, v, q_scale, k_scale) -> torch.Tensor:
    """PreparedFP8.range_stats, computed on the inputs' device without reading anything back."""
    flags = [(~torch.isfinite(t).all()).float() for t in (q, k, v)]
    return torch.stack((q_scale.amax(), k_scale.amax(), *flags))


# ----------------------------------------------------------------------------------- Triton path
if triton is not None:
    _INV_E4M3_MAX = tl.constexpr(1.0 / E4M3_MAX)  # compile-time constants of the kernels
    _STATS_WORDS = tl.constexpr(UNIT_COUNTER + 1)

    @triton.jit
    def _max_nan(a, b):
        """max that keeps a NaN (the hardware max drops it): a maximum over data holding a NaN or
        inf is not finite, which is how the pre-pass notices non-finite inputs at no extra cost."""
        return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)

    @triton.jit
    def _non_finite(amax):
        """1.0 if amax (a maximum of |x| taken with _max_nan) is not finite, else 0.0."""
        return tl.where(amax < float("inf"), 0.0, 1.0)

    @triton.jit
    def _pow2_scale_tl(amax):
        """Returns (scale, 1/scale) as exact powers of two; see reference.pow2_scale."""
        r = amax * _INV_E4M3_MAX  # fl32(1/448)
        bits = r.to(tl.int32, bitcast=True)
        e = (bits >> 23) & 0xFF
        t = tl.where((bits & 0x7FFFFF) == 0, e - 127, e - 126)
        t = tl.where(amax == 0.0, 0, t)
        # t = -127 only when r underflows to 0 (FP32 inputs below ~3e-43): 2^-127 is subnormal
        scale = tl.where(t > -127, (t + 127) << 23, 1 << 22).to(tl.float32, bitcast=True)
        inv = ((127 - t) << 23).to(tl.float32, bitcast=True)
        return scale, inv

    @triton.jit
    def e4m3_rne_sat(x, HW_CVT: tl.constexpr):
        """float32 -> E4M3FN, round to nearest even, saturating at +-448 (finite inputs).

        HW_CVT uses the hardware convert (cvt.rn.satfinite on sm89+). Otherwise integer bit
        arithmetic, which is what the Triton CPU interpreter needs: its own fp8 cast mis-rounds
        values that carry into the next binade (e.g. 31.9 -> 16).
        """
        if HW_CVT:
            out = x.to(tl.float8e4nv)
        else:
            bits = x.to(tl.int32, bitcast=True)
            sign = (bits >> 24) & 0x80
            a = tl.minimum(tl.abs(x), 480.0)  # anything >= 464 saturates; keeps the int math small
            ab = a.to(tl.int32, bitcast=True)
            # normal range: round the mantissa to 3 bits (RNE; a carry bumps the exponent), rebias 127 -> 7
            normal = ((ab + 0x7FFFF + ((ab >> 20) & 1)) >> 20) - (120 << 3)
            # below 2^-6 the E4M3 step is 2^-9: rne(a * 512) by the magic-number add
            sub = ((a * 512.0 + 12582912.0).to(tl.int32, bitcast=True)) & 0xF
            code = tl.where(a < 0.015625, sub, tl.minimum(normal, 126))
            out = (code | sign).to(tl.uint8).to(tl.float8e4nv, bitcast=True)
        return out

    @triton.jit
    def _rows_in(x_ptr, rows, bh, S, H, sxb, sxs, sxh, sxd, D: tl.constexpr, BLOCK_D: tl.constexpr,
                 FIRST: tl.constexpr):
        """Rows `rows` of one (b, h) of x (B, S, H, D), in x's dtype; rows past S and channels past
        D read as zeros. FIRST: read evict-first (see READ_INPUTS_FIRST)."""
        b = bh // H
        h = bh % H
        offs_d = tl.arange(0, BLOCK_D)
        ok = (rows[:, None] < S) & (offs_d[None, :] < D)
        return tl.load(x_ptr + b * sxb + h * sxh + rows[:, None] * sxs + offs_d[None, :] * sxd, mask=ok,
                       other=0.0, eviction_policy="evict_first" if FIRST else "")

    @triton.jit
    def _quant_rows_block(x, mu, out_ptr, scale_ptr, blk, bh, S, n_blk,
                          D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
                          HAS_MEAN: tl.constexpr, HW_CVT: tl.constexpr, KEEP: tl.constexpr):
        """One 128-token block x (`_rows_in`) of one (b, h): [subtract the (BLOCK_D,) mean mu],
        amax, scale, cast, store (B,H,S_pad,D). Returns the block's scale and 1.0 if the block held
        a NaN or inf (its amax, taken with _max_nan, is then not finite), else 0.0. KEEP: store the
        codes evict-last in L2 (see KEEP_CODES_IN_L2)."""
        offs_s = blk * BLOCK_S + tl.arange(0, BLOCK_S)
        offs_d = tl.arange(0, BLOCK_D)
        x = x.to(tl.float32)
        if HAS_MEAN:
            ok = (offs_s[:, None] < S) & (offs_d[None, :] < D)
            x = tl.where(ok, x - mu[None, :], 0.0)  # padded rows stay zero codes
        amax = tl.reduce(tl.reduce(tl.abs(x), 1, _max_nan), 0, _max_nan)
        scale, inv = _pow2_scale_tl(amax)
        codes = e4m3_rne_sat(x * inv, HW_CVT)  # x * 2^-t == x / 2^t exactly
        s_pad = n_blk * BLOCK_S
        out = out_ptr + bh * s_pad * D + offs_s[:, None] * D + offs_d[None, :]
        tl.store(out, codes, mask=offs_d[None, :] < D, eviction_policy="evict_last" if KEEP else "")
        tl.store(scale_ptr + bh * n_blk + blk, scale)
        return scale, _non_finite(amax)

    @triton.jit
    def _v_rows(perm_ptr, blk, BLOCK_S: tl.constexpr, PERM: tl.constexpr):
        """The keys a V block reads, in the order of its output columns: with PERM, output column
        j holds key 32 (j // 32) + perm[j % 32] (whole D-vectors permuted, so the reads stay
        coalesced and the transposed store stays in order)."""
        offs_s = blk * BLOCK_S + tl.arange(0, BLOCK_S)
        if PERM:
            offs_s = offs_s - offs_s % 32 + tl.load(perm_ptr + offs_s % 32)
        return offs_s

    @triton.jit
    def _quant_v_block(x, amax, out_ptr, scale_ptr, blk, bh, s_pad,
                       D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
                       HW_CVT: tl.constexpr, ONES_ROWS: tl.constexpr, ONE_CODE: tl.constexpr,
                       KEEP: tl.constexpr):
        """One 128-key block x of one (b, h), its rows read in `_v_rows` order: per-channel scale
        (from the (BLOCK_D,) channel maxima amax), cast, store transposed (B, H, D + ONES_ROWS,
        S_pad). Returns 1.0 if V of this (b, h) held a NaN or inf anywhere (its column maxima,
        taken with _max_nan, are then not finite), else 0.0."""
        offs_s = blk * BLOCK_S + tl.arange(0, BLOCK_S)
        offs_d = tl.arange(0, BLOCK_D)
        scale, inv = _pow2_scale_tl(amax)
        codes = e4m3_rne_sat(x.to(tl.float32) * inv[None, :], HW_CVT)
        rows = D + ONES_ROWS
        out = out_ptr + bh * rows * s_pad + offs_d[None, :] * s_pad + offs_s[:, None]
        tl.store(out, codes.to(tl.uint8, bitcast=True), mask=offs_d[None, :] < D,  # out is a uint8 view
                 eviction_policy="evict_last" if KEEP else "")
        if ONES_ROWS > 0:
            r = tl.arange(0, ONES_ROWS)
            ones = tl.where(r[:, None] == 0, ONE_CODE, 0).to(tl.uint8) + tl.zeros((ONES_ROWS, BLOCK_S), tl.uint8)
            tl.store(out_ptr + bh * rows * s_pad + (D + r[:, None]) * s_pad + offs_s[None, :], ones)
        if blk == 0:
            tl.store(scale_ptr + bh * D + offs_d, scale, mask=offs_d < D)
        return _non_finite(tl.reduce(amax, 0, _max_nan))  # V's column maxima kept NaN too

    @triton.jit
    def _column_totals(ksum_ptr, vmax_ptr, bh, n_chunks, S, D: tl.constexpr, BLOCK_D: tl.constexpr,
                       GROUP: tl.constexpr, SUM: tl.constexpr, MAX: tl.constexpr):
        """The key chunks' partials of one (b, h) (`_column_stats_kernel`) -> (K mean, max |V|),
        each (BLOCK_D,): the mean (SUM) is their float64 sum in chunk order / S, rounded once to
        float32, as reference.key_mean; the max (MAX) is order-free. GROUP chunks' loads go out
        at once (unrolled; the chunks past n_chunks add +0.0, which changes no bit of a sum that
        starts at +0.0)."""
        offs_d = tl.arange(0, BLOCK_D)
        ksum = tl.zeros((BLOCK_D,), tl.float64)
        vmax = tl.zeros((BLOCK_D,), tl.float32)
        for c0 in range(0, n_chunks, GROUP):
            for j in tl.static_range(GROUP):
                at = (bh * n_chunks + c0 + j) * D + offs_d
                ok = (offs_d < D) & (offs_d * 0 + c0 + j < n_chunks)  # a vector mask (the interpreter wants one)
                if SUM:
                    ksum += tl.load(ksum_ptr + at, mask=ok, other=0.0)
                if MAX:
                    vmax = _max_nan(vmax, tl.load(vmax_ptr + at, mask=ok, other=0.0))
        return (ksum / S).to(tl.float32), vmax

    # Triton makes an integer argument equal to 1 a constant. Compiled so for one token (Triton
    # 3.6, H100 and H200), this launch left Q's and K's padding rows past the first 16 (D128) or
    # 32 (D64) of the block wrong; compiled with the lengths as arguments it writes every byte
    # (BENCHMARKS.md, 2026-12-05 fifth run; the device check's "padding" cases).
    @triton.jit(do_not_specialize=LENGTH_ARGS)
    def _quant_kernel(q_ptr, k_ptr, v_ptr, mean_ptr, amax_ptr, ksum_ptr, vmax_ptr, perm_ptr,
                      q8_ptr, k8_ptr, v8_ptr, q_scale_ptr, k_scale_ptr, v_scale_ptr, stats_ptr,
                      Sq, Skv, H, nq, nk, n_chunks,
                      sqb, sqs, sqh, sqd, skb, sks, skh, skd, svb, svs, svh, svd,
                      D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
                      HW_CVT: tl.constexpr, PERM: tl.constexpr, ONES_ROWS: tl.constexpr,
                      ONE_CODE: tl.constexpr, FOLD: tl.constexpr, GROUP: tl.constexpr, KEEP: tl.constexpr,
                      READ_FIRST: tl.constexpr, PDL: tl.constexpr):
        """Q, K and V in one launch: blocks [0, nq) of axis 0 quantise Q rows, [nq, nq + nk) K rows
        (smoothed), the rest V^T. FOLD: each K or V block takes its head's column totals from the
        n_chunks partials itself (the first block of each also writes them out: K's mean, V's
        scales); else it reads the totals the totals launch wrote to mean_ptr / amax_ptr.
        stats_ptr[0:5] (PreparedFP8.range_stats, zeroed by the statistics pass before) gathers the
        largest Q and K block scales and whether Q, K, V held a NaN or inf, for the host's check.
        KEEP: the codes stored evict-last (KEEP_CODES_IN_L2); READ_FIRST: Q, K and V read
        evict-first (READ_INPUTS_FIRST).
        PDL: launched as a programmatic dependent of the statistics launch (PDL_PREPASS): Q's
        blocks need nothing from it, so they run while it does and wait for it (gdc_wait) only
        before their atomics on stats_ptr, which it zeroes; K's and V's blocks wait before they read
        their column totals. It lets the launch after it (the attention kernel, a programmatic
        dependent that waits for it to finish before its first load) start at once.
        Every block issues its rows' loads before anything it waits for, so that they are in flight
        while it waits and reads its totals (the statistics launch does not write Q, K or V, and all
        work before it has ended when its dependents start). Paired on an H100 against the rows
        read after the totals (BENCHMARKS.md, 2026-12-06), the pre-pass 0.5-1.8% faster up to 4,096
        tokens and for the 1.3B model's cross attention, the same at the Wan lengths."""
        if PDL:
            gdc_launch_dependents()
        pid = tl.program_id(0)
        bh = tl.program_id(1).to(tl.int64)  # element offsets exceed 2^31 at Wan sizes with B > 4
        offs_d = tl.arange(0, BLOCK_D)
        if pid < nq:
            x = _rows_in(q_ptr, pid * BLOCK_S + tl.arange(0, BLOCK_S), bh, Sq, H, sqb, sqs, sqh, sqd, D, BLOCK_D,
                         READ_FIRST)
            scale, bad = _quant_rows_block(x, None, q8_ptr, q_scale_ptr, pid, bh, Sq, nq,
                                           D, BLOCK_D, BLOCK_S, False, HW_CVT, KEEP)
            if PDL:
                gdc_wait()
            tl.atomic_max(stats_ptr, scale)  # non-negative floats: order-free, so exact
        elif pid < nq + nk:
            x = _rows_in(k_ptr, (pid - nq) * BLOCK_S + tl.arange(0, BLOCK_S), bh, Skv, H, skb, sks, skh, skd, D,
                         BLOCK_D, READ_FIRST)
            if PDL:
                gdc_wait()
            if FOLD:
                mu = _column_totals(ksum_ptr, vmax_ptr, bh, n_chunks, Skv, D, BLOCK_D, GROUP, True, False)[0]
                if pid == nq:
                    tl.store(mean_ptr + bh * D + offs_d, mu, mask=offs_d < D)
            else:
                mu = tl.load(mean_ptr + bh * D + offs_d, mask=offs_d < D, other=0.0)
            scale, bad = _quant_rows_block(x, mu, k8_ptr, k_scale_ptr, pid - nq, bh, Skv, nk,
                                           D, BLOCK_D, BLOCK_S, True, HW_CVT, KEEP)
            tl.atomic_max(stats_ptr + 1, scale)
        else:
            x = _rows_in(v_ptr, _v_rows(perm_ptr, pid - nq - nk, BLOCK_S, PERM), bh, Skv, H, svb, svs, svh, svd, D,
                         BLOCK_D, READ_FIRST)
            if PDL:
                gdc_wait()
            if FOLD:
                amax = _column_totals(ksum_ptr, vmax_ptr, bh, n_chunks, Skv, D, BLOCK_D, GROUP, False, True)[1]
            else:
                amax = tl.load(amax_ptr + bh * D + offs_d, mask=offs_d < D, other=0.0)
            bad = _quant_v_block(x, amax, v8_ptr, v_scale_ptr, pid - nq - nk, bh, nk * BLOCK_S, D, BLOCK_D,
                                 BLOCK_S, HW_CVT, ONES_ROWS, ONE_CODE, KEEP)
        if bad > 0:  # rare: one atomic per offending block
            tl.atomic_max(stats_ptr + 2 + (pid >= nq).to(tl.int32) + (pid >= nq + nk).to(tl.int32), bad)

    @triton.jit
    def _column_stats_kernel(k_ptr, v_ptr, ksum_ptr, vmax_ptr, stats_ptr, S, H, n_chunks, chunk_len,
                             skb, sks, skh, skd, svb, svs, svh, svd,
                             D: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr, PDL: tl.constexpr):
        """Partial column statistics of one chunk of chunk_len keys of one (b, h): the float64 sum
        of K (exact for BF16 values in any realistic range, so the total does not depend on how the
        keys are split) and the max |V|, into (B*H, n_chunks, D). Accumulated elementwise in a
        (ROWS, D) tile and reduced across rows once at the end (a cross-thread reduction per
        loaded tile would cost more than the loads). The chunk length is an argument, so that one
        compiled loop serves every length. The first program also zeroes the five range
        statistics the quantise launch raises. PDL: the next launch may start at once (its
        programs wait for this one where they read what it writes)."""
        if PDL:
            gdc_launch_dependents()
        chunk = tl.program_id(0)
        bh = tl.program_id(1).to(tl.int64)
        offs_d = tl.arange(0, BLOCK_D)
        ksum = tl.zeros((ROWS, BLOCK_D), tl.float64)
        vmax = tl.zeros((ROWS, BLOCK_D), tl.float32)
        for r in range(0, chunk_len, ROWS):
            rows = chunk * chunk_len + r + tl.arange(0, ROWS)
            kx = _rows_in(k_ptr, rows, bh, S, H, skb, sks, skh, skd, D, BLOCK_D, False)
            vx = _rows_in(v_ptr, rows, bh, S, H, svb, svs, svh, svd, D, BLOCK_D, False)
            ksum += kx.to(tl.float64)
            vmax = _max_nan(vmax, tl.abs(vx.to(tl.float32)))
        out = bh * n_chunks * D + chunk * D + offs_d
        tl.store(ksum_ptr + out, tl.sum(ksum, axis=0), mask=offs_d < D)
        tl.store(vmax_ptr + out, tl.reduce(vmax, 0, _max_nan), mask=offs_d < D)
        if (chunk == 0) & (bh == 0):
            offs = tl.arange(0, 8)
            tl.store(stats_ptr + offs, tl.zeros((8,), tl.float32), mask=offs < _STATS_WORDS)

    @triton.jit
    def _column_totals_kernel(ksum_ptr, vmax_ptr, mean_ptr, amax_ptr, S, n_chunks,
                              D: tl.constexpr, BLOCK_D: tl.constexpr, GROUP: tl.constexpr, PDL: tl.constexpr):
        """The chunks' partials of one (b, h) -> K mean and V channel amax (`_column_totals`), for
        a quantise launch that does not take them itself (FOLD_READS). PDL: a programmatic
        dependent of the statistics launch that lets the quantise launch start at once, then
        waits for the partials."""
        if PDL:
            gdc_launch_dependents()
            gdc_wait()
        bh = tl.program_id(0).to(tl.int64)
        offs_d = tl.arange(0, BLOCK_D)
        mean, vmax = _column_totals(ksum_ptr, vmax_ptr, bh, n_chunks, S, D, BLOCK_D, GROUP, True, True)
        tl.store(mean_ptr + bh * D + offs_d, mean, mask=offs_d < D)
        tl.store(amax_ptr + bh * D + offs_d, vmax, mask=offs_d < D)


# The column statistics' programs: (warps, keys per program) by preference, the first whose
# programs give every SM _WARPS_PER_SM warps. A program of one warp ends without a reduction across
# warps (a third of a short launch's warp samples with four, ncu: docs/SM90_GEN2.md item 36); where
# one-warp programs would need chunks under 32 keys, their partials (the quantise launch reads
# TOTALS_LOADS of them a step) cost more than that saves, and programs of four warps take the work.
# Paired with the launches before (BENCHMARKS.md, 2026-12-06 second run), on an H200 the pre-pass
# 9% faster at B1 H40 1,024 and 2,048 tokens, 7% at H12 1,024, 4-5% for the 1.3B model's cross
# attention, 2.4-3.6% at the Wan self-attention lengths, 1.2-1.6% at 4,096 (the whole call at H40
# 1,024 tokens 3.3-3.5%); on an H100, measured piece by piece, 1-7% except 1% slower at 4,096.
STATS_PROGRAMS = ((1, (512, 256, 128, 64, 32)), (4, (512, 256, 128, 64)))
_WARPS_PER_SM = 8
STATS_WARP_ROWS = 8  # keys a warp loads per step (8 loads of 16 bytes a thread at D128)
# ptxas left to itself gives some compilations of the statistics loop 128 registers and reads each
# load before issuing the next (one round trip after another; which ones depends on the chunk and
# the Triton version). A limit of 168 makes it issue all of a step's loads first in every
# compilation read (sm_90a SASS, Triton 3.6 on an H100 and 3.9 on the CPU), at 163-166 registers.
STATS_MAXNREG = 168
# Launch shapes are module constants, so that a job on the GPU can time others in one process.
# The quantise launch's shape, (warps per 128-row block, ptxas's register limit or None), by its
# length. Four warps at ptxas's own 168 registers (three blocks an SM) beat eight warps by 5-8% from
# 1,024 to 32,760 tokens on an H200 (BENCHMARKS.md, 2026-12-03), and the limits that fit more blocks
# made the pre-pass slower where it runs many rounds (an H100, 2026-12-06 third run: 128 registers
# at four warps spills, 3-14%; eight warps at 80 registers 0.4-1.2% at the Wan lengths). A launch of
# a few rounds instead waits on each block's chain after the statistics, and more resident blocks
# shorten it: eight warps at 80 registers made the whole call 1.3-1.6% faster at B1 H40 1,024 tokens,
# 0.6-0.7% at H12 1,024 and 0.5-1% at H40 2,048 (the same bits; BENCHMARKS.md, 2026-12-06 thirteenth
# run, direct-p; the same launch serves fp8). So a launch of at most QUANT_SHORT_BLOCKS blocks per SM
# takes QUANT_SHORT at head dim 128 (H40 2,048 tokens is 14.5 on 132 SMs; 4,096 tokens, 29, measured
# within its spread either way, keeps QUANT_LONG). As committed, paired on an H100: the call 1.9-2.7%
# faster at B1 H40 1,024 D128, fp8 2.0-2.4% (BENCHMARKS.md, 2026-12-06 fourteenth run). Head dim 64
# keeps QUANT_LONG: eight warps made the call at B1 H40 1,024 D64 2.6-3.0% slower in that run.
QUANT_LONG = (4, None)
QUANT_SHORT = (8, 80)
QUANT_SHORT_BLOCKS = 15
# Each K or V block of the quantise launch may sum its head's column partials itself, sparing the
# totals launch (1.2-1.7 us from a CUDA graph at 1,024-4,096 tokens, H200); those reads grow with
# blocks x chunks, and past this many partial rows read by all K blocks (B*H * K blocks * chunks)
# they cost more than the launch (BENCHMARKS.md, 2026-12-04, sixth run; raised from 8,192 for the
# one-warp statistics programs, whose 32 chunks a head at B1 H40 1,024 tokens make 10,240 reads and
# were 2.5% faster folded: BENCHMARKS.md, 2026-12-06 second run)
FOLD_READS = 16384
TOTALS_LOADS = 16  # the totals, wherever taken: chunks' partials loaded per step (unrolled)
# The totals' own launch: ptxas left to itself gives it 32 registers and issues 6 of a step's 32 loads
# before its first add, the rest between the adds (several round trips a step). At 80 or more, all
# 32 issue first (sm_90a SASS, Triton 3.9). Paired on two H100s and an H200 (BENCHMARKS.md,
# 2026-12-06 third run), the pre-pass 1.3-3.3% faster wherever this launch runs (2,048 and 4,096
# tokens, H12 S32760), 0.6-1% at H40 S32760 and S75600.
TOTALS_MAXNREG = 128
# The kernel reads the codes right after the quantise launch writes them, and nothing reads Q, K or
# V after it: where all the codes fit in L2, the launch stores them evict-last and reads its inputs
# evict-first, so that they are still there for the kernel (without the hints a short call's kernel
# runs as if from a flushed L2). Paired on an H100 (BENCHMARKS.md, 2026-12-05 seventh run), the
# whole call at H40 is 1.9-2.7% faster at 1,024 tokens and 1.6-5.5% at 2,048, both modes, D128 and
# D64; the 1.3B model's cross attention (49.5 MiB of codes) 1% faster for direct-p, 0.06% slower for
# fp8. Past L2's size the launch keeps plain loads and stores.
KEEP_CODES_IN_L2 = True
# Where it keeps the codes, whether it reads Q, K and V evict-first too (the pair above was measured
# with it): nothing in the call reads them again. Read plainly instead, the whole call at B1 H40
# D128 was 3.3-3.9 us slower at 1,024 tokens replayed on the same inputs (2.4-3.3 with them just
# written) and 4.6-6.2 at 2,048; where its bytes are a fraction of L2 (H12, D64) 0.1-1.0 us faster
# replayed and the same written (H100, BENCHMARKS.md, 2026-12-07 third run).
READ_INPUTS_FIRST = True
# The launches after the statistics launch start as its programmatic dependents (sm90+): the
# quantise launch's Q blocks, which need nothing from it, run while it does, on the SMs its few
# programs leave idle at short lengths. Paired on an H100 (BENCHMARKS.md, 2026-12-05 ninth run), the
# whole call 4.5-5.6% faster at 1,024 tokens, 2.2-2.4% at 2,048, 1.6-2.0% for the 1.3B model's cross
# attention, the pre-pass 2.2-2.5% faster at H12 S32760. The bytes are the same either way.
PDL_PREPASS = True


@lru_cache(maxsize=None)
def _sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1


@lru_cache(maxsize=None)
def _capability(device: torch.device) -> tuple[int, int]:
    """A CUDA device's compute capability, asked once per device rather than on every call."""
    return torch.cuda.get_device_capability(device)


@lru_cache(maxsize=None)
def _l2_bytes(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).L2_cache_size if device.type == "cuda" else 0


def keep_codes(code_bytes: int, device: torch.device) -> bool:
    """Whether the quantise launch keeps its codes in L2 for the kernel (KEEP_CODES_IN_L2): when
    they all fit. Only cache hints: the bytes are the same either way."""
    return KEEP_CODES_IN_L2 and code_bytes <= _l2_bytes(device)


def stats_programs(s: int, bh: int, sms: int) -> tuple[int, int]:
    """(warps, keys) of each column-statistics program (STATS_PROGRAMS): the first choice, longest
    chunk first, whose B*H * S / keys programs give every SM _WARPS_PER_SM warps; where none does,
    the last choice's shortest chunk."""
    for warps, chunks in STATS_PROGRAMS:
        for keys in chunks:
            if -(-s // keys) * bh * warps >= _WARPS_PER_SM * sms:
                return warps, keys
    warps, chunks = STATS_PROGRAMS[-1]
    return warps, chunks[-1]


def quant_launch(blocks: int, sms: int, head_dim: int) -> tuple[int, int | None]:
    """(warps, register limit) of a quantise launch of `blocks` 128-row blocks on `sms` SMs:
    QUANT_SHORT at head dim 128 up to QUANT_SHORT_BLOCKS blocks per SM, else QUANT_LONG."""
    return QUANT_SHORT if head_dim == 128 and blocks <= QUANT_SHORT_BLOCKS * sms else QUANT_LONG


def _carve(dtype, device, *shapes) -> list:
    """Tensors of `shapes` as views of one allocation, each starting on a 512-byte boundary (the
    caching allocator's own alignment, so a kernel reading one sees what a separate allocation
    would give): one allocation instead of one per small tensor."""
    align = 512 // dtype.itemsize
    sizes = [-(-math.prod(shape) // align) * align for shape in shapes]
    buf = torch.empty(sum(sizes), dtype=dtype, device=device)
    views, at = [], 0
    for shape, size in zip(shapes, sizes):
        views.append(buf[at:at + math.prod(shape)].view(shape))
        at += size
    return views


def _pdl(t: torch.Tensor) -> bool:
    """Whether the pre-pass's later launches go as programmatic dependents (PDL_PREPASS): on
    sm90+ with a Triton that has grid dependency control, not under the interpreter."""
    return (PDL_PREPASS and gdc_wait is not None and t.is_cuda and not _interpreting()
            and _capability(t.device) >= (9, 0))


def _column_partials(k, v, stats_words, programs=None, pdl=False):
    """The column statistics' first launch: per key chunk of each (b, h), the float64 sum of K and
    the max |V|, as (ksum, vmax, n_chunks), each (B*H, n_chunks, D); it also zeroes stats_words
    (range_stats, then UNIT_COUNTER; see _quant_kernel). programs: (warps, keys) of each program
    (default `stats_programs`); pdl: let the next launch start at once (see _pdl)."""
    B, S, H, D = k.shape
    warps, chunk = stats_programs(S, B * H, _sm_count(k.device)) if programs is None else programs
    rows = warps * STATS_WARP_ROWS
    if chunk % rows:  # a program's tiles would run into the next chunk's keys and count them twice
        raise ValueError(f"the statistics chunk ({chunk} keys) must be a multiple of {rows} "
                         f"(STATS_WARP_ROWS x {warps} warps)")
    n_chunks = -(-S // chunk)
    part = (B * H, n_chunks, D)
    ksum, vmax = _carve(torch.float64, k.device, part, part)
    vmax = vmax.view(-1).view(torch.float32)[: math.prod(part)].view(part)  # float32, in half the room
    _column_stats_kernel[(n_chunks, B * H)](k, v, ksum, vmax, stats_words, S, H, n_chunks, chunk, *k.stride(),
                                            *v.stride(), D=D, BLOCK_D=triton.next_power_of_2(D), ROWS=rows, PDL=pdl,
                                            num_warps=warps, maxnreg=STATS_MAXNREG)
    return ksum, vmax, n_chunks


def _column_totals_into(ksum, vmax, n_chunks, k_mean, v_amax, s: int, pdl=False) -> None:
    """The partials' totals, K mean and V channel amax, each (B, H, D) float32, in a launch of
    their own: the same bits as reference.key_mean and _v_amax (the partial sums are exact in
    float64, so their order does not matter). pdl: as a programmatic dependent (see _pdl)."""
    D = k_mean.shape[-1]
    _column_totals_kernel[(ksum.shape[0],)](ksum, vmax, k_mean, v_amax, s, n_chunks, D=D,
                                            BLOCK_D=triton.next_power_of_2(D), GROUP=TOTALS_LOADS, PDL=pdl,
                                            num_warps=4, maxnreg=TOTALS_MAXNREG, **_pdl_launch(pdl))


def _pdl_launch(pdl: bool) -> dict:
    """The launch option that makes a Triton launch a programmatic dependent of the one before."""
    return {"launch_pdl": True} if pdl else {}


def _column_stats_triton(k, v, programs=None):
    """(K mean, V channel amax) of the two statistics launches, in fresh tensors; programs: see
    _column_partials."""
    B, S, H, D = k.shape
    k_mean, v_amax, stats_words = _carve(torch.float32, k.device, (B, H, D), (B, H, D), (UNIT_COUNTER + 1,))
    ksum, vmax, n_chunks = _column_partials(k, v, stats_words, programs)
    _column_totals_into(ksum, vmax, n_chunks, k_mean, v_amax, S)
    return k_mean, v_amax


@lru_cache(maxsize=None)
def _perm_on(device: torch.device, v_perm: tuple | None) -> torch.Tensor:
    """The 32-key permutation as an int32 tensor on `device`, made once (not a host-to-device copy
    per attention call); a placeholder when there is none."""
    return torch.tensor(v_perm if v_perm is not None else (0,), dtype=torch.int32, device=device)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def triton_usable(t: torch.Tensor) -> bool:
    """Whether the Triton path can run on this tensor's device (sm89+ for FP8, or the interpreter)."""
    if triton is None:
        return False
    if _interpreting():
        return t.device.type == "cpu"
    return t.is_cuda and _capability(t.device) >= (8, 9)


def _prepare_triton(q, k, v, hw_cvt: bool, v_perm=None, v_ones_rows=0, programs=None,
                    quantise_q=True) -> PreparedFP8:
    """The two or three launches (see the module docstring); programs: (warps, keys) of each
    column-statistics program (default `stats_programs`); quantise_q False: no Q blocks (see
    prepare_fp8)."""
    B, Sq, H, D = q.shape
    Skv = k.shape[1]
    sq_pad, skv_pad = _padded(Sq), _padded(Skv)
    nq, nk = sq_pad // QK_SCALE_BLOCK, skv_pad // QK_SCALE_BLOCK
    dev = q.device
    f8 = torch.float8_e4m3fn
    k8 = torch.empty(B, H, skv_pad, D, dtype=f8, device=dev)
    q8 = torch.empty(B, H, sq_pad, D, dtype=f8, device=dev) if quantise_q else None
    n_qb = nq if quantise_q else 0  # the launch's Q blocks
    v8t = torch.empty(B, H, D + v_ones_rows, skv_pad, dtype=f8, device=dev)
    q_scale, k_scale, v_scale, k_mean, v_amax, stats_words = _carve(
        torch.float32, dev, (B, H, nq), (B, H, nk), (B, H, D), (B, H, D), (B, H, D), (UNIT_COUNTER + 1,))
    range_stats = stats_words[:RANGE_STATS]
    pdl = _pdl(q)
    ksum, vmax, n_chunks = _column_partials(k, v, stats_words, programs, pdl)
    fold = B * H * nk * n_chunks <= FOLD_READS
    if not fold:
        _column_totals_into(ksum, vmax, n_chunks, k_mean, v_amax, Skv, pdl)
    warps, maxnreg = quant_launch((n_qb + 2 * nk) * B * H, _sm_count(dev), D)
    # the L2 decision counts Q's codes wherever they are made, so that it does not change with quantise_q
    keep = keep_codes(B * H * sq_pad * D + k8.numel() + v8t.numel(), dev)
    _quant_kernel[(n_qb + 2 * nk, B * H)](
        q, k, v, k_mean, v_amax, ksum, vmax, _perm_on(dev, v_perm), k8 if q8 is None else q8, k8,
        v8t.view(torch.uint8), q_scale, k_scale, v_scale, range_stats, Sq, Skv, H, n_qb, nk, n_chunks,
        *q.stride(), *k.stride(), *v.stride(),
        D=D, BLOCK_D=triton.next_power_of_2(D), BLOCK_S=QK_SCALE_BLOCK, HW_CVT=hw_cvt,
        PERM=v_perm is not None, ONES_ROWS=v_ones_rows, ONE_CODE=E4M3_ONE, FOLD=fold, GROUP=TOTALS_LOADS,
        KEEP=keep, READ_FIRST=keep and READ_INPUTS_FIRST, PDL=pdl, num_warps=warps,
        maxnreg=maxnreg, **_pdl_launch(pdl))
    return PreparedFP8(q8, k8, v8t, q_scale, k_scale, v_scale, k_mean, Sq, Skv, range_stats, v_perm, v_ones_rows,
                       None if quantise_q else q)


def prepare_fp8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, backend: str = "auto",
                hw_cvt: bool | None = None, v_perm=None, v_ones_rows: int = 0,
                quantise_q: bool = True) -> PreparedFP8:
    """Quantise (B, S, H, D) q, k, v for the fp8 / direct-p kernels; see the module docstring.

    v_perm (32 ints) / v_ones_rows (0 or 8): write V^T straight into a kernel's own layout (keys
      permuted within 32-key blocks; rows after D, row D all ones): the sm90 kernel's layout costs
      no extra pass over V.
    backend: "auto" (Triton where `triton_usable`, else torch), "triton" or "torch".
    hw_cvt: Triton only; None = the hardware FP8 convert on CUDA, the bit-arithmetic encoder under
      the interpreter. False on CUDA checks the bit-arithmetic encoder against the hardware.
    quantise_q: False (Triton only) leaves Q to a kernel that makes its codes itself (the sm90
      kernel's quant_q): q8 is None, and q_scale and Q's range statistics are the kernel's to write.
    """
    _check_inputs(q, k, v)
    _check_v_layout(v_perm, v_ones_rows)
    if v_perm is not None:
        v_perm = tuple(int(i) for i in v_perm)
    if backend not in ("auto", "triton", "torch"):
        raise ValueError(f"backend must be 'auto', 'triton' or 'torch', got {backend!r}")
    use_triton = backend == "triton" or (backend == "auto" and triton_usable(q))
    if not use_triton:
        return _prepare_torch(q, k, v, v_perm, v_ones_rows)
    if not triton_usable(q):
        raise RuntimeError(
            f"backend='triton' needs a CUDA tensor on sm89+ or TRITON_INTERPRET=1 with a CPU tensor; "
            f"got device {q.device} (triton {'missing' if triton is None else 'present'})")
    if hw_cvt is None:
        hw_cvt = q.is_cuda
    return _prepare_triton(q, k, v, hw_cvt, v_perm, v_ones_rows, quantise_q=quantise_q)
