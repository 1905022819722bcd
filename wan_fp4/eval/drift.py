"""The drift report's runs: how far each attention mode and policy moves a Wan2.1 run from the control.

Same prompt, seed and sampler for every run; each step count is a separate run. The control is the
pipeline with diffusers' stock attention processor (exact attention); each requested mode, bf16
included, runs through `wan_fp4.processor.enable`, so the bf16 row also checks that our processor
reproduces the stock one (cosine 1, relative L2 0 when it does). Peers (attention kernels that are
not ours, `peers.py`; cuDNN FP8 by default where it runs) replace the same calls as the modes, on
the stock processors through the attention tap (`capture.Replace`), and get every per-mode part
below under the label "peer:<name>". Each part of the report is one function here; `build_report`
runs those the settings ask for and `report.write_drift_report` writes the result:

* final-latent cosine / relative L2 of every mode and its per-step trajectory (`run_modes`);
* decoded-frame PSNR/SSIM of the step counts in `decode_steps`;
* per-layer attention-output error of every mode on q/k/v captured from the control run
  (`capture_plan`, `capture.attention_errors`);
* the policies (BF16 first/last steps, guard layers) with their drift and modelled speed (`run_policies`,
  `speed_rows`);
* prompt accuracy per mode (`prompt_accuracy`): only meaningful on the model trained on the
  procedural world, so it is opt-in except for that model.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

from ..geometry import check_geometry
from ..modes import MODES, check_mode
from . import metrics as M
from .policies import DEFAULT_POLICIES, POLICIES
from .stacks import StackUnavailable  # noqa: F401  (what check_stacks raises)

DEFAULT_PROMPT = ("A red vintage car drives along a winding coastal road at sunset, with ocean waves "
                  "below and natural camera motion.")
DEFAULT_SEED = 20260805
DEFAULT_GUIDANCE = 5.0
DEFAULT_STEPS = (1, 4, 20)
DEFAULT_ACCURACY_SEEDS = (0, 1)
REFERENCE = "stock diffusers WanAttnProcessor (exact attention) in the pipeline's dtype"
ACCURACY_NOTE = ("Prompt accuracy reads colour, shape and direction of the main object back from the decoded "
                 "frames. It is only meaningful on the embedded trained model (trained on the procedural "
                 "world whose prompts these are); on a random-weight model it is noise.")
CAPTURE_STEP_WORDS = ("first", "last")
DEFAULT_PEERS = ("cudnn-fp8",)  # run where available, skipped with the reason elsewhere
PEER_PREFIX = "peer:"  # a peer's label in every row, table and plot


@dataclass(frozen=True)
class DriftConfig:
    """Every setting of a drift report: what all runs share and which parts to run.

    capture_steps: 0-based denoising steps of the control run with the most steps (or "first",
    "last"), () for no capture; capture_layers: None picks all that fit capture_gib, guard layers
    first. decode_steps: None decodes the largest step count. policy_steps: None uses the largest
    step count. time_repeats 0 skips timing. accuracy_prompts: None is the whole world.prompt_set().
    peers: names from peers.py, each required to run here (`select_peers`); None: DEFAULT_PEERS
    where they run."""

    modes: tuple = MODES
    steps: tuple = DEFAULT_STEPS
    prompt: str = DEFAULT_PROMPT
    negative_prompt: str = ""
    seed: int = DEFAULT_SEED
    guidance: float = DEFAULT_GUIDANCE
    height: int = 512
    width: int = 768
    frames: int = 17
    cross_attention: bool = False  # low precision in cross-attention too (default: self only)
    policies: tuple = DEFAULT_POLICIES
    policy_steps: int | None = None
    time_repeats: int = 2
    capture_steps: tuple = CAPTURE_STEP_WORDS
    capture_layers: tuple | None = None
    capture_kinds: tuple = ("self",)
    capture_gib: float = 4.0
    capture_rows: int = 1024
    decode_steps: tuple | None = None
    accuracy: bool = False
    accuracy_prompts: int | None = None
    accuracy_seeds: tuple = DEFAULT_ACCURACY_SEEDS
    peers: tuple | None = None
    stacks: tuple = ()

    def __post_init__(self):
        from .capture import KINDS
        from .peers import PEER_LABELS, TIMING_ONLY

        if not self.modes:
            raise ValueError("modes must name at least one mode")
        for mode in self.modes:
            check_mode(mode)
        if len(set(self.modes)) != len(self.modes):
            raise ValueError(f"modes has duplicates: {self.modes}")
        if not self.steps or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in self.steps):
            raise ValueError(f"steps must be positive integers, got {self.steps}")
        if len(set(self.steps)) != len(self.steps):
            raise ValueError(f"steps has duplicates: {self.steps}")
        check_geometry(self.height, self.width, self.frames)
        unknown = [p for p in self.policies if p not in POLICIES]
        if unknown:
            raise ValueError(f"policies: unknown {unknown}; known: {', '.join(POLICIES)}")
        if self.policy_steps is not None and self.policy_steps < 1:
            raise ValueError(f"policy_steps must be positive, got {self.policy_steps}")
        if self.time_repeats < 0:
            raise ValueError(f"time_repeats must be >= 0, got {self.time_repeats}")
        n = max(self.steps)
        for s in self.capture_steps:
            if s not in CAPTURE_STEP_WORDS and (isinstance(s, bool) or not isinstance(s, int) or not -n <= s < n):
                raise ValueError(f"capture_steps: {s!r} is neither first, last nor a step of a {n}-step run")
        if not self.capture_kinds or any(k not in KINDS for k in self.capture_kinds):
            raise ValueError(f"capture_kinds must be drawn from {', '.join(KINDS)}, got {self.capture_kinds}")
        if self.capture_rows < 1 or not self.capture_gib > 0:
            raise ValueError(f"capture_rows and capture_gib must be positive, got {self.capture_rows}, "
                             f"{self.capture_gib}")
        if self.decode_steps is not None and not set(self.decode_steps) <= set(self.steps):
            raise ValueError(f"decode_steps {sorted(self.decode_steps)} must be among steps {sorted(self.steps)}")
        if self.accuracy_prompts is not None and self.accuracy_prompts < 1:
            raise ValueError(f"accuracy_prompts must be positive, got {self.accuracy_prompts}")
        if not self.accuracy_seeds:
            raise ValueError("accuracy_seeds must name at least one seed")
        if self.peers is not None:
            usable = [n for n in PEER_LABELS if n not in TIMING_ONLY]
            unknown = [n for n in self.peers if n not in usable]
            if unknown:
                raise ValueError(f"peers: unknown {unknown}; known: {', '.join(usable)}")
            if len(set(self.peers)) != len(self.peers):
                raise ValueError(f"peers has duplicates: {self.peers}")
        unknown = [n for n in self.stacks if n not in stack_variants()]
        if unknown:
            raise ValueError(f"stacks: unknown {unknown}; known: {', '.join(stack_variants())}")
        if len(set(self.stacks)) != len(self.stacks):
            raise ValueError(f"stacks has duplicates: {self.stacks}")

    @property
    def max_steps(self) -> int:
        return max(self.steps)

    @property
    def policy_step_count(self) -> int:
        return self.policy_steps or self.max_steps

    @property
    def decode(self) -> set:
        return {self.max_steps} if self.decode_steps is None else set(self.decode_steps)

    def capture_step_indices(self) -> list[int]:
        n = self.max_steps
        return sorted({(0 if s == "first" else n - 1) if s in CAPTURE_STEP_WORDS else s % n
                       for s in self.capture_steps})


def stack_variants() -> dict:
    """The latency tool's stack variants ({name: Variant}), which a drift report can run as arms."""
    from .variants import VARIANTS

    return {name: v for name, v in VARIANTS.items() if v.kind == "stack"}


