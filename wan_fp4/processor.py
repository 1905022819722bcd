"""WanDirectPAttnProcessor and enable()/disable() (docs/ARCHITECTURE.md, "One attention call", steps 1-3).

The processor reuses diffusers' own `WanAttnProcessor.__call__` code object — I2V split, fused or
plain projections, qk-norm across heads, interleaved RoPE, image branch — run with one name
rebound: `dispatch_attention_fn` becomes `_routed_dispatch`, which sends each attention call
either to the processor's configured diffusers backend (bf16 calls: bit-identical to the stock
processor) or to the registered `"direct_p"` backend with this call's mode. A diffusers upgrade
therefore cannot desynchronise RoPE or qk-norm from ours; `_check_wan_call` refuses a diffusers
whose processor no longer has that shape.
"""
from __future__ import annotations

import sys
import types
from collections import Counter
from dataclasses import dataclass, field

import torch
from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry
from diffusers.models.transformers import transformer_wan
from diffusers.models.transformers.transformer_wan import WanAttention, WanAttnProcessor

from . import dispatch, policy as _policy
from .backend import DIRECT_P, is_direct_p
from .modes import FP4Params, check_fp4, check_mode

_ATTR = "_wan_fp4_handle"  # set on a transformer while enable() is in force


def _check_wan_call(fn):
    code = fn.__code__
    if "dispatch_attention_fn" not in code.co_names or code.co_freevars:
        raise RuntimeError(
            "wan_fp4: diffusers' WanAttnProcessor.__call__ no longer calls the module-level "
            "dispatch_attention_fn; WanDirectPAttnProcessor supports diffusers 0.42.* only.")
    return fn


def _routed_dispatch(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                     enable_gqa=False, attention_kwargs=None, *, backend=None, parallel_config=None):
    """Stands in for diffusers' dispatch_attention_fn inside WanAttnProcessor.__call__, where
    `backend` is the `_Route` we passed as `self._attention_backend`."""
    route = backend
    user_backend = route.processor._attention_backend
    if route.mode == "bf16" and not is_direct_p(user_backend):
        out = transformer_wan.dispatch_attention_fn(
            query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, attention_kwargs,
            backend=user_backend, parallel_config=parallel_config)
        kernel = None
    else:
        kwargs = dict(attention_kwargs or {}, mode=route.mode, fp4=route.fp4)
        out = transformer_wan.dispatch_attention_fn(
            query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, kwargs,
            backend=DIRECT_P, parallel_config=parallel_config)
        kernel = "direct_p"
    if not torch.compiler.is_compiling():  # counting would make dynamo guard on every count
        route.processor._record(route.mode, kernel, user_backend, route.is_cross)
    return out


def _make_wan_call():
    """WanAttnProcessor.__call__'s own code, in a copy of its module's namespace where
    dispatch_attention_fn is _routed_dispatch. The namespace is a registered module because
    torch.compile resolves a function's globals through its module name."""
    fn = _check_wan_call(WanAttnProcessor.__call__)
    module = types.ModuleType(__name__ + "_wan_call", "transformer_wan's namespace, one name rebound")
    own = ("__name__", "__doc__", "__spec__", "__loader__", "__package__")
    module.__dict__.update({k: v for k, v in vars(transformer_wan).items() if k not in own})
    module.dispatch_attention_fn = _routed_dispatch
    sys.modules[module.__name__] = module
    return types.FunctionType(fn.__code__, module.__dict__, "_wan_call", fn.__defaults__)


_WAN_CALL = _make_wan_call()


class _Route:
    """Passed as `self` to diffusers' WanAttnProcessor.__call__, which reads only
    `self._attention_backend` (handed on to _routed_dispatch) and `self._parallel_config`."""

    def __init__(self, processor, mode, fp4, is_cross):
        self.processor, self.mode, self.fp4, self.is_cross = processor, mode, fp4, is_cross
        self._attention_backend = self
        self._parallel_config = processor._parallel_config


