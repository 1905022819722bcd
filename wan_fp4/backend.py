"""The `"direct_p"` diffusers attention backend (docs/ARCHITECTURE.md, "One attention call", step 4).

Importing this module adds `AttentionBackendName.DIRECT_P` ("direct_p") to diffusers' closed enum
and registers `_direct_p_attention` in its private `_AttentionBackendRegistry` (pyproject pins
diffusers to 0.42.*; `_check_diffusers_internals` fails loudly if those internals moved). Then
`model.set_attention_backend("direct_p")` and `with diffusers.attention_backend("direct_p"):` send
any diffusers model's attention through `wan_fp4.dispatch.attention`.

Which mode the backend runs:
  * a caller may pass `attention_kwargs={"mode": ..., "fp4": FP4Params(...)}` to
    `dispatch_attention_fn` (WanDirectPAttnProcessor does, per call);
  * otherwise the process-wide backend default: "direct-p", changed with `set_backend_mode(...)`
    or, scoped, `with backend_mode(...)`. It is process-wide like diffusers' own active backend
    (and read at trace time by torch.compile, which recompiles when it changes).

Context parallelism: the backend declares `supports_context_parallel=True` and hands diffusers'
templated machinery a forward op that returns the LSE in diffusers' (B, S, H) layout, so every
`ContextParallelConfig(ulysses_degree=U, ring_degree=R)` runs: Ulysses (R = 1), ring (U = 1) and
the hybrid (diffusers' unified attention: a Ulysses all-to-all inside groups of U ranks, then ring
attention across the R groups on the local heads). The op is inference-only (its backward raises).

diffusers' `ModelMixin.set_attention_backend` also sets the *global* active backend, which then
leaks into every other model (VAE, text encoder, other pipelines) and survives
`reset_attention_backend()`: a later "stock" run would silently keep using direct-p. So for
`"direct_p"` this module makes `model.set_attention_backend` per-model (the processors only, the
global stays), and `model.reset_attention_backend()` then leaves nothing behind. Other backends
keep diffusers' behaviour; `set_attention_backend(model, backend)` below is the per-model form
for any backend.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import diffusers
import torch
from diffusers.models import ModelMixin
from diffusers.models import attention_dispatch as _ad

from . import dispatch
from .modes import FP4Params, check_fp4, check_mode

BACKEND_NAME = "direct_p"
_MEMBER_NAME = "DIRECT_P"

_REQUIRED = {
    "AttentionBackendName": ("_member_map_", "_value2member_map_", "_member_names_"),
    "_AttentionBackendRegistry": ("register", "_backends", "_supported_arg_names",
                                  "_supports_context_parallel", "_active_backend", "set_active_backend"),
    "_templated_context_parallel_attention": (),
    "dispatch_attention_fn": (),
}


def _check_diffusers_internals() -> None:
    missing = [] if callable(getattr(ModelMixin, "set_attention_backend", None)) else [
        "ModelMixin.set_attention_backend"]
    for name, attrs in _REQUIRED.items():
        obj = getattr(_ad, name, None)
        if obj is None:
            missing.append(name)
            continue
        missing += [f"{name}.{a}" for a in attrs if not hasattr(obj, a)]
    if missing:
        raise RuntimeError(
            f"wan_fp4 cannot register the {BACKEND_NAME!r} attention backend: diffusers "
            f"{diffusers.__version__} lacks the private internals it hooks into ({', '.join(missing)}). "
            "wan-fp4 supports diffusers 0.42.*; install that, or use WanDirectPAttnProcessor's "
            "processor path only after updating wan_fp4/backend.py.")


def _inject_enum_member():
    """Add DIRECT_P to the closed AttentionBackendName enum (idempotent)."""
    enum_cls = _ad.AttentionBackendName
    existing = enum_cls._value2member_map_.get(BACKEND_NAME)
    if existing is not None:
        return existing
    member = str.__new__(enum_cls, BACKEND_NAME)
    member._name_, member._value_ = _MEMBER_NAME, BACKEND_NAME
    setattr(enum_cls, _MEMBER_NAME, member)
    enum_cls._member_map_[_MEMBER_NAME] = member
    enum_cls._member_names_.append(_MEMBER_NAME)
    enum_cls._value2member_map_[BACKEND_NAME] = member
    return member


# --------------------------------------------------------------------------- default mode
@dataclass(frozen=True)
class _Defaults:
    mode: str = "direct-p"
    fp4: FP4Params = FP4Params()


_defaults = _Defaults()


def set_backend_mode(mode: str, fp4: FP4Params | None = None) -> tuple[str, FP4Params]:
    """Set the mode the `"direct_p"` backend runs when a call does not name one.

    Process-wide (like diffusers' active backend). Returns the previous (mode, fp4)."""
    global _defaults
    check_mode(mode)
    check_fp4(fp4)
    previous = (_defaults.mode, _defaults.fp4)
    _defaults = _Defaults(mode, fp4 or FP4Params())
    return previous


def get_backend_mode() -> tuple[str, FP4Params]:
    return _defaults.mode, _defaults.fp4


@contextlib.contextmanager
def backend_mode(mode: str, fp4: FP4Params | None = None):
    """`with backend_mode("fp8"): ...` runs the `"direct_p"` backend's un-named calls in `mode`."""
    previous = set_backend_mode(mode, fp4)
    try:
        yield
    finally:
        set_backend_mode(*previous)


# --------------------------------------------------------------------------- the backend
def _refuse_unsupported(attn_mask, dropout_p, is_causal, enable_gqa) -> None:
    # Saying no beats silently computing something else: none of these reach our kernels.
    if attn_mask is not None:
        raise ValueError(f"the {BACKEND_NAME!r} attention backend does not take attn_mask "
                         f"(got a {tuple(attn_mask.shape)} mask); use another backend for masked attention")
    if dropout_p:
        raise ValueError(f"the {BACKEND_NAME!r} attention backend is inference-only: dropout_p must be 0, "
                         f"got {dropout_p}")
    if is_causal:
        raise ValueError(f"the {BACKEND_NAME!r} attention backend does not support is_causal=True")
    if enable_gqa:
        raise ValueError(f"the {BACKEND_NAME!r} attention backend does not support enable_gqa=True: "
                         "q, k and v must have the same number of heads")


def _resolve_mode(mode, fp4):
    """The call's (mode, fp4), the backend's defaults where it names none; dispatch.attention
    checks the mode, with the inputs."""
    if mode is None:
        mode, default_fp4 = _defaults.mode, _defaults.fp4
        fp4 = default_fp4 if fp4 is None else fp4
    return mode, fp4


def _run(query, key, value, scale, return_lse, mode, fp4):
    out = dispatch.attention(query, key, value, mode=mode, scale=scale, fp4=fp4, return_lse=return_lse)
    if not return_lse:
        return out
    out, lse = out
    return out, lse.transpose(1, 2).contiguous()  # dispatch gives (B, H, S); diffusers wants (B, S, H)


def _cp_forward_op(ctx, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                   enable_gqa=False, return_lse=False, _save_ctx=True, _parallel_config=None, *, mode, fp4):
    """forward_op for diffusers' templated attention: runs on the local heads (Ulysses), one KV
    chunk (ring, which asks for return_lse=True and merges chunks by LSE), or one KV chunk of the
    local heads (hybrid)."""
    _refuse_unsupported(attn_mask, dropout_p, is_causal, enable_gqa)
    return _run(query, key, value, scale, return_lse, mode, fp4)


def _cp_backward_op(ctx, grad_out, *args, **kwargs):
    raise NotImplementedError(f"the {BACKEND_NAME!r} attention backend is inference-only: "
                              "no backward pass under context parallelism")


def _direct_p_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0, is_causal: bool = False,
                        scale: float | None = None, enable_gqa: bool = False, return_lse: bool = False,
                        _parallel_config=None, mode: str | None = None, fp4: FP4Params | None = None):
    _refuse_unsupported(attn_mask, dropout_p, is_causal, enable_gqa)
    mode, fp4 = _resolve_mode(mode, fp4)
    if _parallel_config is None:
        return _run(query, key, value, scale, return_lse, mode, fp4)
    return _ad._templated_context_parallel_attention(
        query, key, value, None, 0.0, False, scale, False, return_lse,
        forward_op=functools.partial(_cp_forward_op, mode=mode, fp4=fp4),
        backward_op=_cp_backward_op, _parallel_config=_parallel_config)


