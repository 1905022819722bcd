"""The short-head pre-pass: a head's K mean, V channel maxima and Q, K, V codes in ONE launch, for
self-attention of at most 1,024 tokens (docs/SM90_GEN2.md item 30).

prepare.py's pre-pass needs the statistics over all keys before any code, so it is a statistics
launch, a launch boundary and a quantise launch (25.1 us of a 63.1 us call at 1,024 tokens, H40:
BENCHMARKS.md, 2026-12-05 second run). The kernel is prepass_kernel.py.
Here a thread-block cluster holds one head: CTA i loads key block i (and query block i), adds its
column partials, and reads the other CTAs' from their shared memory after one cluster barrier, so
the statistics cost neither a second read of K and V nor a launch. Q's codes need nothing from the
cluster and are made while the other CTAs arrive. A portable cluster has 8 CTAs, hence the limit.
Q, K and V wait across the cluster barrier in registers. Measured, the launch is bound by each
warp's chain of dependent instructions, not by bytes or issue slots, so a thread holds only four
rows of 8 channels (`geometry`): 512 threads at D128 (one CTA per SM, 128 registers a thread), 256
at D64.

The outputs are prepare_fp8's in the sm90 kernel's V^T layout, byte for byte for the inputs the
score check passes (checked on the GPU by `wan-fp4 check`, probe "short-prepass"), except
`range_stats`: one row per CTA, which the check reduces (PreparedFP8.range_stats). Inputs it
refuses (a NaN or inf; finite keys whose smoothing overflows FP32) raise as on every path; the
codes and scales made from them are no contract. `operands` takes this path only where `SHORT_PREPASS`
(config.py) allows it and `short_reason` finds nothing against the inputs; everything else, and
every input it refuses, goes to prepare_fp8: the same bytes, so the fallback is exact.
"""
from __future__ import annotations

import torch

from ...modes import QK_SCALE_BLOCK
from ..prepare import RANGE_STATS
from .layout import ONES_ROWS, SIGMA, v_layout_args

MAX_BLOCKS = 8  # CTAs of a portable cluster: heads of at most 1,024 keys
MAX_TOKENS = MAX_BLOCKS * QK_SCALE_BLOCK
ROWS = 4  # rows of the block per thread: V's codes go to shared memory a word (4 keys) at a time
PIECES = 8  # 16-byte pieces of a V^T row's 128 columns of a block
GRID_Y_MAX = 65535  # CUDA's limit on gridDim.y
# the wrapper's parameters as `prepare_short` passes them: q, k, v, q8, k8, v8t, q_scale, k_scale,
# v_scale, k_mean, range_stats; q, k, v's (batch, token, head) strides in elements; b, h, s; stream
SIGNATURE = ("void*",) * 11 + ("int64_t",) * 9 + ("int32_t",) * 3 + ("stream",)


def geometry(d: int) -> tuple[int, int, int]:
    """(channel groups, row groups, rows per thread) of a CTA's 128 x d block: thread t holds
    channels 8 (t % CG) .. +8 of rows R (t // CG) .. +R."""
    return d // 8, QK_SCALE_BLOCK // ROWS, ROWS


def threads(d: int) -> int:
    """The CTA's threads at head dim d: one per 8 channels of 4 rows."""
    cg, rg, _ = geometry(d)
    return cg * rg