def check_stacks(names, device) -> None:
    """Raise stacks.StackUnavailable naming what `device` lacks for any of the stacks `names`."""
    from .stacks import check_available

    for linears in {stack_variants()[n].linears for n in names}:
        check_available(linears, device)


class PeerUnavailable(ValueError):
    """A peer asked for by name that cannot run here; the message says why."""


def select_peers(names, device) -> tuple[dict, dict]:
    """({name: fn} to run, {name: reason} skipped). names None: DEFAULT_PEERS, each that cannot run
    on `device` skipped with the reason; names given: one that cannot run raises PeerUnavailable."""
    from .peers import available_peers

    wanted = DEFAULT_PEERS if names is None else tuple(names)
    found, missing = available_peers(wanted, device) if wanted else ({}, {})
    if names is not None and missing:
        raise PeerUnavailable("; ".join(f"{n} cannot run here: {why}" for n, why in missing.items()))
    return found, missing


@dataclass(frozen=True)
class Arm:
    """One variant measured against the control: a mode (policy: wan_fp4.enable over every layer
    and step), a peer (peer: a function replacing the calls through the attention tap) or a stack
    (linears swapped in, with a mode's policy or stock attention)."""

    label: str
    policy: object = None
    peer: Callable | None = None
    linears: str | None = None  # a stack's linears, swapped in for the arm's runs

    def weights(self, transformer):
        """Context for the arm's runs: the stack's linears in place of the transformer's, or nothing."""
        import contextlib

        from .stacks import Linears

        return contextlib.nullcontext() if self.linears is None else Linears(transformer, self.linears)

    def handlers(self, cross_attention: bool) -> list:
        """Fresh tap handlers for one run: the peer on self-attention, cross too when asked, as the
        modes do; none for a mode."""
        from .capture import KINDS, Replace

        if self.peer is None:
            return []
        return [Replace(self.peer, kinds=KINDS if cross_attention else ("self",), name=self.label)]


