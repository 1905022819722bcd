"""Latency of a Wan2.1 transformer forward per attention mode and control, at real shapes.

What is measured, per variant (`VARIANTS`), in one run so the speed-ups share a baseline:
  * one transformer forward (batch 1, the real latent/text shapes), CUDA events after warm-up;
    median over `repeats`. A denoising step is two forwards (CFG: cond + uncond);
  * one more, instrumented forward: every attention call timed with CUDA events through
    `capture.AttentionTap` (self- and cross-attention separately), giving the per-call times and
    the attention share of a forward;
  * speed-up against `bf16-sdpa`, stock diffusers (WanAttnProcessor, diffusers' default "native"
    backend = torch SDPA, which picks cuDNN on Hopper);
  * optionally (`--pipeline-steps N`) the wall time of a whole `pipe(...)` call per variant;
  * with `--compile`, every variant that torch.compile can trace timed compiled as well
    (`eval.compiled`: mode, whole forward or regional), with the graphs, graph breaks and dynamo
    warnings of its compile, and speed-ups against stock compiled as well as stock eager;
  * each variant's forward output against stock eager (cosine, relative L2): what its speed costs.
Opt-in stacks (`eval.stacks`): float8 linears (torchao), with and without direct-p attention.
Before a variant's forwards, one attention call on a slice of the queries (full keys) estimates
its forward; a variant that would not finish inside `--budget-s` is skipped and says why (the
direct-p-fp4 *emulation* on Hopper is orders of magnitude slower than a kernel at 75,600 tokens).

On a CPU it runs the same code with wall-clock timing (`time.perf_counter`): for tests and smoke
runs only, never a figure to quote.

The parts by job: `variants` (what is timed and how it is applied), `timing` (CUDA events or wall
clock), `forward_inputs` (shapes and inputs at a geometry), `forward_time` (the budget probe, one
variant's forwards, whole pipeline calls); this module runs them all (`measure`), prints the table
and is the command line.

Entry points: `main(argv)` (`scripts/bench_e2e.py` and `wan-fp4 bench e2e ARGS`), and
`measure(...)` for use from Python.
"""
from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import time
from dataclasses import dataclass, field

import torch

from .compiled import COMPILE_MODES, SCOPES
# The parts live by job in their own modules; they are re-exported here, where callers and the
# docstring above name them.
from .forward_inputs import Geometry, make_inputs  # noqa: F401
from .forward_time import PROBE_QUERIES, _probe_ms, time_pipeline, time_variant  # noqa: F401
from .timing import CallTimer, Timer  # noqa: F401
from .variants import (ALIASES, BASELINE, DEFAULT_VARIANTS, VARIANTS, Applied, Skip, Variant,  # noqa: F401
                       check_variants, resolve_peers, unavailable_stacks)


# --------------------------------------------------------------------------- the run
@dataclass
class Settings:
    model: str = "random:14b"
    height: int = 720
    width: int = 1280
    frames: int = 81
    variants: tuple = DEFAULT_VARIANTS
    policies: tuple = ()
    warmup: int = 1
    repeats: int = 3
    budget_s: float = 420.0
    pipeline_steps: int = 0
    schedule_steps: int = 50
    guidance: float = 5.0
    cross_attention: bool = False
    compile_mode: str | None = None  # None: eager only; else one of compiled.COMPILE_MODES
    compile_scope: str = "full"
    device: str | None = None
    dtype: str = "bfloat16"
    progress: bool = True
    extra: dict = field(default_factory=dict)

    def compile_settings(self):
        from .compiled import CompileSettings

        return None if self.compile_mode is None else CompileSettings(self.compile_mode, self.compile_scope)


