"""Triton FP8 flash-attention forward for modes "fp8" and "direct-p" (docs/NUMERICS.md).

Portable fast path (sm89/sm90/sm120) and the sm90 fallback. Non-causal, no mask, any B and H,
S_q != S_kv, S not a multiple of 128, D in {64, 128}. Operands come from
`wan_fp4.kernels.prepare.prepare_fp8` (layout in its docstring).

Per 128-query tile, over 128-key tiles in key order:
    s = q8 . k8 (FP8 dot into FP32);  qk = fl(fl(sq*sk) * c)
    direct-p: the row reference of reference.headroom_codes: m (the first tile: its max + 3) held,
              t = fma(s, 8 qk, fl(120 - 8 m)), codes c = rne16(t) (f16 rounding, relu); a row
              whose largest code passes 126 moves m by k / 8 and its codes by -k in f16, so that
              code lands at 96; the codes are E4M3 bytes of P (no exp2 per element); l += sum of
              those E4M3 values
    fp8:      m_new = max(m, rowmax fl(s qk)); p = exp2(fma(s, qk, fl(8 - m_new))), which carries
              P's factor 256; P = E4M3(p); l += sum p
    acc, l *= exp2(m_old - m_new) (one exp2 per row);  acc += P . v8 (tile product added in FP32)
    O = acc * sv / l (l carries the 256 in both modes), stored in q's dtype in (B, S, H, D)
BLOCK_M = BLOCK_N = 128 are fixed by the numerics (scale blocks and the softmax tile).

Accuracy against the reference: on Hopper the FP8 tensor core sums products with less than FP32
precision (Triton does not promote by default), so outputs differ from the reference by more than
FP32 reordering would: relative L2 ~5e-3 at S = 1000 and ~7e-3 at S = 32760 on the H200
(`wan-fp4 check --kernels triton`), about a tenth of the modes' own error against exact attention
(~7%), which the kernel reproduces to 3 digits. Under the CPU interpreter (exact dots) the
difference is <= 1e-4.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ...modes import (DIRECT_P_HEADROOM, DIRECT_P_ONE, DIRECT_P_SLOPE, DIRECT_P_TOP, FP8_MODES, LN2, LOG2_P_SCALE, TILE_M, TILE_N, check_mode,
                      default_scale)
from ...reference import log2_scale
from ..prepare import PreparedFP8, e4m3_rne_sat, prepare_fp8, triton_usable

SUPPORTED_MODES = FP8_MODES
SUPPORTED_HEAD_DIMS = (64, 128)
_MODE_ID = {"fp8": 0, "direct-p": 1}
# The modes' constants, as compile-time constants of the kernels (Triton reads globals only then).
_LN2 = tl.constexpr(LN2)
_P_ONE = tl.constexpr(float(DIRECT_P_ONE))
_P_SLOPE = tl.constexpr(DIRECT_P_SLOPE)
_P_TOP = tl.constexpr(float(DIRECT_P_TOP))
_P_HEADROOM = tl.constexpr(float(DIRECT_P_HEADROOM))  # codes
_F16_UNIT = tl.constexpr(2.0**-24)  # an f16 subnormal step: t * 2^-24 in f16 is rne(t) for t < 2048
_LOG2_P_SCALE = tl.constexpr(LOG2_P_SCALE)


def _configs():
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        return [triton.Config({}, num_warps=4, num_stages=1)]
    # 8 warps = two warpgroups of 64 rows (wgmma's M); 4 warps would need twice the registers
    # per thread for the 128 x D accumulator. Only the pipeline depth is tuned.
    return [triton.Config({}, num_warps=8, num_stages=s) for s in (2, 3)]


@triton.jit
def _round_to_bf16(x):
    """float32 rounded to the nearest-even bf16 value (still float32; finite inputs)."""
    bits = x.to(tl.int32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _rne16(t):
    """t (a code count) rounded as its f16 value t * 2^-24 rounds: rne(t) for t < 2048."""
    return (t * _F16_UNIT).to(tl.float16).to(tl.float32) * (1.0 / _F16_UNIT)


@triton.jit
def _dot(a, b, PROMOTE: tl.constexpr):
    """FP8 dot with FP32 output. PROMOTE > 0 makes Triton add the tensor core's partial sum into
    an FP32 register accumulator every PROMOTE products along K (Hopper's FP8 MMA accumulates with
    reduced precision); 0 keeps Triton's default (no promotion within the dot)."""
    if PROMOTE > 0:
        r = tl.dot(a, b, out_dtype=tl.float32, max_num_imprecise_acc=PROMOTE)
    else:
        r = tl.dot(a, b, out_dtype=tl.float32)
    return r


