"""Which attention mode each Wan attention call runs (per layer, per denoising step, self vs cross
attention), and where the step index comes from.

A `Policy` belongs to one transformer. Its per-layer part is fixed at `enable()` time; its
per-step part is two booleans, `step_known` and `step_bf16`, written by `StepHook` from
diffusers' cache context *outside* any compiled region (see `_StepState.set_context`), so a
torch.compile'd transformer sees at most two variants instead of one per step.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import torch
from diffusers.hooks import HookRegistry, ModelHook
from diffusers.hooks.hooks import StateManager

from .modes import FP4Params, check_fp4, check_guard_margin, check_mode

log = logging.getLogger("wan_fp4")

HOOK_NAME = "wan_fp4_attention_policy"


def _indices(name: str, value, what: str) -> tuple:
    """A policy argument's indices as a tuple (None: none); a bare int or a string is refused by
    name, where iterating it would fail inside Python or read its characters."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a sequence of int {what} indices such as (0, -1), got {value!r}")
    return tuple(value)


def _layer_set(name: str, layers, num_layers: int) -> frozenset[int]:
    """Validate layer indices (negative ones count from the end) and normalise them."""
    out = set()
    for i in _indices(name, layers, "layer"):
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"{name} must hold int layer indices, got {i!r}")
        if not -num_layers <= i < num_layers:
            raise ValueError(f"{name}: layer {i} is out of range for a transformer with {num_layers} layers")
        out.add(i % num_layers)
    return frozenset(out)


@dataclass
class Policy:
    """mode per (layer, self/cross) and per step, for one transformer of `num_layers` blocks."""

    mode: str
    num_layers: int
    bf16_steps: tuple[int, ...] = ()
    bf16_layers: frozenset[int] = frozenset()
    layer_modes: dict[int, str] = field(default_factory=dict)
    cross_attention: bool = False
    guard_layers: frozenset[int] = frozenset()
    guard_margin: float | None = None
    fp4: FP4Params = FP4Params()
    # Written per transformer call by StepHook; read by the processors.
    step_known: bool = False
    step_bf16: bool = False
    _warned_steps: set = field(default_factory=set, repr=False, compare=False)

    @classmethod
    def build(cls, mode, num_layers, *, bf16_steps=(), bf16_layers=(), layer_modes=None, cross_attention=False,
              guard_layers=None, guard_margin=None, fp4=None) -> "Policy":
        """Validate enable()'s arguments into a Policy; every error names the argument."""
        check_mode(mode)
        check_fp4(fp4)
        fp4 = fp4 or FP4Params()
        steps = _indices("bf16_steps", bf16_steps, "step")
        for s in steps:
            if isinstance(s, bool) or not isinstance(s, int):
                raise TypeError(f"bf16_steps must hold int step indices, got {s!r}")
        bf16 = _layer_set("bf16_layers", bf16_layers, num_layers)
        if layer_modes is not None and not isinstance(layer_modes, Mapping):
            raise TypeError(f"layer_modes must be a dict {{layer: mode}} or None, got {type(layer_modes).__name__}")
        overrides = {}
        for i, m in (layer_modes or {}).items():
            (j,) = _layer_set("layer_modes", (i,), num_layers)
            try:
                check_mode(m)
            except ValueError as exc:
                raise ValueError(f"layer_modes[{i}]: {exc}") from None
            if j in overrides:
                raise ValueError(f"layer_modes names layer {j} twice (as {i} and another index)")
            overrides[j] = m
        guard = _layer_set("guard_layers", guard_layers, num_layers)
        if guard and guard_margin is None:
            raise ValueError("guard_layers needs guard_margin (the paper uses 110 for Wan2.1-1.3B, 112 for 14B)")
        if guard_margin is not None and not guard:
            raise ValueError("guard_margin is set but guard_layers is empty: name the layers to guard")
        if guard_margin is not None:
            check_guard_margin(guard_margin)
        for name, other in (("bf16_layers", bf16), ("layer_modes", set(overrides))):
            clash = sorted(guard & other)
            if clash:
                raise ValueError(f"layers {clash} are in both guard_layers and {name}")
        clash = sorted(bf16 & set(overrides))
        if clash:
            raise ValueError(f"layers {clash} are in both bf16_layers and layer_modes")
        if not isinstance(cross_attention, bool):
            raise TypeError(f"cross_attention must be True or False, got {cross_attention!r}")
        return cls(mode, num_layers, steps, bf16, overrides, cross_attention, guard,
                   None if guard_margin is None else float(guard_margin), fp4)

    def __post_init__(self):
        # one object for every guarded layer: a compiled graph then sees the same map in each
        self._guard_fp4 = FP4Params(affine=self.fp4.affine, guard_margin=self.guard_margin)

    def layer_mode(self, layer: int | None) -> tuple[str, FP4Params]:
        """The self-attention mode of `layer` (None: no layer known) on a step not forced to bf16."""
        if layer is None:
            return self.mode, self.fp4
        if layer in self.guard_layers:
            return "direct-p-fp4", self._guard_fp4
        if layer in self.bf16_layers:
            return "bf16", self.fp4
        return self.layer_modes.get(layer, self.mode), self.fp4

    def call_modes(self, layer: int | None) -> tuple[tuple[str, FP4Params], tuple[str, FP4Params]]:
        """(self-attention, cross-attention) (mode, FP4Params) of `layer` on steps not forced to bf16."""
        own = self.layer_mode(layer)
        return own, (own if self.cross_attention else ("bf16", self.fp4))

    def mode_for(self, layer: int | None, is_cross: bool) -> tuple[str, FP4Params]:
        return self.on_this_step(self.call_modes(layer), is_cross)

    def on_this_step(self, call_modes, is_cross: bool) -> tuple[str, FP4Params]:
        """A layer's `call_modes` entry for this call: bf16 on a step forced to bf16 (the step hook
        sets it before each transformer call), else the layer's own."""
        if self.step_bf16:
            return "bf16", self.fp4
        # a branch, not call_modes[is_cross]: dynamo in torch 2.11 raises on a bool tuple index
        return call_modes[1] if is_cross else call_modes[0]

    # ----------------------------------------------------------------- steps
    def set_step(self, step: int | None, num_steps: int | None) -> None:
        """Record the denoising step of the coming transformer call (None: unknown)."""
        if step is None:
            self.step_known, self.step_bf16 = False, False
            return
        wanted = set()
        for s in self.bf16_steps:
            if s < 0:
                if num_steps is None:
                    raise RuntimeError(
                        f"bf16_steps={self.bf16_steps} counts from the end, but the pipeline's cache_context "
                        "gave no num_inference_steps; pass non-negative steps or call the transformer inside "
                        "`transformer.cache_context(name, step_index=i, num_inference_steps=n)`")
                s += num_steps
            wanted.add(s)
        if num_steps is not None:
            outside = sorted(s for s in wanted if not 0 <= s < num_steps)
            if outside and num_steps not in self._warned_steps:
                self._warned_steps.add(num_steps)
                log.warning("wan_fp4: bf16_steps=%s: step(s) %s are outside this run's %d steps and "
                            "never run in BF16", self.bf16_steps, outside, num_steps)
        self.step_known, self.step_bf16 = True, step in wanted