def measure(pipe, settings: Settings, *, device) -> dict:
    """Run the latency measurement on a loaded pipeline; returns the JSON-ready result."""
    from . import metrics
    from . import policies as P

    device = torch.device(device)
    timer = Timer(device)
    transformer = pipe.transformer
    geom = Geometry(settings.height, settings.width, settings.frames,
                    t_factor=pipe.vae_scale_factor_temporal, s_factor=pipe.vae_scale_factor_spatial)
    tokens = geom.tokens(transformer)
    inputs = make_inputs(transformer, geom, device)
    names = list(check_variants(settings.variants))
    if BASELINE not in names:
        names.insert(0, BASELINE)  # speed-ups need the baseline measured in the same run
    policy_specs = P.resolve(settings.policies, transformer.config.num_layers)
    peers, missing = resolve_peers(names, device)
    missing.update(unavailable_stacks(names, device))
    compile_settings = settings.compile_settings()
    started = time.perf_counter()
    results, skipped = {}, dict(missing)
    order = [n for n in names if n not in skipped]
    jobs = [(n, VARIANTS[n], None) for n in order]
    jobs += [(f"policy:{p.name}", Variant(f"policy:{p.name}", p.description, "policy", mode=p.mode), p)
             for p in policy_specs]
    per_job = settings.warmup + settings.repeats + 1
    if compile_settings is not None:
        per_job += settings.repeats
    compile_s = 0.0  # the last compiled variant's first call: the estimate for the next one
    outputs = {}
    from tqdm.auto import tqdm

    with tqdm(total=per_job * len(jobs), desc="latency", unit="fwd", disable=not settings.progress) as bar:
        for name, variant, spec in jobs:
            bar.set_postfix_str(name)
            left = settings.budget_s - (time.perf_counter() - started)
            try:
                est_attn = _probe_ms(transformer, variant, geom, device, timer, peers, settings.cross_attention)
                base = results.get(BASELINE)
                rest = 0.0
                if base is not None:
                    rest = max(0.0, base["forward_ms"]["median"] - base["attention"]["total_ms"])
                est_s = (est_attn + rest) * per_job / 1e3
                if compile_settings is not None and variant.compilable:
                    est_s += compile_s
                if name != BASELINE and est_s > left:
                    raise Skip(f"estimated {est_s:.0f} s for {per_job} forwards (attention probe "
                               f"{est_attn / 1e3:.2f} s per forward) exceeds the {left:.0f} s left of "
                               f"--budget-s {settings.budget_s:.0f}")
                kwargs = spec.layer_kwargs() if spec is not None else None
                r = time_variant(transformer, variant, inputs, geom=geom, timer=timer, warmup=settings.warmup,
                                 repeats=settings.repeats, cross_attention=settings.cross_attention,
                                 policy_kwargs=kwargs, peers=peers, progress=bar,
                                 compile_settings=compile_settings)
                r["probe_attention_ms_per_forward"] = est_attn
                outputs[name] = r.pop("outputs")
                compile_s = r.get("compiled", {}).get("first_call_s", compile_s)
                results[name] = r
            except Skip as exc:
                skipped[name] = str(exc)
                bar.update(per_job)
            except Exception as exc:  # one failing variant must not lose the others' numbers
                if name == BASELINE:
                    raise
                skipped[name] = f"failed: {type(exc).__name__}: {exc}"
                bar.update(per_job)
            if timer.cuda:
                torch.cuda.empty_cache()
    base_ms = results[BASELINE]["forward_ms"]["median"] if BASELINE in results else math.nan
    base_compiled_ms = results.get(BASELINE, {}).get("compiled", {}).get("forward_ms", {}).get("median", math.nan)
    reference = outputs.get(BASELINE, {}).get("eager")
    for name, r in results.items():
        r["speedup_vs_stock"] = base_ms / r["forward_ms"]["median"]
        c = r.get("compiled", {})
        if "forward_ms" in c:
            c["speedup_vs_stock"] = base_ms / c["forward_ms"]["median"]
            c["speedup_vs_stock_compiled"] = base_compiled_ms / c["forward_ms"]["median"]
        if reference is not None:  # the forward output against stock eager: what the speed costs
            r["drift_vs_stock"] = {how: {k: v for k, v in metrics.compare(out, reference).items() if k != "finite"}
                                   for how, out in outputs.get(name, {}).items()}
    policy_rows = []
    for spec in policy_specs:
        r = results.get(f"policy:{spec.name}")
        if r is None or BASELINE not in results:
            continue
        run_ms = spec.run_ms(settings.schedule_steps, base_ms, r["forward_ms"]["median"])
        policy_rows.append({"policy": spec.name, "description": spec.description,
                            "schedule_steps": settings.schedule_steps, "run_s_cfg": run_ms / 1e3,
                            "speedup_vs_stock": settings.schedule_steps * 2 * base_ms / run_ms})
    pipeline = {}
    if settings.pipeline_steps > 0:
        pipeline = _pipeline_times(pipe, settings, geom, timer, peers, results, policy_specs)
    return {"tokens": tokens, "geometry": {"height": geom.height, "width": geom.width, "frames": geom.frames,
                                           "latent_shape": list(inputs["hidden_states"].shape),
                                           "text_tokens": geom.text_tokens},
            "timing": timer.method, "baseline": BASELINE,
            "compile": None if compile_settings is None else {"mode": compile_settings.mode,
                                                              "scope": compile_settings.scope},
            "variants": results, "skipped": skipped,
            "policies": policy_rows, "pipeline": pipeline, "seconds": time.perf_counter() - started}


