"""Latent drift of each attention mode against the BF16 control (DESIGN §6).

Same prompt, seed and sampler for every run; each step count is a separate run. The control is
the pipeline with diffusers' stock attention processor (exact attention); each requested mode,
bf16 included, runs through `wan_fp4.processor.enable`, so the bf16 row also checks that our
processor reproduces the stock one (cosine 1, relative L2 0 when it does).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from tqdm.auto import tqdm

from ..geometry import check_geometry
from ..modes import check_mode
from .metrics import compare, trajectory_drift

DEFAULT_PROMPT = ("A red vintage car drives along a winding coastal road at sunset, with ocean waves "
                  "below and natural camera motion.")
DEFAULT_SEED = 20260805
DEFAULT_GUIDANCE = 5.0
DEFAULT_STEPS = (1, 4, 20)
REFERENCE = "stock diffusers WanAttnProcessor (exact attention) in the pipeline's dtype"


@dataclass(frozen=True)
class DriftConfig:
    modes: tuple = ("bf16", "fp8", "direct-p", "direct-p-fp4")
    steps: tuple = DEFAULT_STEPS
    prompt: str = DEFAULT_PROMPT
    negative_prompt: str = ""
    seed: int = DEFAULT_SEED
    guidance: float = DEFAULT_GUIDANCE
    height: int = 512
    width: int = 768
    frames: int = 17
    cross_attention: bool = False  # low precision in cross-attention too (default: self only)

    def __post_init__(self):
        if not self.modes:
            raise ValueError("modes must name at least one mode")
        for mode in self.modes:
            check_mode(mode)
        if len(set(self.modes)) != len(self.modes):
            raise ValueError(f"modes has duplicates: {self.modes}")
        if not self.steps or any(not isinstance(s, int) or s < 1 for s in self.steps):
            raise ValueError(f"steps must be positive integers, got {self.steps}")
        check_geometry(self.height, self.width, self.frames)


@dataclass
class RunResult:
    steps: int
    mode: str
    cosine: float
    rel_l2: float
    max_abs: float
    seconds: float
    kernels: dict = field(default_factory=dict)      # "mode / kernel" -> attention calls
    trajectory: list = field(default_factory=list)   # per step: {"step", "cosine", "rel_l2"}


def run_drift(pipe, cfg: DriftConfig, *, progress: bool = True) -> list[RunResult]:
    """One control run and one run per mode for each step count; returns every comparison.
    Runs go through `policies.run` (a mode is the policy "this mode everywhere"), the same seeded
    run the drift report uses."""
    from .policies import mode_policy, run

    layers = pipe.transformer.config.num_layers
    results = []
    total = len(cfg.steps) * (1 + len(cfg.modes))
    pipe.set_progress_bar_config(disable=True)  # one bar over all runs instead of one per run
    with tqdm(total=total, desc="drift", unit="run", disable=not progress) as bar:
        for steps in cfg.steps:
            bar.set_postfix_str(f"steps={steps} control")
            ref = run(pipe, cfg, steps, None)
            bar.update()
            for mode in cfg.modes:
                bar.set_postfix_str(f"steps={steps} {mode}")
                out = run(pipe, cfg, steps, mode_policy(mode, layers))
                per_step = [{k: v for k, v in t.items() if k != "max_abs"}
                            for t in trajectory_drift(out.trajectory, ref.trajectory)]
                final = {k: v for k, v in compare(out.latent, ref.latent).items() if k != "finite"}
                results.append(RunResult(steps=steps, mode=mode, seconds=out.seconds, kernels=out.kernels,
                                         trajectory=per_step, **final))
                bar.update()
    return results


def results_as_dicts(results: list[RunResult]) -> list[dict]:
    return [asdict(r) for r in results]


def token_count(pipe, height: int, width: int, frames: int) -> int:
    """Self-attention sequence length of one transformer call at this geometry."""
    cfg = pipe.transformer.config
    pt, ph, pw = cfg.patch_size
    t = (frames - 1) // pipe.vae_scale_factor_temporal + 1
    h = height // pipe.vae_scale_factor_spatial
    w = width // pipe.vae_scale_factor_spatial
    return (t // pt) * (h // ph) * (w // pw)