def arms(cfg: DriftConfig, num_layers: int, peers: dict) -> list[Arm]:
    """The modes of `cfg`, then the peers ({name: fn}) as "peer:<name>", then the stacks."""
    from . import policies as P

    stacks = [stack_variants()[n] for n in cfg.stacks]
    return ([Arm(m, policy=P.mode_policy(m, num_layers)) for m in cfg.modes]
            + [Arm(PEER_PREFIX + n, peer=fn) for n, fn in peers.items()]
            + [Arm(v.name, policy=v.mode and P.mode_policy(v.mode, num_layers), linears=v.linears) for v in stacks])


def tokens(pipe, cfg: DriftConfig) -> int:
    """Self-attention sequence length of one transformer call at the report's geometry."""
    from .forward_inputs import Geometry

    return Geometry(cfg.height, cfg.width, cfg.frames, t_factor=pipe.vae_scale_factor_temporal,
                    s_factor=pipe.vae_scale_factor_spatial).tokens(pipe.transformer)


class PlanError(ValueError):
    """A setting that only the loaded model can refute (a layer it does not have, a budget too small)."""


def capture_plan(pipe, cfg: DriftConfig) -> tuple[list[int], list[int]] | None:
    """(steps, layers) to capture in the control run with the most steps; None for no capture."""
    from . import capture as C
    from .policies import guard_for

    if not cfg.capture_steps:
        return None
    steps = cfg.capture_step_indices()
    layers_total = pipe.transformer.config.num_layers
    if cfg.capture_layers is None:
        per = C.capture_bytes(pipe.transformer, tokens(pipe, cfg), kinds=cfg.capture_kinds)
        try:
            layers = C.plan_layers(layers_total, per, len(steps), int(cfg.capture_gib * 2**30),
                                   must=guard_for(layers_total)[0])
        except ValueError as exc:
            raise PlanError(f"capture_gib: {exc}") from None
    else:
        layers = sorted(set(cfg.capture_layers))
        if any(not 0 <= i < layers_total for i in layers):
            raise PlanError(f"capture_layers must be in 0..{layers_total - 1}, got {list(cfg.capture_layers)}")
    return steps, layers


def failed_row(*, exc, **fields) -> dict:
    """A run that raised (e.g. direct-p-fp4 overflowing without its guard): NaN metrics, the error."""
    print(f"run {fields} failed: {type(exc).__name__}: {exc}", flush=True)
    return {**fields, "cosine": math.nan, "rel_l2": math.nan, "max_abs": math.nan, "finite": False,
            "kernels": {}, "trajectory": [], "error": f"{type(exc).__name__}: {exc}"}