def _pipeline_times(pipe, settings, geom, timer, peers, results, policy_specs):
    if not hasattr(pipe, "vae") or pipe.vae is None:
        return {"skipped": "the model has no VAE/text encoder"}
    compile_settings = settings.compile_settings()
    out = {"steps": settings.pipeline_steps, "scaled_to_steps": settings.schedule_steps,
           "guidance": settings.guidance, "runs": {}, "compiled_runs": {}}
    names = [n for n in results if not n.startswith("policy:")]
    common = dict(geom=geom, guidance=settings.guidance, timer=timer, cross_attention=settings.cross_attention,
                  peers=peers, scale_to=settings.schedule_steps)
    # VAE and text encoder warm-up, once
    time_pipeline(pipe, VARIANTS[BASELINE], geom=geom, steps=1, guidance=settings.guidance, timer=timer)
    for name in names:
        for how, cs in (("runs", None), ("compiled_runs", compile_settings)):
            if how == "compiled_runs" and (cs is None or not VARIANTS[name].compilable):
                continue
            try:
                out[how][name] = time_pipeline(pipe, VARIANTS[name], steps=settings.pipeline_steps,
                                               compile_settings=cs, **common)
            except Exception as exc:  # one failing run must not lose the others' numbers
                out[how][name] = {"failed": f"{type(exc).__name__}: {exc}"}
    return out


# --------------------------------------------------------------------------- output
def table(result: dict) -> str:
    """The short table printed last."""
    w = max([28] + [len(n) + 1 for n in result["variants"]])
    lines = [f"{'variant':<{w}} {'fwd ms':>10} {'step ms (CFG)':>14} {'speed-up':>9} {'attn share':>10} "
             f"{'self ms/call':>13} {'cross ms/call':>14}"]
    for name, r in result["variants"].items():
        pk = r["attention"]["per_kind"]
        lines.append(f"{name:<{w}} {r['forward_ms']['median']:>10.2f} {r['step_ms_cfg']:>14.2f} "
                     f"{r['speedup_vs_stock']:>8.3f}x {100 * r['attention']['share']:>9.1f}% "
                     f"{pk.get('self', {}).get('median_ms', math.nan):>13.3f} "
                     f"{pk.get('cross', {}).get('median_ms', math.nan):>14.3f}")
    for name, why in result["skipped"].items():
        lines.append(f"{name:<{w}} skipped: {why}")
    if result.get("compile"):
        lines += compiled_table(result, w)
    for p in result["policies"]:
        lines.append(f"policy {p['policy']:<{w - 7}} {p['schedule_steps']}-step run {p['run_s_cfg']:.1f} s, "
                     f"{p['speedup_vs_stock']:.3f}x vs stock")
    pipeline = result.get("pipeline", {})
    for how in ("runs", "compiled_runs"):
        for name, r in pipeline.get(how, {}).items():
            if "failed" in r:
                lines.append(f"pipeline {name:<{w - 9}} failed: {r['failed']}")
                continue
            scaled = (f"; scaled to {r['scaled_to_steps']} steps {r['scaled_seconds']:.2f} s"
                      if "scaled_seconds" in r else "")
            lines.append(f"pipeline {name + (' compiled' if how == 'compiled_runs' else ''):<{w - 9}} "
                         f"{r['seconds']:.2f} s for {r['steps']} steps (text {r['text_encoding_s']:.2f} s, "
                         f"denoise {r['denoise_s']:.2f} s, VAE decode {r['vae_decode_s']:.2f} s, "
                         f"to numpy {r['postprocess_s']:.2f} s){scaled}")
    return "\n".join(lines)


