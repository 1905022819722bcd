"""The attention policies offered to a user, and how each is run and priced.

A policy is a mode plus what stays BF16: steps (first/last), and for direct-p-fp4 the guard layers
of the paper. Each is measured for drift (final latent vs the BF16 control, same prompt/seed) and
for speed, so a report can show a speed-vs-drift table a user picks from.

Speed of a policy over an N-step run is modelled from measured forwards, not guessed: steps kept
in BF16 cost a stock BF16 forward (`base_ms`); the others cost a forward with the policy's layer
part applied (`policy_ms`, measured with the same warm-up and CUDA events as every mode); two
forwards per step (CFG). `run_ms` does that sum.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import torch

from ..modes import check_mode

# The paper's guard layers and margins for the real models (docs/NUMERICS.md, direct-p-fp4);
# other depths: the last two.
GUARD_LAYERS = {30: ((27, 28, 29), 110.0), 40: ((33, 34, 38, 39), 112.0)}
GENERIC_GUARD_MARGIN = 110.0


@dataclass(frozen=True)
class PolicySpec:
    name: str
    description: str
    mode: str
    bf16_steps: tuple = ()
    guard: bool = False


POLICIES = {p.name: p for p in (
    PolicySpec("direct-p", "direct-p in every self-attention, every step", "direct-p"),
    PolicySpec("direct-p+bf16-first-last", "direct-p; first and last step in BF16", "direct-p", (0, -1)),
    PolicySpec("direct-p+bf16-first2-last2", "direct-p; first 2 and last 2 steps in BF16", "direct-p",
               (0, 1, -2, -1)),
    PolicySpec("fp8", "fp8 (exp-based FP8 control) everywhere", "fp8"),
    PolicySpec("direct-p-fp4", "direct-p-fp4, shiftless map, no guard", "direct-p-fp4"),
    PolicySpec("direct-p-fp4+guard", "direct-p-fp4 with the large-logit guard on the paper's layers",
               "direct-p-fp4", guard=True),
    PolicySpec("direct-p-fp4+guard+bf16-first-last",
               "direct-p-fp4 with guard layers; first and last step in BF16", "direct-p-fp4", (0, -1), True),
)}
# The plain modes are measured as modes already; these are the policies a report adds.
DEFAULT_POLICIES = ("direct-p+bf16-first-last", "direct-p+bf16-first2-last2",
                    "direct-p-fp4+guard", "direct-p-fp4+guard+bf16-first-last")


def guard_for(num_layers: int) -> tuple[tuple[int, ...], float]:
    """Guard layers and margin M for a transformer of `num_layers` blocks."""
    if num_layers in GUARD_LAYERS:
        return GUARD_LAYERS[num_layers]
    return tuple(range(max(0, num_layers - 2), num_layers)), GENERIC_GUARD_MARGIN


@dataclass(frozen=True)
class BoundPolicy:
    """A PolicySpec for a transformer of `num_layers` blocks."""

    spec: PolicySpec
    num_layers: int
    guard_layers: tuple = ()
    guard_margin: float | None = None

    @property
    def name(self):
        return self.spec.name

    @property
    def mode(self):
        return self.spec.mode

    @property
    def description(self):
        d = self.spec.description
        if self.guard_layers:
            d += f" (guard layers {list(self.guard_layers)}, M={self.guard_margin:g})"
        return d

    def enable_kwargs(self) -> dict:
        """Keyword arguments of `wan_fp4.enable` for this policy."""
        kw = {"mode": self.mode, "bf16_steps": tuple(self.spec.bf16_steps)}
        if self.guard_layers:
            kw.update(guard_layers=self.guard_layers, guard_margin=self.guard_margin)
        return kw

    def layer_kwargs(self) -> dict:
        """The per-layer part only (what a non-BF16 step runs), for timing one forward."""
        kw = self.enable_kwargs()
        kw.pop("bf16_steps")
        return kw

    def bf16_step_count(self, steps: int) -> int:
        """How many of `steps` denoising steps run fully in BF16."""
        if steps < 1:
            raise ValueError(f"steps must be positive, got {steps}")
        return len({s % steps for s in self.spec.bf16_steps if -steps <= s < steps})

    def run_ms(self, steps: int, base_ms: float, policy_ms: float, forwards_per_step: int = 2) -> float:
        """Modelled transformer time of a `steps`-step run (CFG: 2 forwards per step)."""
        n16 = self.bf16_step_count(steps)
        return forwards_per_step * (n16 * base_ms + (steps - n16) * policy_ms)


def resolve(names, num_layers: int) -> list[BoundPolicy]:
    """Policies by name, bound to a transformer depth; an unknown name is an error naming it."""
    out = []
    for name in names:
        if name not in POLICIES:
            raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}")
        spec = POLICIES[name]
        check_mode(spec.mode)
        if spec.guard:
            layers, margin = guard_for(num_layers)
            out.append(BoundPolicy(spec, num_layers, tuple(layers), margin))
        else:
            out.append(BoundPolicy(spec, num_layers))
    return out


def mode_policy(mode: str, num_layers: int) -> BoundPolicy:
    """A plain mode as a policy (every layer and step), so modes and policies run one way."""
    check_mode(mode)
    return BoundPolicy(PolicySpec(f"mode:{mode}", f"{mode} in every self-attention, every step", mode), num_layers)


# --------------------------------------------------------------------------- running
@dataclass
class RunOutput:
    latent: torch.Tensor            # final latent, float64 CPU
    trajectory: list                # latent after each step, float64 CPU
    frames: object = None           # decoded (F, H, W, 3) in [0, 1] when asked, else None
    seconds: float = 0.0
    kernels: dict = field(default_factory=dict)


@contextlib.contextmanager
def applied(pipe, policy: BoundPolicy | None, cross_attention: bool = False, tap_handlers=()):
    """Run `pipe` under `policy` (None: stock diffusers processors, the control), with
    `tap_handlers` on its attention calls (capture.AttentionTap: capturing them, or a peer kernel
    replacing them); yields wan_fp4.enable's handle, or None. A tap that saw no call raises."""
    from .capture import AttentionTap

    handle = None
    if policy is not None:
        from .. import processor

        handle = processor.enable(pipe, cross_attention=cross_attention, **policy.enable_kwargs())
    try:
        if not tap_handlers:
            yield handle
            return
        with AttentionTap(pipe, list(tap_handlers)) as tap:
            yield handle
        tap.check_seen()
    finally:
        if handle is not None:
            handle.disable()


