"""sm_90a (H100/H200) CuTe DSL attention for modes "direct-p" and "fp8" (docs/ARCHITECTURE.md, "Kernel families").

    sm90_attention(q, k, v, mode, scale=None, *, return_lse=False) -> out (B, S_q, H, D)
    is_supported(q, k, v, mode) -> (bool, reason)
    SPEC: the kernel's entry in dispatch's registry (kernels/registry.py)

q, k, v are (B, S, H, D) BF16/FP16 CUDA tensors. Quantisation is prepare.py's pre-pass, which
writes V^T straight into this kernel's layout (layout.py). The kernel is JIT-compiled once per
(mode, D, config) and cached in-process (compile.py), unless a prebuilt (AOT) kernel of that
(mode, D, config) is available (aot.py: C shim + ctypes; the package ships each mode's default).
"""
from __future__ import annotations

import importlib.util

import torch

from ..registry import KernelSpec

SUPPORTED_MODES = ("direct-p", "fp8")
SUPPORTED_HEAD_DIMS = (64, 128)
CAPABILITY = (9, 0)  # sm_90a code runs on sm_90 only
DEFAULT_CONFIG = {"n_wg": 2, "stages": 2, "overlap": True, "fold": 2}
# Per-mode changes to DEFAULT_CONFIG, chosen by measurement (BENCHMARKS.md, sm90 config sweep):
# fp8's exp2 work overlaps its own PV product (intra); direct-p's cheaper codes gain nothing from it.
MODE_CONFIG = {"fp8": {"intra": True}}


def default_config(mode: str) -> dict:
    """The kernel options `launch` uses for `mode` unless told otherwise."""
    return {**DEFAULT_CONFIG, **MODE_CONFIG.get(mode, {})}


_GRID_YZ_MAX = 65535  # CUDA's limit on gridDim.y (heads) and gridDim.z (batch)


def _dsl_available() -> bool:
    return importlib.util.find_spec("cutlass") is not None


def shape_reason(b: int, h: int, s_q: int, s_kv: int) -> str:
    """Why the kernel cannot take this problem size ("" if it can). Every offset past one row is
    64-bit (kernel.py), so size alone never falls back; the grid has one CTA per (query tile,
    head, batch element)."""
    if s_q < 1 or s_kv < 1:
        return "empty sequence"
    if h > _GRID_YZ_MAX or b > _GRID_YZ_MAX:
        return f"sm90 kernel launches one CTA per (head, batch): needs H, B <= {_GRID_YZ_MAX}, got H={h} B={b}"
    return ""


def is_supported(q, k, v, mode, fp4=None) -> tuple[bool, str]:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return False, "q, k, v must be 4-D (B, S, H, D)"
    b, s_q, h, d = q.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[2] != h or k.shape[3] != d:
        return False, f"k, v must be (B, S_kv, H, D) matching q {tuple(q.shape)}; got {tuple(k.shape)}, {tuple(v.shape)}"
    return supports(q, k, v, mode, fp4)


def supports(q, k, v, mode, fp4=None) -> tuple[bool, str]:
    """The spec's question, on inputs dispatch has validated (is_supported adds the shape checks)."""
    if mode not in SUPPORTED_MODES:
        return False, f"sm90 kernel serves modes {SUPPORTED_MODES}, not {mode!r}"
    if not (q.is_cuda and k.is_cuda and v.is_cuda):
        return False, "sm90 kernel needs CUDA tensors"
    if torch.cuda.get_device_capability(q.device) != CAPABILITY:
        return False, f"sm90 kernel needs compute capability 9.0, got {torch.cuda.get_device_capability(q.device)}"
    b, s_q, h, d = q.shape
    if d not in SUPPORTED_HEAD_DIMS:
        return False, f"sm90 kernel supports head dim {SUPPORTED_HEAD_DIMS}, got {d}"
    if q.dtype not in (torch.bfloat16, torch.float16):
        return False, f"q must be bfloat16 or float16, got {q.dtype}"
    why = shape_reason(b, h, s_q, k.shape[1])
    if why:
        return False, why
    return source_reason(mode, d)


def source_reason(mode: str, head_dim: int) -> tuple[bool, str]:
    """Whether a kernel for (mode, D) can be had: the DSL to JIT it, or a usable prebuilt object,
    whose shim is linked here on first use (a fresh machine has none linked yet)."""
    if not _dsl_available():
        from .aot import find

        if find(mode, head_dim) is None:
            return False, "nvidia-cutlass-dsl (cutlass) is not installed and no prebuilt kernel is usable"
    return True, ""