class WanDirectPAttnProcessor(WanAttnProcessor):
    """Wan attention with Direct-P low-precision kernels.

    mode: the self-attention mode when no policy is given (cross-attention, including the I2V
      image branch, stays bf16). "bf16" reproduces WanAttnProcessor bit for bit, through the
      diffusers backend set on this processor (`_attention_backend`, None = diffusers' active one).
    fp4: FP4Params for direct-p-fp4. layer_idx: this module's block index (policies need it).
    policy: a wan_fp4.policy.Policy deciding the mode per call (layers, steps, cross-attention);
      when given, `mode` is not used. `enable()` builds one.
    `calls` counts attention calls per (mode, kernel, "self" | "cross") in eager mode (not while
    compiled).
    """

    def __init__(self, mode: str = "direct-p", *, fp4: FP4Params | None = None, layer_idx: int | None = None,
                 policy: _policy.Policy | None = None):
        super().__init__()
        check_mode(mode)
        check_fp4(fp4)
        if layer_idx is not None and (isinstance(layer_idx, bool) or not isinstance(layer_idx, int) or layer_idx < 0):
            raise ValueError(f"layer_idx must be a non-negative int or None, got {layer_idx!r}")
        if policy is not None and not isinstance(policy, _policy.Policy):
            raise TypeError(f"policy must be a wan_fp4.policy.Policy or None, got {type(policy).__name__}")
        if policy is not None:
            _check_policy_args(policy, layer_idx, fp4)
        self.mode, self.fp4, self.layer_idx, self.policy = mode, fp4 or FP4Params(), layer_idx, policy
        # The layer's modes are decided here, once (a policy's per-layer part is fixed). A compiled
        # call then reads these values, which layers of one mode share, and never layer_idx: a
        # block compiled once for all layers (regional compilation, or frames resumed after a graph
        # break) gets one graph per distinct mode instead of one per layer.
        self._call_modes = None if policy is None else policy.call_modes(layer_idx)
        self.calls: Counter = Counter()

    def mode_for(self, is_cross: bool) -> tuple[str, FP4Params]:
        if self.policy is None:
            return ("bf16" if is_cross else self.mode), self.fp4
        return self.policy.on_this_step(self._call_modes, is_cross)

    def __call__(self, attn: WanAttention, hidden_states, encoder_hidden_states=None, attention_mask=None,
                 rotary_emb=None):
        is_cross = encoder_hidden_states is not None
        mode, fp4 = self.mode_for(is_cross)
        return _WAN_CALL(_Route(self, mode, fp4, is_cross), attn, hidden_states, encoder_hidden_states,
                         attention_mask, rotary_emb)

    def _record(self, mode, kernel, user_backend, is_cross):
        if kernel is None:
            name = user_backend or _AttentionBackendRegistry._active_backend
            kernel = "diffusers:" + AttentionBackendName(name).value
        else:  # what the op ran for this call (the last of its calls under context parallelism)
            kernel = dispatch.last_kernel()
        self.calls[(mode, kernel, "cross" if is_cross else "self")] += 1

    def __repr__(self):
        return (f"WanDirectPAttnProcessor(mode={self.mode!r}, layer_idx={self.layer_idx}, "
                f"policy={'yes' if self.policy is not None else None})")


def _check_policy_args(policy, layer_idx, fp4) -> None:
    # The policy decides per layer: a processor with no layer, or one past the policy's last,
    # would silently run the default mode, and an fp4 other than the policy's would go unused.
    per_layer = policy.bf16_layers or policy.layer_modes or policy.guard_layers
    if layer_idx is None and per_layer:
        raise ValueError("layer_idx is needed with a policy that sets per-layer modes (bf16_layers, "
                         "layer_modes or guard_layers): pass this module's block index")
    if layer_idx is not None and layer_idx >= policy.num_layers:
        raise ValueError(f"layer_idx {layer_idx} is out of range for a policy of {policy.num_layers} layers")
    if fp4 is not None and fp4 != policy.fp4:
        raise ValueError(f"fp4={fp4} differs from the policy's {policy.fp4}, which is what runs: "
                         "give it to Policy.build(fp4=...) or enable(fp4=...)")


# --------------------------------------------------------------------------- enable / disable
def _wan_transformers(obj) -> list[tuple[str, torch.nn.Module]]:
    if _is_wan_transformer(obj):
        return [("transformer", obj)]
    found = [(name, getattr(obj, name, None)) for name in ("transformer", "transformer_2")]
    found = [(n, t) for n, t in found if t is not None]
    if not found or not all(_is_wan_transformer(t) for _, t in found):
        kinds = ", ".join(f"{n}={type(t).__name__}" for n, t in found) or "no .transformer"
        raise TypeError(f"expected a Wan pipeline or a Wan transformer (blocks of WanAttention attn1/attn2), "
                        f"got {type(obj).__name__} with {kinds}")
    return found


def _is_wan_transformer(m) -> bool:
    blocks = getattr(m, "blocks", None)
    return (isinstance(m, torch.nn.Module) and isinstance(blocks, torch.nn.ModuleList) and len(blocks) > 0
            and all(isinstance(getattr(b, "attn1", None), WanAttention)
                    and isinstance(getattr(b, "attn2", None), WanAttention) for b in blocks))