def run(pipe, cfg, steps: int, policy: BoundPolicy | None, *, decode: bool = False,
        tap_handlers=()) -> RunOutput:
    """One seeded pipeline run with the prompt, seed, guidance, geometry and cross_attention of `cfg`
    (a `drift.DriftConfig`); latents after every step via callback_on_step_end. With decode the
    pipeline also decodes (output_type="np"); the final latent is then the last step's latent,
    which is what output_type="latent" would have returned."""
    from .capture import Replace

    trajectory = []

    def keep(_pipe, _i, _t, kwargs):
        trajectory.append(kwargs["latents"].detach().to("cpu", torch.float64, copy=True))
        return {}

    with applied(pipe, policy, cfg.cross_attention, tap_handlers) as handle:
        t0 = time.perf_counter()
        out = pipe(prompt=cfg.prompt, negative_prompt=cfg.negative_prompt, height=cfg.height, width=cfg.width,
                   num_frames=cfg.frames, num_inference_steps=steps, guidance_scale=cfg.guidance,
                   generator=torch.Generator("cpu").manual_seed(cfg.seed),
                   output_type="np" if decode else "latent", callback_on_step_end=keep,
                   callback_on_step_end_tensor_inputs=["latents"])
        seconds = time.perf_counter() - t0
        kernels = {} if handle is None else {f"{m} / {k}": n for (m, k), n in sorted(handle.call_counts().items())}
    for h in tap_handlers:  # a peer's calls, counted by the handler that ran them
        if isinstance(h, Replace):
            kernels.update(h.kernels())
    if decode:
        frames, latent = out.frames[0], trajectory[-1]
    else:
        frames, latent = None, out.frames.detach().to("cpu", torch.float64)
    return RunOutput(latent, trajectory, frames, seconds, kernels)
