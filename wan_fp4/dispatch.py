"""Device + mode -> kernel (docs/ARCHITECTURE.md, "One attention call"), input validation and visible exact
fallbacks.

`attention()` goes through the `wan_fp4::attention` custom op so that torch.compile(fullgraph=True)
sees one opaque node. The kernel is chosen inside the op's implementation (`AUTO`), which runs
eagerly even under torch.compile: selection imports kernel modules, asks the device and logs, none
of which dynamo can trace, and none of which should become a guard. The kernel families are the
specs of `kernels/registry.py`: inputs are validated once here, and selection asks each offered
spec's `supports` before running the chosen one's `run`. `last_kernel()` names what the op ran.
"""
from __future__ import annotations

import logging
import math
import threading
from functools import lru_cache

import torch

from . import reference
from .kernels import registry
from .modes import MAX_HEAD_DIM, FP4Params, check_fp4, check_mode, default_scale

log = logging.getLogger("wan_fp4")

_FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)

_BUILTIN = ("reference", "emulation", "sdpa", "fa4")
AUTO = "auto"  # the op's kernel argument when the caller forces none: selected at run time
_warned: set[str] = set()
_ran = threading.local()  # .kernel: the name of the kernel the op last ran in this thread


def attention(q, k, v, mode="direct-p", scale=None, *, fp4: FP4Params | None = None,
              return_lse=False, kernel: str | None = None):
    """Attention of q (B,Sq,H,D) over k, v (B,Skv,H,D) in `mode`, with the fastest correct kernel.

    kernel: force a kernel by name (see `kernel_for`); an unavailable forced kernel is an error.
    return_lse: also return the natural-log log-sum-exp (B,H,Sq) float32, for ring attention.
    """
    check_mode(mode)
    validate(q, k, v)
    check_fp4(fp4)
    scale = default_scale(q.shape[-1]) if scale is None else _as_float("scale", scale)
    if not (math.isfinite(scale) and scale > 0):  # the kernels take row maxima of unscaled scores
        raise ValueError(f"scale must be a finite positive number, got {scale!r}")
    fp4 = fp4 or FP4Params()
    if kernel is not None:
        _check_kernel_name(kernel)  # whether it can run this call is checked in the op
    name = AUTO if kernel is None else kernel
    guard = math.nan if fp4.guard_margin is None else float(fp4.guard_margin)
    a, b = fp4.affine
    if return_lse:
        return torch.ops.wan_fp4.attention_lse(q, k, v, mode, name, scale, a, b, guard)
    return torch.ops.wan_fp4.attention(q, k, v, mode, name, scale, a, b, guard)