RUN_ERRORS = (FloatingPointError, RuntimeError, ValueError)


def run_modes(pipe, cfg: DriftConfig, bar, plan=None, peers=None):
    """One control run and one run per mode and peer ({name: fn}) for each step count. Returns
    (runs, frames, controls, capture): `controls` by step count, `capture` the Capture of the largest
    control run (or None)."""
    from . import capture as C
    from . import policies as P

    measured = arms(cfg, pipe.transformer.config.num_layers, peers or {})
    runs, frames, controls, cap = [], [], {}, None
    for steps in cfg.steps:
        decode = steps in cfg.decode
        bar.set_postfix_str(f"{steps} steps, control")
        handlers = []
        if plan is not None and steps == cfg.max_steps:
            cap = C.Capture(frozenset(plan[1]), frozenset(plan[0]), tuple(cfg.capture_kinds),
                            int(cfg.capture_gib * 2**30))
            handlers = [cap]
        ctrl = controls[steps] = P.run(pipe, cfg, steps, None, decode=decode, tap_handlers=handlers)
        bar.update(steps)
        for arm in measured:
            mode = arm.label
            bar.set_postfix_str(f"{steps} steps, {mode}")
            try:
                with arm.weights(pipe.transformer):
                    r = P.run(pipe, cfg, steps, arm.policy, decode=decode,
                              tap_handlers=arm.handlers(cfg.cross_attention))
            except RUN_ERRORS as exc:
                runs.append(failed_row(steps=steps, mode=mode, exc=exc))
                bar.update(steps)
                continue
            row = {"steps": steps, "mode": mode, **M.compare(r.latent, ctrl.latent), "seconds": r.seconds,
                   "kernels": r.kernels, "trajectory": M.trajectory_drift(r.trajectory, ctrl.trajectory)}
            if decode:
                fm = M.frame_metrics(r.frames, ctrl.frames)
                row["frames"] = fm
                frames.append({"steps": steps, "mode": mode, **fm})
            runs.append(row)
            bar.update(steps)
    return runs, frames, controls, cap


def _jsonable(kw):
    return {k: (list(v) if isinstance(v, (tuple, frozenset, set)) else v) for k, v in kw.items()}


def run_policies(pipe, cfg: DriftConfig, policies, controls: dict, bar) -> list[dict]:
    """Each policy's final-latent drift at policy_step_count steps (a control run is added when no
    mode run had that step count)."""
    from . import policies as P

    n = cfg.policy_step_count
    if n not in controls:
        bar.set_postfix_str(f"{n} steps, control")
        controls[n] = P.run(pipe, cfg, n, None)
        bar.update(n)
    ctrl, rows = controls[n], []
    for pol in policies:
        bar.set_postfix_str(f"policy {pol.name}")
        try:
            r = P.run(pipe, cfg, n, pol)
        except RUN_ERRORS as exc:
            rows.append(failed_row(policy=pol.name, description=pol.description, mode=pol.mode, steps=n, exc=exc))
        else:
            rows.append({"policy": pol.name, "description": pol.description, "mode": pol.mode, "steps": n,
                         "enable": _jsonable(pol.enable_kwargs()), **M.compare(r.latent, ctrl.latent),
                         "kernels": r.kernels, "trajectory": M.trajectory_drift(r.trajectory, ctrl.trajectory)})
        bar.update(n)
    return rows