def v_gather() -> tuple:
    """How ShortPrepass.v_codes makes a 16-byte piece of a V^T row from the four words (16 keys, in
    key order) of its half of a 32-key group: word k of the piece is prmt(w[a], w[b], selector)
    for the k-th (a, b, selector), so that it holds keys SIGMA[16 h + 4 k .. + 3] of half h. The
    attention kernel's order pairs two words per output word, the same in both halves."""
    out = []
    for k in range(4):
        keys = [SIGMA[4 * k + i] for i in range(4)]
        a, b = sorted({key // 4 for key in keys})
        if [SIGMA[16 + 4 * k + i] - 16 for i in range(4)] != keys:
            raise AssertionError("the halves of SIGMA differ: one gather table cannot serve both")
        out.append((a, b, sum(((0 if key // 4 == a else 4) + key % 4) << (4 * i) for i, key in enumerate(keys))))
    return tuple(out)


def v_columns() -> dict:
    """A model of the kernel's V^T stores for the CPU: {column of a block: key of the block}, piece
    q (columns 16 q .. 16 q + 15) made by v_gather from keys 16 q .. 16 q + 15 as prmt does."""
    out = {}
    for q in range(PIECES):
        for k, (a, b, sel) in enumerate(v_gather()):
            for i in range(4):
                src = (sel >> (4 * i)) & 7  # byte of the pair (w[a], w[b])
                out[16 * q + 4 * k + i] = 16 * q + 4 * (a if src < 4 else b) + src % 4
    return out


def short_reason(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str:
    """Why this pre-pass cannot take (q, k, v) ("" if it can): self-attention of 1 to 1,024
    tokens, BF16, D 64 or 128, B * H within the grid, channels contiguous and every row on a
    16-byte boundary."""
    b, s, h, d = q.shape
    if k.shape != q.shape or v.shape != q.shape:
        return f"needs self-attention (q, k, v of one shape), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
    if not 1 <= s <= MAX_TOKENS:
        return f"a cluster holds at most {MAX_TOKENS} tokens per head, got {s}"
    if d not in (64, 128):
        return f"head dim 64 or 128, got {d}"
    if b * h > GRID_Y_MAX:
        return f"one cluster per (batch, head) on the grid's y axis: needs B * H <= {GRID_Y_MAX}, got {b * h}"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype != torch.bfloat16:
            return f"{name} must be bfloat16, got {t.dtype}"
        if t.stride(3) != 1 or any(x % 8 for x in t.stride()[:3]) or t.data_ptr() % 16:
            return f"{name}'s channels must be contiguous and its rows 16-byte aligned, got strides {t.stride()}"
    return ""


def _args(ptrs=None, strides=(0,) * 9, sizes=(1, 1, 128), stream=None):
    import cutlass
    from cutlass import Int32, Int64
    from cutlass.cute.runtime import make_fake_stream, make_ptr
    from cutlass.cute.typing import AddressSpace

    f8, f32, bf16 = cutlass.Float8E4M3FN, cutlass.Float32, cutlass.BFloat16
    dtypes = (bf16, bf16, bf16, f8, f8, f8, f32, f32, f32, f32, f32)
    ptrs = ptrs or (0,) * len(dtypes)
    p = [make_ptr(dt, int(a), AddressSpace.gmem, assumed_align=16) for dt, a in zip(dtypes, ptrs)]
    return (*p, *(Int64(x) for x in strides), *(Int32(x) for x in sizes),
            stream if stream is not None else make_fake_stream())


def compile_prepass(mode: str, head_dim: int, *, options: str = ""):
    """The kernel for (mode, D), compiled (cached) for sm_90a; works without a GPU. One kernel
    serves every head of 1 to MAX_BLOCKS key blocks (the cluster's size is set at launch)."""
    from .compile import ARCH, arch_options, cached

    def build():
        import cutlass.cute as cute

        from .prepass_kernel import ShortPrepass

        return cute.compile(ShortPrepass(head_dim, mode), *_args(), options=arch_options(options))

    return cached(("short pre-pass", mode, head_dim, ARCH, options), build)


def prepass_name(mode: str, head_dim: int) -> str:
    return f"wanfp4_sm90_prepass_{mode.replace('-', '')}_d{head_dim}"


def prepare_short(q, k, v, mode: str, *, prebuilt=None):
    """prepare_fp8(q, k, v, **v_layout_args(mode)) in one launch, for inputs `short_reason` accepts
    (CUDA tensors). range_stats comes as (B, H, blocks, 5), one row per CTA."""
    from ..prepare import PreparedFP8, _carve
    from .aot import PREBUILT

    b, s, h, d = q.shape
    n = -(-s // QK_SCALE_BLOCK)
    s_pad = n * QK_SCALE_BLOCK
    ones = ONES_ROWS if mode == "direct-p" else 0
    dev = q.device
    q8 = torch.empty(b, h, s_pad, d, dtype=torch.float8_e4m3fn, device=dev)
    k8 = torch.empty_like(q8)
    v8t = torch.empty(b, h, d + ones, s_pad, dtype=torch.float8_e4m3fn, device=dev)
    q_scale, k_scale, v_scale, k_mean, stats = _carve(torch.float32, dev, (b, h, n), (b, h, n), (b, h, d), (b, h, d),
                                                      (b, h, n, RANGE_STATS))
    outs = (q8, k8, v8t, q_scale, k_scale, v_scale, k_mean, stats)
    strides = tuple(x for t in (q, k, v) for x in t.stride()[:3])
    raw_stream = torch.cuda.current_stream(dev).cuda_stream
    ptrs = tuple(t.data_ptr() for t in (q, k, v, *outs))

    def jit():
        import cuda.bindings.driver as cuda

        compile_prepass(mode, d)(*_args(ptrs, strides, (b, h, s), cuda.CUstream(raw_stream)))

    PREBUILT.run_or_jit(prepass_name(mode, d), (*ptrs, *strides, b, h, s, raw_stream), dev, jit,
                        prebuilt, f" for the short pre-pass, mode={mode!r} D={d}",
                        expect=SIGNATURE)
    return PreparedFP8(q8, k8, v8t, q_scale, k_scale, v_scale, k_mean, s, s, stats, **v_layout_args(mode))


def operands(q, k, v, mode: str, *, short: bool | None = None):
    """(the sm90 kernel's operands, the kernel options that follow them): `prepare_short` and
    config.SHORT_CONFIG where `short` (None: config.SHORT_PREPASS) allows it and the inputs suit
    it, else prepare_fp8 (the same bytes) and no options."""
    from ..prepare import prepare_fp8
    from . import config

    if (config.SHORT_PREPASS if short is None else short) and not short_reason(q, k, v):
        return prepare_short(q, k, v, mode), dict(config.SHORT_CONFIG)
    return prepare_fp8(q, k, v, **v_layout_args(mode)), {}