def validate(q, k, v) -> None:
    """Clear errors naming the argument for anything the kernels do not take."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-d (B, S, H, D) as in diffusers, got shape {tuple(t.shape)}")
        if t.dtype not in _FLOAT_DTYPES:
            raise TypeError(f"{name} must be bfloat16, float16 or float32, got {t.dtype}")
        if t.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in the head dimension (stride 1), "
                             f"got stride {t.stride(-1)}; call .contiguous()")
        if t.numel() == 0:
            raise ValueError(f"{name} is empty: shape {tuple(t.shape)}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if k.shape != v.shape:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have the same shape")
    if q.shape[0] != k.shape[0]:
        raise ValueError(f"batch of q ({q.shape[0]}) and k ({k.shape[0]}) differ")
    if q.shape[2] != k.shape[2]:
        raise ValueError(f"heads of q ({q.shape[2]}) and k ({k.shape[2]}) differ: the layout is "
                         "(B, S, H, D) and grouped-query attention is not supported")
    if q.shape[3] != k.shape[3]:
        raise ValueError(f"head dim of q ({q.shape[3]}) and k ({k.shape[3]}) differ")


def _as_float(name, value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None


def low_precision_head_dim_ok(head_dim: int) -> bool:
    """Low-precision modes take even head dims up to 256; others fall back to bf16 exactly."""
    return head_dim % 2 == 0 and head_dim <= MAX_HEAD_DIM


def _check_kernel_name(name) -> None:
    if name not in _BUILTIN and name not in registry.NAMES:
        raise ValueError(f"unknown kernel {name!r}; known: {', '.join(_BUILTIN)}, {', '.join(registry.NAMES)}")


def last_kernel() -> str | None:
    """The kernel the last `attention` call in this thread ran (a name `kernel_for` returns), None
    before any. Set inside the op, so it names what ran, also when torch.compile ran the op."""
    return getattr(_ran, "kernel", None)


def _capability(device) -> tuple[int, int] | None:
    """(major, minor) of a CUDA device, None for any other device: the one question selection asks
    the hardware (tests stand in a GPU here)."""
    device = torch.device(device)
    return torch.cuda.get_device_capability(device) if device.type == "cuda" else None


def kernel_for(q, mode, k=None, v=None, *, fp4: FP4Params | None = None) -> str:
    """The kernel `attention` uses for these inputs: 'sdpa', 'fa4', 'reference', 'triton',
    'sm90-cute', 'sm100-cute', 'fp4-emulation' (Triton), 'emulation' (the torch reference on the
    GPU), or 'sdpa (bf16 fallback)' for a head dim the low-precision modes do not take."""
    check_mode(mode)
    k = q if k is None else k
    v = k if v is None else v
    validate(q, k, v)
    check_fp4(fp4)
    return _choose(q, k, v, mode, fp4 or FP4Params())


def _choose(q, k, v, mode, fp4: FP4Params) -> str:
    """kernel_for on inputs already checked: the one selection of a call, run inside the op."""
    if mode == "bf16":
        return "fa4" if _fa4_usable(q) else "sdpa"
    if not low_precision_head_dim_ok(q.shape[-1]):
        _warn_once(f"head_dim {q.shape[-1]}: mode {mode!r} needs an even head dim <= {MAX_HEAD_DIM}; "
                   "falling back to exact bf16 attention")
        return "sdpa (bf16 fallback)"
    cap = _capability(q.device)
    if cap is None:
        return "reference"
    for spec in registry.specs():
        if not spec.offered(cap, mode):
            continue
        ok, why = spec.supports(q, k, v, mode, fp4)
        if ok:
            return spec.name
        _warn_once(f"{spec.name} not used for mode {mode!r}: {why}")
    # Same numerics as the kernels, in torch on the GPU: the exact emulation, slow.
    major, minor = cap
    _warn_once(f"no GPU kernel for mode {mode!r} on sm_{major}{minor}: running the exact torch emulation "
               "on the GPU (same numerics, much slower)")
    return "emulation"


def kernel_available(name, q, k, v, mode, fp4: FP4Params | None = None):
    """(ok, reason): whether the kernel `name` runs these inputs here (a forced kernel, the bench)."""
    if name in ("sdpa", "fa4") and mode != "bf16":
        # forced, they would return exact attention labelled as the low-precision mode
        return False, f"{name} computes bf16 attention only, not mode {mode!r}"
    if name in ("reference", "emulation", "sdpa"):
        return True, ""
    if name == "fa4":
        return (_fa4_usable(q), "flash-attn-4 (flash_attn.cute) is not installed or not usable here")
    _check_kernel_name(name)
    # every kernel's supports takes the FP4 map: an FP4 kernel may not take every map (the guard)
    return registry.spec(name).supports(q, k, v, mode, fp4 or FP4Params())


@lru_cache(maxsize=None)
def _fa4_import():
    try:
        from flash_attn.cute import flash_attn_func
        return flash_attn_func
    except Exception:
        return None


def fa4_head_dim_ok(d: int, major: int) -> bool:
    """Head dims flash-attn-4 (4.0.0b36) accepts for BF16/FP16: multiples of 8, 8..256 on sm90,
    8..128 or 256 on sm100 (its interface asserts otherwise; we take SDPA instead)."""
    if d % 8 or d < 8:
        return False
    return d <= 256 if major == 9 else (d <= 128 or d == 256)


def _fa4_usable(q):
    cap = _capability(q.device)
    if cap is None or _fa4_import() is None or q.dtype not in (torch.bfloat16, torch.float16):
        return False
    major = cap[0]
    return major in (9, 10) and fa4_head_dim_ok(q.shape[-1], major)


def _warn_once(message):
    if message not in _warned:
        _warned.add(message)
        log.warning("wan_fp4: %s", message)


# --------------------------------------------------------------------------- kernel execution
def _select(q, k, v, mode, kernel, fp4) -> str:
    if kernel == AUTO:
        return _choose(q, k, v, mode, fp4)
    ok, why = kernel_available(kernel, q, k, v, mode, fp4)
    if not ok:
        raise ValueError(f"kernel={kernel!r} cannot run this call: {why}")
    return kernel


def _run(q, k, v, mode, kernel, scale, a, b, guard, want_lse):
    fp4 = FP4Params(affine=(a, b), guard_margin=None if math.isnan(guard) else guard)
    kernel = _select(q, k, v, mode, kernel, fp4)
    if kernel in ("reference", "emulation"):
        result = reference.attention(q, k, v, mode, scale, fp4=fp4, return_lse=True)
    elif kernel.startswith("sdpa") or kernel == "fa4":
        if mode != "bf16":  # the bf16 fallback of a low-precision mode keeps its finite-input error
            reference.check_finite(q, k, v)
        out = _bf16_kernel(q, k, v, kernel, scale)
        result = out, (_lse_exact(q, k, scale) if want_lse else None)
    else:
        # every kernel takes the FP4 map (affine, guard); the FP8 kernels ignore it
        result = registry.spec(kernel).run(q, k, v, mode, scale, fp4, want_lse)
    _ran.kernel = kernel  # only once it ran: a failed call leaves the last success named
    return result


def _bf16_kernel(q, k, v, kernel, scale):
    if kernel == "fa4":
        out = _fa4_import()(q, k, v, softmax_scale=scale)
        return out[0] if isinstance(out, tuple) else out
    return torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=scale).transpose(1, 2)


_LSE_CHUNK_ELEMENTS = 1 << 28  # FP32 scores per chunk: 1 GiB


def _lse_exact(q, k, scale):
    """Natural-log LSE of exact scores, chunked over queries (SDPA does not return it). Chunks
    hold at most 2^28 FP32 scores (1 GiB): at Wan 14B 720p shapes a fixed 4096-row chunk would
    materialise ~25 GB."""
    b, _, h, _ = q.shape
    chunk = max(1, min(4096, _LSE_CHUNK_ELEMENTS // max(1, b * h * k.shape[1])))
    kf = k.transpose(1, 2).float()
    parts = []
    for i in range(0, q.shape[1], chunk):
        s = torch.matmul(q[:, i:i + chunk].transpose(1, 2).float(), kf.transpose(-1, -2)) * scale
        parts.append(torch.logsumexp(s, dim=-1))
    return torch.cat(parts, dim=-1)


@torch.library.custom_op("wan_fp4::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: str, kernel: str,
                  scale: float, a: float, b: float, guard: float) -> torch.Tensor:
    out, _ = _run(q, k, v, mode, kernel, scale, a, b, guard, want_lse=False)
    return out.contiguous()


@_attention_op.register_fake
def _(q, k, v, mode, kernel, scale, a, b, guard):
    return q.new_empty(q.shape)  # the real op returns a contiguous tensor, whatever q's strides


@torch.library.custom_op("wan_fp4::attention_lse", mutates_args=())
def _attention_lse_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: str, kernel: str,
                      scale: float, a: float, b: float, guard: float) -> tuple[torch.Tensor, torch.Tensor]:
    out, lse = _run(q, k, v, mode, kernel, scale, a, b, guard, want_lse=True)
    return out.contiguous(), lse.contiguous()


@_attention_lse_op.register_fake
def _(q, k, v, mode, kernel, scale, a, b, guard):
    bsz, sq, h, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((bsz, h, sq), dtype=torch.float32)


def _no_backward(ctx, *grads):
    raise NotImplementedError(
        "wan_fp4.attention is inference-only: its kernels have no backward pass, in any mode. Run it "
        "under torch.no_grad() / torch.inference_mode(); for training use the model's stock attention "
        "(wan_fp4.disable(pipe)).")


_attention_op.register_autograd(_no_backward)
_attention_lse_op.register_autograd(_no_backward)