@dataclass(repr=False)
class Handle:
    """What enable() did, per transformer; `disable()` undoes it."""

    pipe: object
    transformers: list = field(default_factory=list)  # [(name, transformer, policy, {module: old processor})]

    def processors(self):
        for _, transformer, _, saved in self.transformers:
            for module in saved:
                yield module.processor

    def call_counts(self, by_kind: bool = False) -> Counter:
        """Attention calls per (mode, kernel) since enable() or reset_counts(); eager calls only.
        by_kind: per (mode, kernel, "self" | "cross") instead."""
        total = Counter()
        for proc in self.processors():
            if isinstance(proc, WanDirectPAttnProcessor):
                for (mode, kernel, kind), n in proc.calls.items():
                    total[(mode, kernel, kind) if by_kind else (mode, kernel)] += n
        return total

    def reset_counts(self) -> None:
        for proc in self.processors():
            if isinstance(proc, WanDirectPAttnProcessor):
                proc.calls.clear()

    def summary(self) -> dict:
        """Per transformer: the policy, per-layer modes off bf16 steps, and call counts."""
        out = {}
        for name, _, pol, _ in self.transformers:
            layers = {}
            for i in range(pol.num_layers):
                mode, fp4 = pol.layer_mode(i)
                cross = mode if pol.cross_attention else "bf16"
                layers[i] = {"self": mode, "cross": cross,
                             "guard_margin": fp4.guard_margin if mode == "direct-p-fp4" else None}
            out[name] = {"mode": pol.mode, "bf16_steps": list(pol.bf16_steps), "layers": layers}
        out["calls"] = {f"{m} / {k}": n for (m, k), n in sorted(self.call_counts().items())}
        return out

    def __repr__(self):
        # one line: the default repr would print the whole pipeline (a notebook echoes it)
        parts = [f"{name}: {pol.mode}, {pol.num_layers} layers" for name, _, pol, _ in self.transformers]
        return f"<wan_fp4 handle {'; '.join(parts) if parts else 'disabled'}>"

    def disable(self) -> None:
        for _, transformer, _, saved in self.transformers:
            _policy.detach(transformer)
            for module, old in saved.items():
                module.set_processor(old)
            if getattr(transformer, _ATTR, None) is self:
                delattr(transformer, _ATTR)
        self.transformers = []


def enable(pipe_or_transformer, mode: str = "direct-p", *, bf16_steps=(), bf16_layers=(), layer_modes=None,
           cross_attention: bool = False, guard_layers=None, guard_margin=None, fp4: FP4Params | None = None
           ) -> Handle:
    """Run a Wan pipeline's (or transformer's) attention in `mode`, with a policy.

    bf16_steps: denoising steps run fully in bf16; negative indices count from the end
      ((0, -1) = first and last). The step comes from the pipeline's `cache_context`.
    bf16_layers / layer_modes: blocks kept in bf16 / given their own mode ({layer: mode}).
    cross_attention: also run cross-attention (text and I2V image branch) in low precision.
    guard_layers + guard_margin: blocks run direct-p-fp4 with the large-logit guard of margin M.
    fp4: FP4Params (the P-map affine) for direct-p-fp4 layers.
    Each module's processor keeps the previous one's `_attention_backend` / `_parallel_config`, so
    bf16 calls use the backend the user set. Returns a Handle; `disable(pipe)` restores exactly the
    processors that were there before.
    """
    found = _wan_transformers(pipe_or_transformer)
    pipe = None if _is_wan_transformer(pipe_or_transformer) else pipe_or_transformer
    for name, t in found:
        if getattr(t, _ATTR, None) is not None:
            raise RuntimeError(f"wan_fp4 is already enabled on {name}; call wan_fp4.disable() first")
    policies = [_policy.Policy.build(mode, len(t.blocks), bf16_steps=bf16_steps, bf16_layers=bf16_layers,
                                     layer_modes=layer_modes, cross_attention=cross_attention,
                                     guard_layers=guard_layers, guard_margin=guard_margin, fp4=fp4)
                for _, t in found]
    handle = Handle(pipe)
    for (name, transformer), pol in zip(found, policies):
        saved = {}
        for i, block in enumerate(transformer.blocks):
            for module in (block.attn1, block.attn2):
                old = module.processor
                new = WanDirectPAttnProcessor(mode, fp4=pol.fp4, layer_idx=i, policy=pol)
                new._attention_backend = getattr(old, "_attention_backend", None)
                new._parallel_config = getattr(old, "_parallel_config", None)
                saved[module] = old
                module.set_processor(new)
        _policy.attach(transformer, pol, pipe)
        setattr(transformer, _ATTR, handle)
        handle.transformers.append((name, transformer, pol, saved))
    return handle


def disable(pipe_or_transformer) -> None:
    """Undo enable(): the previous processors come back and the step hook goes away.

    Processors set by hand (`set_attn_processor(WanDirectPAttnProcessor(...))`) become diffusers'
    stock WanAttnProcessor again, keeping their attention backend and parallel config."""
    found = _wan_transformers(pipe_or_transformer)
    handles = {id(h): h for _, t in found if (h := getattr(t, _ATTR, None)) is not None}
    by_hand = [module for _, t in found if getattr(t, _ATTR, None) is None for block in t.blocks
               for module in (block.attn1, block.attn2) if isinstance(module.processor, WanDirectPAttnProcessor)]
    if not handles and not by_hand:
        raise RuntimeError("wan_fp4 is not enabled on this pipeline/transformer (no WanDirectPAttnProcessor is set)")
    for h in handles.values():
        h.disable()
    for module in by_hand:
        stock = WanAttnProcessor()
        stock._attention_backend = module.processor._attention_backend
        stock._parallel_config = module.processor._parallel_config
        module.set_processor(stock)