_check_diffusers_internals()
DIRECT_P = _inject_enum_member()
if DIRECT_P not in _ad._AttentionBackendRegistry._backends:
    _ad._AttentionBackendRegistry.register(DIRECT_P, constraints=[], supports_context_parallel=True)(
        _direct_p_attention)


def _per_model_for_direct_p(diffusers_set):
    """ModelMixin.set_attention_backend, except that "direct_p" goes to the model's processors
    only and leaves diffusers' process-wide active backend as it was."""

    @functools.wraps(diffusers_set)
    def set_attention_backend(self, backend):
        if not (isinstance(backend, str) and backend.lower() == BACKEND_NAME):
            return diffusers_set(self, backend)
        registry = _ad._AttentionBackendRegistry
        previous = registry._active_backend
        try:
            return diffusers_set(self, backend)
        finally:
            registry.set_active_backend(previous)

    set_attention_backend._wan_fp4_wraps = diffusers_set
    return set_attention_backend


if not hasattr(ModelMixin.set_attention_backend, "_wan_fp4_wraps"):  # once, even if reloaded
    ModelMixin.set_attention_backend = _per_model_for_direct_p(ModelMixin.set_attention_backend)


# --------------------------------------------------------------------------- helpers
def is_direct_p(backend) -> bool:
    """Whether a processor's `_attention_backend` (None = diffusers' active backend) is ours."""
    if backend is None:
        backend = _ad._AttentionBackendRegistry._active_backend
    return backend == BACKEND_NAME  # str-valued enum: compares by value


def set_attention_backend(model, backend: str = BACKEND_NAME) -> None:
    """`model.set_attention_backend(backend)` without diffusers' side effect of also changing the
    process-wide active backend (which would reroute the VAE, text encoder and other models), for
    any backend ("direct_p" is per-model already)."""
    registry = _ad._AttentionBackendRegistry
    previous = registry._active_backend
    try:
        model.set_attention_backend(backend)
    finally:
        registry.set_active_backend(previous)