def compiled_table(result: dict, w: int) -> list[str]:
    """Eager and compiled forwards side by side, both speed-ups, dynamo's counts and the drift."""
    c = result["compile"]
    lines = ["", f"torch.compile mode={c['mode']} scope={c['scope']}; speed-ups vs stock {BASELINE} eager and "
                 "compiled; drift: relative L2 of the forward output vs stock eager",
             f"{'variant':<{w}} {'eager ms':>10} {'compiled ms':>12} {'1st call s':>10} {'vs eager':>9} "
             f"{'vs compiled':>11} {'graphs':>6} {'breaks':>6} {'drift eager':>11} {'drift comp.':>11}"]
    for name, r in result["variants"].items():
        comp = r.get("compiled", {})
        drift = r.get("drift_vs_stock", {})
        if "forward_ms" not in comp:
            lines.append(f"{name:<{w}} {r['forward_ms']['median']:>10.2f} compiled: {comp.get('skipped', '-')}")
            continue
        d = comp["dynamo"]
        lines.append(f"{name:<{w}} {r['forward_ms']['median']:>10.2f} {comp['forward_ms']['median']:>12.2f} "
                     f"{comp['first_call_s']:>10.1f} {comp['speedup_vs_stock']:>8.3f}x "
                     f"{comp['speedup_vs_stock_compiled']:>10.3f}x {d['graphs']:>6} {d['graph_breaks']:>6} "
                     f"{drift.get('eager', {}).get('rel_l2', math.nan):>11.2e} "
                     f"{drift.get('compiled', {}).get('rel_l2', math.nan):>11.2e}")
        for warning in d["warnings"]:
            lines.append(f"{'':<{w}} dynamo warning: {warning}")
    return lines


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="wan-fp4 bench e2e", description=(
        "Per-forward latency of a Wan2.1 transformer for each attention mode and control at real shapes, "
        "with CUDA events after warm-up; per-call attention times; speed-up vs stock diffusers BF16."))
    p.add_argument("--model", default="random:14b",
                   help="random:1.3b | random:14b (real architecture, random weights) | tiny (the embedded trained "
                        "model) | tiny-random | PATH to a local diffusers Wan2.1 pipeline (default random:14b)")
    p.add_argument("--height", type=int, default=720, help="pixels, multiple of 16 (default 720)")
    p.add_argument("--width", type=int, default=1280, help="pixels, multiple of 16 (default 1280)")
    p.add_argument("--frames", type=int, default=81, help="frames, 4k+1 (default 81)")
    p.add_argument("--modes", default=",".join(DEFAULT_VARIANTS),
                   help=f"comma-separated variants (default {','.join(DEFAULT_VARIANTS)}; also: "
                        f"{', '.join(n for n in VARIANTS if n not in DEFAULT_VARIANTS)}); bf16-sdpa, the "
                        "baseline, is always measured")
    p.add_argument("--policies", default="",
                   help="comma-separated policies to time (see wan_fp4.eval.policies; 'all' for every one)")
    p.add_argument("--steps", "--schedule-steps", dest="schedule_steps", type=int, default=50,
                   help="denoising steps of the run that policy speed-ups are modelled for, and that "
                        "--pipeline-steps runs are scaled to (default 50)")
    p.add_argument("--warmup", type=int, default=1, help="untimed forwards per variant (default 1)")
    p.add_argument("--repeats", type=int, default=3, help="timed forwards per variant (default 3)")
    p.add_argument("--budget-s", type=float, default=420.0,
                   help="seconds for all variants: one whose estimated time exceeds what is left is skipped "
                        "(default 420, so a run with model build fits a 9-minute job)")
    p.add_argument("--pipeline-steps", type=int, default=0,
                   help="also time a whole pipe(...) call with this many steps per variant, with its breakdown "
                        "(text encoding, denoising, VAE decode), scaled to --steps; eager and, with --compile, "
                        "compiled (default 0: off)")
    p.add_argument("--guidance", type=float, default=5.0, help="CFG scale for --pipeline-steps (default 5.0)")
    p.add_argument("--compile", action="store_true",
                   help="also time every variant torch.compile can trace compiled (stock compiled is then the "
                        "baseline users compare with; both speed-ups are shown)")
    p.add_argument("--compile-mode", default="default", choices=COMPILE_MODES,
                   help="torch.compile mode for --compile (default: default; reduce-overhead uses CUDA graphs)")
    p.add_argument("--compile-scope", default="full", choices=SCOPES,
                   help="full: torch.compile of the whole forward; blocks: diffusers' regional compilation "
                        "(compile_repeated_blocks), much shorter compiles (default full)")
    p.add_argument("--cross-attention", action="store_true",
                   help="run cross-attention in the low-precision mode too (default: self-attention only)")
    p.add_argument("--device", help="torch device (default cuda if available, else cpu)")
    p.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    p.add_argument("--json", required=True, help="where to write every number (JSON)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _positive(parser, name, value, minimum=1):
    if value < minimum:
        parser.error(f"--{name} must be >= {minimum}, got {value}")


def main(argv=None) -> int:
    from ..pipelines import ModelError, load_pipeline, model_info
    from . import report as R

    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    _positive(parser, "repeats", args.repeats)
    _positive(parser, "warmup", args.warmup, 0)
    _positive(parser, "pipeline-steps", args.pipeline_steps, 0)
    _positive(parser, "steps", args.schedule_steps)
    for name in ("height", "width"):
        value = getattr(args, name)
        if value < 16 or value % 16:
            parser.error(f"--{name} must be a positive multiple of 16, got {value}")
    if args.frames < 1 or (args.frames - 1) % 4:
        parser.error(f"--frames must be 4k+1 (1, 5, 9, ...), got {args.frames}")
    try:
        variants = check_variants(t.strip() for t in args.modes.split(",") if t.strip())
    except ValueError as exc:
        parser.error(str(exc))
    from . import policies as P

    policy_names = tuple(t.strip() for t in args.policies.split(",") if t.strip())
    if policy_names == ("all",):
        policy_names = tuple(P.POLICIES)
    try:
        P.resolve(policy_names, 40)
    except ValueError as exc:
        parser.error(f"--policies: {exc}")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {device}: CUDA is not available")
    try:
        info = model_info(args.model)
    except ModelError as exc:
        parser.error(f"--model: {exc}")
    if device.type != "cuda":
        print("note: no CUDA device: timing falls back to the wall clock; these numbers check the code "
              "path only and are not latency figures.", flush=True)
    print(f"model: {info.name} ({info.description})", flush=True)
    t0 = time.perf_counter()
    pipe = load_pipeline(args.model, device, getattr(torch, args.dtype))
    build_s = time.perf_counter() - t0
    pipe.set_progress_bar_config(disable=True)
    settings = Settings(model=args.model, height=args.height, width=args.width, frames=args.frames,
                        variants=variants, policies=policy_names, warmup=args.warmup, repeats=args.repeats,
                        budget_s=args.budget_s, pipeline_steps=args.pipeline_steps,
                        schedule_steps=args.schedule_steps, guidance=args.guidance,
                        cross_attention=args.cross_attention, device=str(device), dtype=args.dtype,
                        compile_mode=args.compile_mode if args.compile else None, compile_scope=args.compile_scope,
                        progress=not args.no_progress)
    result = measure(pipe, settings, device=device)
    cfg = pipe.transformer.config
    label = ""
    if info.synthetic:
        label = (f"model {info.name!r} has random weights: latency is real for this architecture and shape, "
                 "but the text encoder is a stand-in (its time is not the real one) and any output is noise.")
    out = {"schema": "wan-fp4/latency/1", "smoke_test": info.synthetic, "label": label,
           "model": {"name": info.name, "description": info.description, "synthetic": info.synthetic,
                     "layers": cfg.num_layers, "heads": cfg.num_attention_heads, "head_dim": cfg.attention_head_dim,
                     "build_s": build_s},
           "settings": {k: v for k, v in vars(settings).items() if k != "extra"},
           **result, "command": "python scripts/bench_e2e.py " + shlex.join(argv),
           "environment": R.environment(device), "created": R.timestamp()}
    path = R.write_json(R.finite_or_none(out), args.json)
    print(f"\nwrote {path}")
    if label:
        print(f"note: {label}")
    print(f"{info.name}, {args.height}x{args.width}x{args.frames} ({result['tokens']} tokens), "
          f"timing: {result['timing']}, baseline {BASELINE}")
    print(table(result), flush=True)
    return 0




if __name__ == "__main__":
    sys.exit(main())