def speed_rows(pipe, cfg: DriftConfig, device, policies) -> dict:
    """Per-forward time at the report's geometry: stock BF16, and each policy's non-BF16-step forward."""
    from .forward_inputs import Geometry, make_inputs
    from .forward_time import time_variant
    from .timing import Timer
    from .variants import BASELINE, VARIANTS, Variant

    timer = Timer(device)
    geom = Geometry(cfg.height, cfg.width, cfg.frames, t_factor=pipe.vae_scale_factor_temporal,
                    s_factor=pipe.vae_scale_factor_spatial)
    t = pipe.transformer
    inputs = make_inputs(t, geom, device)
    base = time_variant(t, VARIANTS[BASELINE], inputs, geom=geom, timer=timer, warmup=1, repeats=cfg.time_repeats)
    base_ms = base["forward_ms"]["median"]
    out = {"timing": timer.method, "stock_forward_ms": base_ms, "stock_attention_share": base["attention"]["share"],
           "policies": {}}
    n = cfg.policy_step_count
    for pol in policies:
        v = Variant(pol.name, pol.description, "policy", mode=pol.mode)
        try:
            r = time_variant(t, v, inputs, geom=geom, timer=timer, warmup=1, repeats=cfg.time_repeats,
                               cross_attention=cfg.cross_attention, policy_kwargs=pol.layer_kwargs())
        except RUN_ERRORS as exc:
            out["policies"][pol.name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        ms = r["forward_ms"]["median"]
        run = pol.run_ms(n, base_ms, ms)
        out["policies"][pol.name] = {"forward_ms": ms, "run_ms": run, "speedup_vs_stock": 2 * n * base_ms / run}
    return out


def accuracy_prompts(count: int | None = None) -> list[str]:
    """`count` prompts spread evenly over world.prompt_set() (all of it for None)."""
    from ..pipelines import world

    prompts = world.prompt_set()
    if count is None or count >= len(prompts):
        return prompts
    return [prompts[i * len(prompts) // count] for i in range(count)]


def prompt_accuracy(pipe, cfg: DriftConfig, progress: bool = True, peers=None, pace_s: float | None = None) -> dict:
    """Per mode and peer ({name: fn}): generate every prompt x seed with it, read each video back
    and score colour, shape, direction and all three (`adherence.accuracy`). pace_s: seconds per
    denoising step of one video measured so far, for an estimate said before the videos start."""
    from tqdm.auto import tqdm

    from . import policies as P
    from .adherence import accuracy, generate_and_read

    prompts = accuracy_prompts(cfg.accuracy_prompts)
    out = {"note": ACCURACY_NOTE, "prompts": len(prompts), "seeds": list(cfg.accuracy_seeds),
           "steps": cfg.max_steps, "modes": {}, "videos": {}, "frames_vs_bf16": {}}
    # bf16 first: its videos (8-bit, as a saved video would hold them) are the control that every
    # other arm's same prompt and seed is compared with
    measured = sorted(arms(cfg, pipe.transformer.config.num_layers, peers or {}), key=lambda a: a.label != "bf16")
    control = {}
    total = len(prompts) * len(cfg.accuracy_seeds) * len(measured)
    if progress and pace_s:  # its bar shows an ETA only after a first batch of videos, minutes in
        print(f"prompt accuracy: {total} videos of {cfg.max_steps} steps; at the drift runs' pace here "
              f"({pace_s:.2g} s a step) about {_duration(total * cfg.max_steps * pace_s)} "
              "(less where batching helps, as on a GPU)", flush=True)
    with tqdm(total=total, desc="prompt accuracy", unit="video", disable=not progress) as bar:
        for arm in measured:
            bar.set_postfix_str(arm.label)
            done = [0]

            def advance(n, _total):
                bar.update(n - done[0])
                done[0] = n

            def against_control(row, video, label=arm.label):
                key, frames8 = (row["prompt"], row["seed"]), _eight_bit(video)
                if label == "bf16":
                    control[key] = frames8
                elif key in control:
                    row["psnr_vs_bf16"] = M.psnr(frames8 / 255.0, control[key] / 255.0)["mean"]

            try:
                with arm.weights(pipe.transformer), \
                        P.applied(pipe, arm.policy, cfg.cross_attention, arm.handlers(cfg.cross_attention)):
                    rows = generate_and_read(pipe, prompts, cfg.accuracy_seeds, height=cfg.height,
                                             width=cfg.width, frames=cfg.frames, steps=cfg.max_steps,
                                             guidance=cfg.guidance, progress=advance, on_video=against_control)
            except RUN_ERRORS as exc:  # as in the runs: NaN and the error, the other rows still come
                print(f"prompt accuracy of {arm.label} failed: {type(exc).__name__}: {exc}", flush=True)
                bar.update(len(prompts) * len(cfg.accuracy_seeds) - done[0])
                out["modes"][arm.label] = {**dict.fromkeys(("colour", "shape", "direction", "all"), math.nan),
                                           "error": f"{type(exc).__name__}: {exc}"}
                out["videos"][arm.label] = []
                continue
            out["modes"][arm.label] = accuracy(rows)
            out["videos"][arm.label] = rows
            spread = psnr_spread([r["psnr_vs_bf16"] for r in rows if "psnr_vs_bf16" in r])
            if spread is not None:
                out["frames_vs_bf16"][arm.label] = spread
    return out


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _eight_bit(video):
    import numpy as np

    return np.round(np.clip(np.asarray(video, dtype=np.float64), 0.0, 1.0) * 255.0).astype(np.uint8)


def psnr_spread(values: list[float]) -> dict | None:
    """Median and quartiles of per-video PSNRs (identical videos count as +inf); None for none."""
    import numpy as np

    if not values:
        return None
    v = np.asarray(values, dtype=np.float64)
    # "nearest": order statistics, since interpolating between two identical videos (inf) gives NaN
    q25, q50, q75 = np.percentile(v, [25, 50, 75], method="nearest")
    return {"videos": len(values), "median_db": float(q50), "p25_db": float(q25), "p75_db": float(q75),
            "min_db": float(v.min()), "identical": int(np.isinf(v).sum())}


def drift_work(cfg: DriftConfig, n_arms: int, n_policies: int) -> tuple[int, int]:
    """(runs, denoising steps) of the drift runs: control and arms per step count, then the policies
    (with a control of their own when no step count matches)."""
    extra = 1 if n_policies and cfg.policy_step_count not in cfg.steps else 0
    runs = len(cfg.steps) * (1 + n_arms) + n_policies + extra
    return runs, sum(cfg.steps) * (1 + n_arms) + (n_policies + extra) * cfg.policy_step_count


def describe_plan(cfg: DriftConfig, labels: list[str], policies: list[str], capture=None) -> str:
    """What a drift report will run, said before it starts: a run of many minutes should not be a
    surprise (labels: the arms; capture: capture_plan's (steps, layers) or None)."""
    runs, steps = drift_work(cfg, len(labels), len(policies))
    lines = [f"drift plan: the control and {len(labels)} arm(s) ({', '.join(labels)}) at "
             f"{', '.join(map(str, cfg.steps))} step(s)"
             + (f", then {len(policies)} policies at {cfg.policy_step_count} steps" if policies else "")
             + f": {runs} runs, {steps} denoising steps in all"]
    if capture is not None:
        lines.append(f"  per-layer attention error on q/k/v captured at steps {capture[0]} of layers {capture[1]}")
    if cfg.time_repeats and (policies or any(m != "bf16" for m in cfg.modes)):
        lines.append(f"  timing of the modes and policies ({cfg.time_repeats} repeats of a forward)")
    if cfg.accuracy:
        n_prompts, n_seeds = len(accuracy_prompts(cfg.accuracy_prompts)), len(cfg.accuracy_seeds)
        lines.append(f"  prompt accuracy: {n_prompts * n_seeds * len(labels)} videos of {cfg.max_steps} steps "
                     f"({len(labels)} arms x {n_prompts} prompts x {n_seeds} seeds), usually the longest part")
    return "\n".join(lines)


def build_report(pipe, cfg: DriftConfig, *, info, device, dtype: str, command: str,
                 progress: bool = True, peers: tuple[dict, dict] | None = None) -> dict:
    """Every part `cfg` asks for, as one JSON-ready dict (NaN where a run failed). peers: what
    `select_peers(cfg.peers, device)` returned, when the caller has it already."""
    from tqdm.auto import tqdm

    from . import capture as C
    from . import policies as P
    from . import report as R
    from .peers import PEER_LABELS

    started = time.perf_counter()
    peer_fns, peers_skipped = select_peers(cfg.peers, device) if peers is None else peers
    labels = {PEER_PREFIX + n: fn for n, fn in peer_fns.items()}
    pipe.set_progress_bar_config(disable=True)  # one bar over all runs instead of one per run
    num_layers = pipe.transformer.config.num_layers
    plan = capture_plan(pipe, cfg)
    policies = P.resolve(cfg.policies, num_layers)
    arm_labels = [a.label for a in arms(cfg, num_layers, peer_fns)]
    if progress:
        print(describe_plan(cfg, arm_labels, [p.name for p in policies], plan), flush=True)
    # counted in denoising steps, not runs: a 20-step run takes 20 times a 1-step one, and the ETA
    # of a bar over runs was off by that much
    work = drift_work(cfg, len(arm_labels), len(policies))[1]
    with tqdm(total=work, desc="drift", unit="step", disable=not progress) as bar:
        runs, frames, controls, cap = run_modes(pipe, cfg, bar, plan, peer_fns)
        policy_rows = run_policies(pipe, cfg, policies, controls, bar) if policies else []
    pace = (time.perf_counter() - started) / work  # seconds per denoising step of one video
    controls.clear()

    layer_errors, capture_info = [], {"enabled": cap is not None}
    if cap is not None:
        capture_info.update(steps=plan[0], layers=plan[1], kinds=list(cfg.capture_kinds), rows=cfg.capture_rows,
                            captured=len(cap.records), bytes=cap.nbytes, skipped=cap.skipped,
                            budget_gib=cfg.capture_gib)
        layer_errors = C.attention_errors(cap.records, list(cfg.modes), device=device, rows=cfg.capture_rows,
                                          peers=labels, progress=progress)
        cap.records.clear()

    speed, mode_speed = None, []
    timed_policies = [P.mode_policy(m, num_layers) for m in cfg.modes if m != "bf16"] + policies
    if cfg.time_repeats and timed_policies:
        if progress:
            print("timing modes and policies at this geometry ...", flush=True)
        speed = speed_rows(pipe, cfg, device, timed_policies)
        for row in policy_rows:
            row.update(speed["policies"].get(row["policy"], {}))
        for m in cfg.modes:  # the modes as policies, for the speed-vs-drift table
            if m == "bf16":
                continue
            d = next((r for r in runs if r["mode"] == m and r["steps"] == cfg.max_steps), None)
            mode_speed.append({"policy": f"mode:{m}", "steps": cfg.max_steps,
                               "rel_l2": d["rel_l2"] if d else None, "cosine": d["cosine"] if d else None,
                               **speed["policies"].get(f"mode:{m}", {})})

    acc = prompt_accuracy(pipe, cfg, progress, peer_fns, pace_s=pace) if cfg.accuracy else None

    return {
        "schema": "wan-fp4/drift/2", "smoke_test": info.synthetic,
        "label": R.SMOKE_LABEL.format(model=info.name) if info.synthetic else "",
        "model": {"name": info.name, "description": info.description, "synthetic": info.synthetic,
                  "layers": num_layers, "heads": pipe.transformer.config.num_attention_heads},
        "reference": REFERENCE,
        "settings": {"prompt": cfg.prompt, "negative_prompt": cfg.negative_prompt, "seed": cfg.seed,
                     "guidance": cfg.guidance, "height": cfg.height, "width": cfg.width, "frames": cfg.frames,
                     "tokens": tokens(pipe, cfg), "steps": list(cfg.steps), "modes": list(cfg.modes),
                     "dtype": dtype, "cross_attention": cfg.cross_attention,
                     "sampler": type(pipe.scheduler).__name__, "policy_steps": cfg.policy_step_count,
                     "decode_steps": sorted(cfg.decode)},
        "peers": {"run": {PEER_PREFIX + n: PEER_LABELS[n] for n in peer_fns}, "skipped": peers_skipped,
                  "kinds": ["self", "cross"] if cfg.cross_attention else ["self"]},
        "runs": runs, "frames": frames, "layer_errors": layer_errors, "capture": capture_info,
        "policies": policy_rows, "mode_speed": mode_speed, "speed": speed, "accuracy": acc,
        "command": command, "environment": R.environment(device), "created": R.timestamp(),
        "seconds": time.perf_counter() - started, "timings_meaningful": R.timings_meaningful(device),
    }