@triton.jit
def _tile(acc, l_i, m_i, q, q_hi, sq, c, k_base, v_base, ks_base, j, Skv, Skv_pad,
          offs_n, offs_d, D: tl.constexpr, BLOCK_N: tl.constexpr, MODE: tl.constexpr,
          HW_CVT: tl.constexpr, MASK: tl.constexpr, PV_SPLIT: tl.constexpr,
          QK_SPLIT: tl.constexpr, PROMOTE: tl.constexpr):
    """One 128-key tile of the online softmax for one 128-query tile."""
    keys = j * BLOCK_N + offs_n
    if QK_SPLIT:  # two K = D/2 products summed in FP32 (q, q_hi: the two halves of D)
        offs_h = tl.arange(0, D // 2)
        kt = tl.load(k_base + keys[None, :] * D + offs_h[:, None])
        kt_hi = tl.load(k_base + keys[None, :] * D + (offs_h + D // 2)[:, None])
        s = _dot(q, kt, PROMOTE) + _dot(q_hi, kt_hi, PROMOTE)
    else:
        kt = tl.load(k_base + keys[None, :] * D + offs_d[:, None])  # (D, BLOCK_N), D contiguous
        s = _dot(q, kt, PROMOTE)
    sk = tl.load(ks_base + j)
    qk = (sq * sk) * c
    z = s * qk
    if MASK:  # keys past S_kv do not exist
        valid = keys[None, :] < Skv
        z = tl.where(valid, z, float("-inf"))
    # Both maps fold the score scale into one explicit FMA against the row reference, as the
    # reference does: z is not rounded on its own, whatever the compiler would contract.
    if MODE == 1:
        first = m_i == float("-inf")
        held = tl.where(first, tl.max(z, axis=1) + _P_HEADROOM / _P_SLOPE, m_i)
        bias = _P_ONE - _P_SLOPE * held
        t = tl.fma(s, qk * _P_SLOPE, bias[:, None])
        if MASK:
            t = tl.where(valid, t, 0.0)
        code = _rne16(tl.maximum(t, 0.0))
        top = tl.max(code, axis=1)
        moved = (top > _P_TOP) & (~first)
        k = top - (_P_ONE - _P_HEADROOM)  # an integer: the move in codes
        m_new = tl.where(moved, held + k * (1.0 / _P_SLOPE), held)
        code = tl.where(moved[:, None], tl.maximum(code - k[:, None], 0.0), code)  # exact
        p8 = code.to(tl.int32).to(tl.uint8).to(tl.float8e4nv, bitcast=True)
        psum = tl.sum(p8.to(tl.float32), axis=1)
        alpha = tl.exp2(m_i - m_new)  # the only exp2 of direct-p: one per row
    else:
        m_new = tl.maximum(m_i, tl.max(z, axis=1))
        alpha = tl.exp2(m_i - m_new)
        bias = _LOG2_P_SCALE - m_new  # fl(8 - m): the 256 of P rides in the exponent
        arg = tl.fma(s, qk, bias[:, None])
        if MASK:
            arg = tl.where(valid, arg, float("-inf"))
        p = tl.exp2(arg)
        psum = tl.sum(p, axis=1)
        p8 = e4m3_rne_sat(p, HW_CVT)
    l_i = l_i * alpha + psum
    vt = tl.load(v_base + offs_d[None, :] * Skv_pad + keys[:, None])  # (BLOCK_N, D), keys contiguous
    if PV_SPLIT:
        # Each tile's PV product starts from zero and is added in FP32 on the CUDA cores, as the
        # reference does: Hopper's FP8 MMA accumulates with reduced precision. H200, B1 H12
        # S32760: rel. L2 vs reference 9.0e-3 -> 7.3e-3, kernel 3-7% slower.
        acc = acc * alpha[:, None] + _dot(p8, vt, PROMOTE)
    else:
        acc = tl.dot(p8, vt, acc * alpha[:, None], out_dtype=tl.float32)
    return acc, l_i, m_new


@triton.autotune(configs=_configs(),
                 key=["D", "MODE", "Sq_pad", "Skv_pad", "PV_SPLIT", "QK_SPLIT", "PROMOTE"])
@triton.jit
def _attn_fwd_kernel(q8, k8, v8t, q_scale, k_scale, v_scale, k_mean, out, lse, c, Sq, Skv, H,
                     Sq_pad, Skv_pad, sob, sos, soh, sod,
                     D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     MODE: tl.constexpr, HW_CVT: tl.constexpr, WRITE_LSE: tl.constexpr,
                     ROUND_BF16: tl.constexpr, PV_SPLIT: tl.constexpr, QK_SPLIT: tl.constexpr,
                     PROMOTE: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q_rows = q8 + bh.to(tl.int64) * Sq_pad * D + offs_m[:, None] * D
    if QK_SPLIT:
        offs_h = tl.arange(0, D // 2)
        q = tl.load(q_rows + offs_h[None, :])
        q_hi = tl.load(q_rows + (offs_h + D // 2)[None, :])
    else:
        q = tl.load(q_rows + offs_d[None, :])
        q_hi = q
    sq = tl.load(q_scale + bh * (Sq_pad // BLOCK_M) + pid_m)
    k_base = k8 + bh.to(tl.int64) * Skv_pad * D
    v_base = v8t + bh.to(tl.int64) * D * Skv_pad
    ks_base = k_scale + bh * (Skv_pad // BLOCK_N)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    n_full = Skv // BLOCK_N
    for j in range(0, n_full):  # full tiles: no key mask
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, q_hi, sq, c, k_base, v_base, ks_base, j, Skv,
                              Skv_pad, offs_n, offs_d, D, BLOCK_N, MODE, HW_CVT, False, PV_SPLIT,
                              QK_SPLIT, PROMOTE)
    if n_full * BLOCK_N < Skv:  # the ragged last tile
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, q_hi, sq, c, k_base, v_base, ks_base, n_full, Skv,
                              Skv_pad, offs_n, offs_d, D, BLOCK_N, MODE, HW_CVT, True, PV_SPLIT,
                              QK_SPLIT, PROMOTE)

    sv = tl.load(v_scale + bh * D + offs_d)
    o = acc * sv[None, :] / l_i[:, None]
    optr = out + b.to(tl.int64) * sob + h * soh + offs_m[:, None] * sos + offs_d[None, :] * sod
    if ROUND_BF16:
        o = _round_to_bf16(o)  # the interpreter's own bf16 cast truncates
    tl.store(optr, o.to(out.dtype.element_ty), mask=offs_m[:, None] < Sq)
    if WRITE_LSE:  # natural log; direct-p's l carries the factor 256 = 2^8
        # smoothing K shifted row i's scores by q_i . mean_k: add it back (ring attention merges
        # LSEs of different key chunks, each with its own mean)
        if QK_SPLIT:
            mu = tl.load(k_mean + bh * D + offs_h)
            mu_hi = tl.load(k_mean + bh * D + D // 2 + offs_h)
            qm = (tl.sum(q.to(tl.float32) * mu[None, :], axis=1)
                  + tl.sum(q_hi.to(tl.float32) * mu_hi[None, :], axis=1))
        else:
            mu = tl.load(k_mean + bh * D + offs_d)
            qm = tl.sum(q.to(tl.float32) * mu[None, :], axis=1)
        shift = qm * (sq * c)
        lse_i = _LN2 * (m_i + shift + tl.log2(l_i) - _LOG2_P_SCALE)
        tl.store(lse + bh.to(tl.int64) * Sq + offs_m, lse_i, mask=offs_m < Sq)


def is_supported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: str, fp4=None) -> tuple[bool, str]:
    """Whether `triton_attention` can run these inputs, and if not, why (for dispatch's fallback)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            return False, f"{name} must be (B, S, H, D), got shape {tuple(t.shape)}"
        if t.dtype not in (torch.bfloat16, torch.float16, torch.float32):
            return False, f"{name} dtype {t.dtype} is not bf16/fp16/fp32"
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[2:] != k.shape[2:]:
        return False, f"shapes disagree: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if q.shape[1] == 0 or k.shape[1] == 0:
        return False, "empty sequence"
    return supports(q, k, v, mode, fp4)


def supports(q, k, v, mode, fp4=None) -> tuple[bool, str]:
    """The spec's question, on inputs dispatch has validated (is_supported adds the shape checks)."""
    if mode not in SUPPORTED_MODES:
        return False, f"mode {mode!r} is not one of the Triton kernel's modes {SUPPORTED_MODES}"
    if q.shape[-1] not in SUPPORTED_HEAD_DIMS:
        return False, f"head dim {q.shape[-1]} not in {SUPPORTED_HEAD_DIMS}"
    if not triton_usable(q):
        return False, f"device {q.device} has no FP8 Triton path (needs CUDA sm89+, or TRITON_INTERPRET=1 on CPU)"
    return True, ""


# Accumulation variants (see _tile, _dot), measured on the H200 with
# `scripts/bench_triton_device.py --sweep` (B1 H40 S32760, direct-p kernel; rel. L2 vs reference
# at B1 H12 S32760): neither split 31.4 ms, 9.0e-3; PV_SPLIT 32.2 ms, 7.3e-3; QK_SPLIT 33.0 ms,
# 7.2e-3; both 34.8 ms, 4.9e-3. PROMOTE (Triton's max_num_imprecise_acc) is not measured yet
# (`--promote-sweep-only`); it spills registers at 32 and 64 when compiled here for sm_90a.
PV_SPLIT = True
QK_SPLIT = False
PROMOTE = 0


def attention_prepared(prep: PreparedFP8, mode: str, scale: float, out: torch.Tensor,
                       lse: torch.Tensor | None = None, hw_cvt: bool | None = None,
                       pv_split: bool = PV_SPLIT, qk_split: bool = QK_SPLIT,
                       promote: int = PROMOTE) -> torch.Tensor:
    """Run the kernel on already-quantised operands; writes `out` (B, S_q, H, D) [and `lse`
    (B, H, S_q) float32, contiguous] and returns out. hw_cvt/pv_split/qk_split/promote:
    variants for checks and measurements; the defaults are the supported configuration."""
    if prep.v_perm is not None or prep.v_ones_rows:
        raise ValueError("prep: the Triton kernel reads the plain V^T layout; prepare without v_perm/v_ones_rows")
    write_lse = lse is not None
    B, H, sq_pad, D = prep.q8.shape
    skv_pad = prep.k8.shape[2]
    if hw_cvt is None:
        hw_cvt = prep.q8.is_cuda
    c = log2_scale(scale)  # FP32-exact, so the kernel's FP32 argument is the reference's c
    grid = (sq_pad // TILE_M, B * H)
    _attn_fwd_kernel[grid](prep.q8, prep.k8, prep.v8t, prep.q_scale, prep.k_scale, prep.v_scale,
                           prep.k_mean, out, lse if write_lse else out, c, prep.seq_q,
                           prep.seq_kv, H, sq_pad, skv_pad, *out.stride(), D=D, BLOCK_M=TILE_M, BLOCK_N=TILE_N, MODE=_MODE_ID[mode],
                           HW_CVT=hw_cvt, WRITE_LSE=write_lse,
                           ROUND_BF16=(not hw_cvt) and out.dtype == torch.bfloat16,
                           PV_SPLIT=pv_split, QK_SPLIT=qk_split, PROMOTE=promote)
    return out


def triton_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: str,
                     scale: float | None = None, *, return_lse: bool = False, fp4=None):
    """fp8 / direct-p attention on (B, S, H, D) tensors -> out (B, S_q, H, D) in q.dtype
    [, lse (B, H, S_q) float32, natural log, as `reference.attention(..., return_lse=True)`].
    fp4 (the FP4 map dispatch hands every kernel) is unused by these FP8 modes."""
    check_mode(mode)
    ok, why = is_supported(q, k, v, mode)
    if not ok:
        raise ValueError(f"triton_attention cannot run this call: {why}")
    out, lse = run(q, k, v, mode, scale, fp4, return_lse)
    return (out, lse) if return_lse else out


def run(q, k, v, mode, scale=None, fp4=None, return_lse=False):
    """The spec's run, on inputs `supports` accepted: (out in q's dtype, LSE or None)."""
    scale = default_scale(q.shape[-1]) if scale is None else float(scale)
    prep = prepare_fp8(q, k, v, backend="triton")
    check = prep.start_score_range_check(mode, scale)  # finished after the launch: see sm90/host.py
    out = torch.empty_like(q)
    lse = None
    if return_lse:
        B, Sq, H, _ = q.shape
        lse = torch.empty(B, H, Sq, dtype=torch.float32, device=q.device)
    out = attention_prepared(prep, mode, scale, out, lse)
    check.finish()
    return out, lse