def sm90_attention(q, k, v, mode, scale=None, *, return_lse=False, fp4=None, config=None, prebuilt=None):
    # fp4: the FP4 map, which dispatch hands every kernel; unused by the FP8 modes served here
    ok, why = is_supported(q, k, v, mode)
    if not ok:
        raise ValueError(f"sm90_attention: {why}")
    out, lse = run(q, k, v, mode, scale, fp4, return_lse, config=config, prebuilt=prebuilt)
    return (out, lse) if return_lse else out


def run(q, k, v, mode, scale=None, fp4=None, return_lse=False, *, config=None, prebuilt=None):
    """The spec's run, on inputs `supports` accepted: (out in q's dtype, LSE or None)."""
    from ...modes import default_scale
    from ..prepare import prepare_fp8
    from .layout import v_layout_args

    ops = prepare_fp8(q, k, v, **v_layout_args(mode))
    ops.check_score_range(mode, default_scale(q.shape[-1]) if scale is None else float(scale))
    out, lse = launch(ops, mode, q.shape[-1], scale, config=config, prebuilt=prebuilt)
    out = out.to(q.dtype)
    if not return_lse:
        return out, None
    return out, lse + lse_shift(ops, q.shape[-1], scale)


def lse_shift(ops, head_dim, scale=None):
    """ln2 * (q8 * sq * c) . k_mean per row, (B, H, Sq): smoothing K shifted each row's scores by
    that much; the reference adds it back so LSEs of different key chunks compare (ring attention).
    The kernel's LSE leaves it out (it would need a Q . mean_k dot per row); add it here."""
    from ...modes import LN2, QK_SCALE_BLOCK, default_scale
    from ...reference import log2_scale

    c = log2_scale(default_scale(head_dim) if scale is None else float(scale))
    sq = ops.q_scale.repeat_interleave(QK_SCALE_BLOCK, dim=2)[:, :, : ops.seq_q] * c  # (B, H, Sq)
    q = ops.q8[:, :, : ops.seq_q].to(torch.float32) * sq.unsqueeze(-1)
    return LN2 * torch.matmul(q, ops.k_mean.unsqueeze(-1)).squeeze(-1)


def launch(ops, mode, head_dim, scale=None, *, config=None, out=None, lse=None, vt=None, prebuilt=None):
    """Run the kernel on prepared operands (prepare.PreparedFP8). Returns (out BF16, lse FP32).

    vt: the V^T in this kernel's layout; None = ops.v8t when the pre-pass wrote that layout
    (layout.v_layout_args), else converted here (layout.sm90_v_layout, an extra pass).
    prebuilt: None = the AOT kernel (aot.py) of this config when one is usable, else JIT;
    True = require the AOT kernel; False = always JIT."""
    from .compile import compile_kernel, runtime_args
    from ...modes import default_scale
    from ...reference import log2_scale
    from .layout import sm90_v_layout, v_layout_args

    cfg = {**default_config(mode), **(config or {})}
    b, h, _, d = ops.q8.shape
    if vt is None:
        want = v_layout_args(mode)
        if (ops.v_perm, ops.v_ones_rows) == (want["v_perm"], want["v_ones_rows"]):
            vt = ops.v8t
        else:
            vt = sm90_v_layout(ops.plain_v8t().contiguous(), mode == "direct-p")
    if out is None:
        out = torch.empty(b, ops.seq_q, h, d, dtype=torch.bfloat16, device=ops.q8.device)
    if lse is None:
        lse = torch.empty(b, h, ops.seq_q, dtype=torch.float32, device=ops.q8.device)
    tensors = (ops.q8, ops.k8, vt, out, lse, ops.q_scale, ops.k_scale, ops.v_scale)
    for t in tensors:
        if not t.is_contiguous():
            raise ValueError("sm90 kernel operands must be contiguous")
    c = log2_scale(default_scale(head_dim) if scale is None else float(scale))
    sizes = (b, h, ops.seq_q, ops.seq_kv)
    raw_stream = torch.cuda.current_stream(ops.q8.device).cuda_stream
    run = None
    if prebuilt is not False:
        from .aot import prebuilt_launcher

        run = prebuilt_launcher(mode, head_dim, cfg)
    if prebuilt and run is None:
        raise RuntimeError(f"no usable prebuilt sm90 kernel for mode={mode!r} D={head_dim} config={cfg}")
    if run is not None:
        with torch.cuda.device(ops.q8.device):
            err = run(tuple(t.data_ptr() for t in tensors), sizes, c, raw_stream)
        if err != 0:
            raise RuntimeError(f"prebuilt sm90 kernel launch failed with error {err}")
        return out, lse
    import cuda.bindings.driver as cuda

    kern = compile_kernel(mode, head_dim, **cfg)
    kern(*runtime_args(tensors, sizes, c, cuda.CUstream(raw_stream)))
    return out, lse


SPEC = KernelSpec("sm90-cute", SUPPORTED_MODES, CAPABILITY, SUPPORTED_HEAD_DIMS, supports, run, same_major=True)