class _StepState(StateManager):
    """diffusers calls `set_context` on every stateful hook's StateManager when a pipeline enters
    `transformer.cache_context(...)`: eagerly, before the (possibly compiled) forward."""

    def __init__(self, policy: Policy, pipe=None):
        super().__init__(dict)
        self.policy, self.pipe = policy, pipe

    def set_context(self, context) -> None:
        super().set_context(context)
        if context is None:
            self.policy.set_step(None, None)
            return
        step, num = context.step_index, context.num_inference_steps
        if step is None and self.pipe is not None:
            step, num = _step_from_pipe(self.pipe)
        self.policy.set_step(step, num)


def _step_from_pipe(pipe):
    """Step index from the pipeline's current timestep, for pipelines (e.g. WanImageToVideoPipeline
    in diffusers 0.42.1) whose cache_context carries no step_index."""
    t = getattr(pipe, "_current_timestep", None)
    timesteps = getattr(getattr(pipe, "scheduler", None), "timesteps", None)
    if t is None or timesteps is None:
        return None, None
    hits = (timesteps == torch.as_tensor(t, device=timesteps.device, dtype=timesteps.dtype)).nonzero()
    if len(hits) == 0:
        return None, None
    return int(hits[0, 0]), len(timesteps)


class StepHook(ModelHook):
    _is_stateful = True

    def __init__(self, policy: Policy, pipe=None):
        super().__init__()
        self.policy = policy
        self.state = _StepState(policy, pipe)

    def pre_forward(self, module, *args, **kwargs):
        if self.policy.bf16_steps and not self.policy.step_known:
            raise RuntimeError(
                f"wan_fp4: bf16_steps={self.policy.bf16_steps} needs the denoising step, but this transformer "
                "call came without one. Call it from a diffusers pipeline, or inside "
                "`transformer.cache_context(name, step_index=i, num_inference_steps=n)`.")
        return args, kwargs

    def reset_state(self, module):
        self.state.reset()
        self.policy.set_step(None, None)
        return module


def attach(transformer, policy: Policy, pipe=None) -> StepHook:
    hook = StepHook(policy, pipe)
    HookRegistry.check_if_exists_or_initialize(transformer).register_hook(hook, HOOK_NAME)
    return hook


def detach(transformer) -> None:
    registry = getattr(transformer, "_diffusers_hook", None)
    if registry is not None and registry.get_hook(HOOK_NAME) is not None:
        registry.remove_hook(HOOK_NAME, recurse=False)
