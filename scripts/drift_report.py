#!/usr/bin/env python3
"""Drift report: how far each attention mode and policy moves a Wan2.1 run from the BF16 control.

The paper's protocol (DESIGN §6), extended. Same prompt, seed and sampler for every run; the
control is stock diffusers attention. Per step count (default 1, 4, 20; separate runs):
final-latent cosine and relative L2 of every mode vs the control, and the per-step trajectory.
Plus: per-layer attention-output error of every mode on q/k/v captured from the control run,
decoded-frame PSNR/SSIM, and the policies (BF16 first/last steps, guard layers) with their
measured speed and drift. Writes OUT/report.md (with PNG plots), OUT/report.json (every number,
the command, the environment). Random or tiny models are labelled: their drift is no quality figure.

    python scripts/drift_report.py --model random:1.3b --out $OUT/drift_1.3b
    python scripts/drift_report.py --model /models/Wan2.1-T2V-14B-Diffusers --out report/
"""
from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from wan_fp4.modes import MODES  # noqa: E402

DEFAULT_PROMPT = ("A red vintage car drives along a winding coastal road at sunset, with ocean waves "
                  "below and natural camera motion.")
DEFAULT_SEED = 20260805
DEFAULT_GEOMETRY = {"height": 512, "width": 768, "frames": 17}


def _ints(text, what):
    try:
        out = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: expected comma-separated integers, got {text!r}") from None
    return out


def build_parser():
    from wan_fp4.eval import policies as P

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tiny", help="tiny | random:1.3b | random:14b | PATH (default tiny)")
    p.add_argument("--height", type=int, help="default 512 (tiny: its own small default)")
    p.add_argument("--width", type=int, help="default 768 (tiny: its own small default)")
    p.add_argument("--frames", type=int, help="default 17 (tiny: its own default)")
    p.add_argument("--steps", default="1,4,20", help="step counts, one run each (default 1,4,20)")
    p.add_argument("--modes", default=",".join(MODES), help=f"modes (default {','.join(MODES)})")
    p.add_argument("--prompt", default=DEFAULT_PROMPT)
    p.add_argument("--negative-prompt", default="")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--guidance", type=float, default=5.0)
    p.add_argument("--cross-attention", action="store_true", help="low precision in cross-attention too")
    p.add_argument("--policies", default=",".join(P.DEFAULT_POLICIES),
                   help=f"policies to measure, or 'none' (known: {', '.join(P.POLICIES)})")
    p.add_argument("--policy-steps", type=int, help="steps of the policy runs (default: the largest --steps)")
    p.add_argument("--time-repeats", type=int, default=2, help="timed forwards per mode/policy (default 2)")
    p.add_argument("--capture-steps", default="first,last",
                   help="denoising steps (0-based, or first/last) whose attention inputs are captured from "
                        "the control run with the largest step count; 'none' to skip (default first,last)")
    p.add_argument("--capture-layers", default="auto",
                   help="layers to capture: 'auto' (all that fit --capture-gib, guard layers first) or a list")
    p.add_argument("--capture-kinds", default="self", help="self, cross or self,cross (default self)")
    p.add_argument("--capture-gib", type=float, default=4.0, help="memory budget for captured q/k/v (default 4)")
    p.add_argument("--capture-rows", type=int, default=1024,
                   help="query rows compared with exact attention per captured call (default 1024)")
    p.add_argument("--decode-steps", default="max",
                   help="step counts whose final latents are decoded for PSNR/SSIM: 'max', 'none' or a list")
    p.add_argument("--device", help="default cuda if available, else cpu")
    p.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16")
    p.add_argument("--out", required=True, help="output directory (report.md, report.json, *.png)")
    return p


def parse(argv):
    from wan_fp4.eval import capture as C
    from wan_fp4.eval import policies as P
    from wan_fp4.pipelines import ModelError, model_info

    parser = build_parser()
    a = parser.parse_args(argv)
    try:
        a.info = model_info(a.model)
    except ModelError as exc:
        parser.error(f"--model: {exc}")
    geometry = {**DEFAULT_GEOMETRY, **{k: v for k, v in a.info.defaults.items() if k in DEFAULT_GEOMETRY}}
    for k, v in geometry.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    for k in ("height", "width"):
        if getattr(a, k) < 16 or getattr(a, k) % 16:
            parser.error(f"--{k} must be a positive multiple of 16, got {getattr(a, k)}")
    if a.frames < 1 or (a.frames - 1) % 4:
        parser.error(f"--frames must be 4k+1, got {a.frames}")
    try:
        a.step_counts = sorted(set(_ints(a.steps, "--steps")))
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    if not a.step_counts or min(a.step_counts) < 1:
        parser.error(f"--steps must be positive integers, got {a.steps!r}")
    a.mode_list = [m.strip() for m in a.modes.split(",") if m.strip()]
    bad = [m for m in a.mode_list if m not in MODES]
    if bad or not a.mode_list:
        parser.error(f"--modes must be drawn from {', '.join(MODES)}, got {a.modes!r}")
    a.policy_names = [] if a.policies.strip() == "none" else [t.strip() for t in a.policies.split(",") if t.strip()]
    try:
        P.resolve(a.policy_names, 40)
    except ValueError as exc:
        parser.error(f"--policies: {exc}")
    a.policy_steps = a.policy_steps or max(a.step_counts)
    if a.policy_steps < 1:
        parser.error(f"--policy-steps must be positive, got {a.policy_steps}")
    if a.time_repeats < 1:
        parser.error(f"--time-repeats must be >= 1, got {a.time_repeats}")
    a.kinds = tuple(k.strip() for k in a.capture_kinds.split(",") if k.strip())
    if not a.kinds or any(k not in C.KINDS for k in a.kinds):
        parser.error(f"--capture-kinds must be drawn from {', '.join(C.KINDS)}, got {a.capture_kinds!r}")
    if a.capture_rows < 1 or a.capture_gib <= 0:
        parser.error("--capture-rows and --capture-gib must be positive")
    if a.decode_steps == "max":
        a.decode = {max(a.step_counts)}
    elif a.decode_steps == "none":
        a.decode = set()
    else:
        try:
            a.decode = set(_ints(a.decode_steps, "--decode-steps"))
        except argparse.ArgumentTypeError as exc:
            parser.error(str(exc))
        if not a.decode <= set(a.step_counts):
            parser.error(f"--decode-steps {sorted(a.decode)} must be among --steps {a.step_counts}")
    a.parser = parser
    return a


def capture_plan(a, pipe, tokens):
    """(steps, layers) to capture in the control run with the largest step count."""
    from wan_fp4.eval import capture as C
    from wan_fp4.eval import policies as P

    if a.capture_steps.strip() == "none":
        return None, None
    n = max(a.step_counts)
    steps = set()
    for t in a.capture_steps.split(","):
        t = t.strip()
        if t in ("first", "last"):
            steps.add(0 if t == "first" else n - 1)
        elif t:
            try:
                s = int(t)
            except ValueError:
                a.parser.error(f"--capture-steps: expected first, last or integers, got {t!r}")
            if not -n <= s < n:
                a.parser.error(f"--capture-steps: step {s} is outside a {n}-step run")
            steps.add(s % n)
    layers_total = pipe.transformer.config.num_layers
    if a.capture_layers == "auto":
        per = C.capture_bytes(pipe.transformer, tokens, kinds=a.kinds)
        guard = P.guard_for(layers_total)[0]
        layers = C.plan_layers(layers_total, per, len(steps), int(a.capture_gib * 2**30), must=guard)
    else:
        try:
            layers = _ints(a.capture_layers, "--capture-layers")
        except argparse.ArgumentTypeError as exc:
            a.parser.error(str(exc))
        if any(not 0 <= i < layers_total for i in layers):
            a.parser.error(f"--capture-layers must be in 0..{layers_total - 1}, got {layers}")
    return sorted(steps), layers


def speed_rows(pipe, a, device, policies):
    """Per-forward time at the drift geometry: stock BF16, and each policy's non-BF16-step forward."""
    from wan_fp4.eval import latency as L

    timer = L.Timer(device)
    geom = L.Geometry(a.height, a.width, a.frames, t_factor=pipe.vae_scale_factor_temporal,
                      s_factor=pipe.vae_scale_factor_spatial)
    t = pipe.transformer
    inputs = L.make_inputs(t, geom, device)
    base = L.time_variant(t, L.VARIANTS[L.BASELINE], inputs, geom=geom, timer=timer, warmup=1,
                          repeats=a.time_repeats)
    base_ms = base["forward_ms"]["median"]
    out = {"timing": timer.method, "stock_forward_ms": base_ms, "stock_attention_share": base["attention"]["share"],
           "policies": {}}
    for pol in policies:
        v = L.Variant(pol.name, pol.description, "policy", mode=pol.mode)
        try:
            r = L.time_variant(t, v, inputs, geom=geom, timer=timer, warmup=1, repeats=a.time_repeats,
                               cross_attention=a.cross_attention, policy_kwargs=pol.layer_kwargs())
        except (FloatingPointError, RuntimeError, ValueError) as exc:
            out["policies"][pol.name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        ms = r["forward_ms"]["median"]
        run = pol.run_ms(a.policy_steps, base_ms, ms)
        out["policies"][pol.name] = {"forward_ms": ms, "run_ms": run,
                                     "speedup_vs_stock": 2 * a.policy_steps * base_ms / run}
    return out


def main(argv=None):
    from tqdm.auto import tqdm

    from wan_fp4.eval import capture as C
    from wan_fp4.eval import metrics as M
    from wan_fp4.eval import policies as P
    from wan_fp4.eval import report as R
    from wan_fp4.pipelines import load_pipeline

    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    a = parse(argv)
    device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    info = a.info
    smoke = info.synthetic
    label = R.SMOKE_LABEL.format(model=info.name) if smoke else ""
    print(f"model: {info.name} ({info.description})", flush=True)
    started = time.perf_counter()
    pipe = load_pipeline(a.model, device, getattr(torch, a.dtype))
    pipe.set_progress_bar_config(disable=True)
    num_layers = pipe.transformer.config.num_layers
    from wan_fp4.eval.latency import Geometry

    tokens = Geometry(a.height, a.width, a.frames, t_factor=pipe.vae_scale_factor_temporal,
                      s_factor=pipe.vae_scale_factor_spatial).tokens(pipe.transformer)
    cfg = P.RunConfig(a.prompt, a.negative_prompt, a.seed, a.guidance, a.height, a.width, a.frames,
                      a.cross_attention)
    cap_steps, cap_layers = capture_plan(a, pipe, tokens)
    policies = P.resolve(a.policy_names, num_layers)
    n_policy_runs = len(policies) + (0 if a.policy_steps in a.step_counts else 1)
    total = len(a.step_counts) * (1 + len(a.mode_list)) + n_policy_runs

    runs, controls, frames_cmp, cap = [], {}, [], None
    with tqdm(total=total, desc="drift", unit="run") as bar:
        for steps in a.step_counts:
            decode = steps in a.decode
            bar.set_postfix_str(f"{steps} steps, control")
            handlers = []
            if cap_steps is not None and steps == max(a.step_counts):
                cap = C.Capture(frozenset(cap_layers), frozenset(cap_steps), a.kinds, int(a.capture_gib * 2**30))
                handlers = [cap]
            ctrl = P.run(pipe, cfg, steps, None, decode=decode, tap_handlers=handlers)
            controls[steps] = ctrl
            bar.update()
            for mode in a.mode_list:
                bar.set_postfix_str(f"{steps} steps, {mode}")
                try:
                    r = P.run(pipe, cfg, steps, P.mode_policy(mode, num_layers), decode=decode)
                except (FloatingPointError, RuntimeError, ValueError) as exc:
                    runs.append(failed_row(steps=steps, mode=mode, exc=exc))
                    bar.update()
                    continue
                row = {"steps": steps, "mode": mode, **M.compare(r.latent, ctrl.latent), "seconds": r.seconds,
                       "kernels": r.kernels, "trajectory": M.trajectory_drift(r.trajectory, ctrl.trajectory)}
                if decode:
                    fm = M.frame_metrics(r.frames, ctrl.frames)
                    row["frames"] = fm
                    frames_cmp.append({"steps": steps, "mode": mode, **fm})
                runs.append(row)
                bar.update()
        policy_rows = []
        if policies:
            if a.policy_steps not in controls:
                bar.set_postfix_str(f"{a.policy_steps} steps, control")
                controls[a.policy_steps] = P.run(pipe, cfg, a.policy_steps, None)
                bar.update()
            ctrl = controls[a.policy_steps]
            for pol in policies:
                bar.set_postfix_str(f"policy {pol.name}")
                try:
                    r = P.run(pipe, cfg, a.policy_steps, pol)
                except (FloatingPointError, RuntimeError, ValueError) as exc:
                    policy_rows.append(failed_row(policy=pol.name, description=pol.description, mode=pol.mode,
                                                  steps=a.policy_steps, exc=exc))
                    bar.update()
                    continue
                policy_rows.append({"policy": pol.name, "description": pol.description, "mode": pol.mode,
                                    "steps": a.policy_steps, "enable": _jsonable(pol.enable_kwargs()),
                                    **M.compare(r.latent, ctrl.latent), "kernels": r.kernels,
                                    "trajectory": M.trajectory_drift(r.trajectory, ctrl.trajectory)})
                bar.update()

    layer_errors, capture_info = [], {"enabled": cap is not None}
    if cap is not None:
        capture_info.update(steps=cap_steps, layers=cap_layers, kinds=list(a.kinds), rows=a.capture_rows,
                            captured=len(cap.records), bytes=cap.nbytes, skipped=cap.skipped,
                            budget_gib=a.capture_gib)
        layer_errors = C.attention_errors(cap.records, a.mode_list, device=device, rows=a.capture_rows)
        cap.records.clear()

    print("timing modes and policies at this geometry ...", flush=True)
    mode_pols = [P.mode_policy(m, num_layers) for m in a.mode_list if m != "bf16"]
    speed = speed_rows(pipe, a, device, mode_pols + policies)
    for row in policy_rows:
        row.update(speed["policies"].get(row["policy"], {}))
    mode_speed = []  # modes as policies at the policy step count, for the speed-vs-drift plot
    for m in a.mode_list:
        if m == "bf16":
            continue
        d = next((r for r in runs if r["mode"] == m and r["steps"] == max(a.step_counts)), None)
        s = speed["policies"].get(f"mode:{m}", {})
        mode_speed.append({"policy": f"mode:{m}", "steps": max(a.step_counts), "rel_l2": d["rel_l2"] if d else None, "cosine": d["cosine"] if d else None,
                           **s})

    report = {
        "schema": "wan-fp4/drift-report/1", "smoke_test": smoke, "label": label,
        "model": {"name": info.name, "description": info.description, "synthetic": smoke,
                  "layers": num_layers, "heads": pipe.transformer.config.num_attention_heads},
        "control": "stock diffusers WanAttnProcessor (exact attention) in the pipeline's dtype",
        "settings": {"prompt": a.prompt, "negative_prompt": a.negative_prompt, "seed": a.seed,
                     "guidance": a.guidance, "height": a.height, "width": a.width, "frames": a.frames,
                     "tokens": tokens, "steps": a.step_counts, "modes": a.mode_list, "dtype": a.dtype,
                     "cross_attention": a.cross_attention, "sampler": type(pipe.scheduler).__name__,
                     "policy_steps": a.policy_steps, "decode_steps": sorted(a.decode)},
        "runs": runs, "frames": frames_cmp, "layer_errors": layer_errors, "capture": capture_info,
        "policies": policy_rows, "mode_speed": mode_speed, "speed": speed,
        "command": "python scripts/drift_report.py " + shlex.join(argv),
        "environment": R.environment(device), "created": R.timestamp(),
        "seconds": time.perf_counter() - started, "timings_meaningful": R.timings_meaningful(device),
    }
    write(report, out_dir)
    print_summary(report, out_dir)
    return 0


def failed_row(*, exc, **fields):
    """A run that raised (e.g. direct-p-fp4 overflowing without its guard): NaN metrics, the error."""
    print(f"run {fields} failed: {type(exc).__name__}: {exc}", flush=True)
    return {**fields, "cosine": math.nan, "rel_l2": math.nan, "max_abs": math.nan, "finite": False,
            "kernels": {}, "trajectory": [], "error": f"{type(exc).__name__}: {exc}"}


def _jsonable(kw):
    return {k: (list(v) if isinstance(v, (tuple, frozenset, set)) else v) for k, v in kw.items()}


# --------------------------------------------------------------------------- output
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _title(report, what):
    t = f"wan-fp4 {what}, model {report['model']['name']}"
    return t + ("\nSMOKE TEST (random weights): not a quality figure" if report["smoke_test"] else "")


def _nan(x):
    return float("nan") if x is None else x


def plot_trajectory(report, path):
    plt = _plt()
    n = max(report["settings"]["steps"])
    fig, ax = plt.subplots(figsize=(7.5, 4.5), constrained_layout=True)
    for r in report["runs"]:
        if r["steps"] == n:
            ax.plot([t["step"] for t in r["trajectory"]], [max(_nan(t["rel_l2"]), 1e-12) for t in r["trajectory"]],
                    marker="o", ms=3, label=r["mode"])
    for p in report["policies"]:
        if p["steps"] == n:
            ax.plot([t["step"] for t in p["trajectory"]], [max(_nan(t["rel_l2"]), 1e-12) for t in p["trajectory"]],
                    ls="--", lw=1, label=f"policy {p['policy']}")
    ax.set_yscale("log")
    ax.set_xlabel("denoising step")
    ax.set_ylabel("rel. L2 of the latent vs BF16 control")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(_title(report, f"trajectory drift ({n}-step run)"),
                 color="firebrick" if report["smoke_test"] else "black", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_frames(report, path):
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for f in report["frames"]:
        x = range(1, len(f["psnr_db_per_frame"]) + 1)
        a1.plot(x, [min(_nan(v), 200.0) for v in f["psnr_db_per_frame"]], marker="o", ms=3,
                label=f"{f['mode']} ({f['steps']} steps)")
        a2.plot(x, f["ssim_per_frame"], marker="o", ms=3, label=f"{f['mode']} ({f['steps']} steps)")
    a1.set_ylabel("PSNR (dB) vs control (identical frames shown at 200)")
    a2.set_ylabel("SSIM vs control")
    for ax in (a1, a2):
        ax.set_xlabel("frame")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(_title(report, "decoded frames"), color="firebrick" if report["smoke_test"] else "black")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _f(x, digits=4):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a" if x is None else f"**{x}**"
    if isinstance(x, float) and 0.999 <= x < 1:
        return f"1 - {1 - x:.2e}"
    return f"{x:.{digits}g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.3e}"


def markdown(report) -> str:
    s = report["settings"]
    L = ["# wan-fp4 drift report", ""]
    if report["smoke_test"]:
        L += [f"> **{report['label']}**", ""]
    L += [f"- model: `{report['model']['name']}` ({report['model']['description']})",
          f"- control: {report['control']}",
          f"- prompt: \"{s['prompt']}\"; seed {s['seed']}; guidance {s['guidance']}; sampler {s['sampler']}",
          f"- {s['height']}x{s['width']}, {s['frames']} frames = {s['tokens']} self-attention tokens; dtype "
          f"{s['dtype']}; cross-attention in low precision: {s['cross_attention']}",
          f"- created {report['created']} on {report['environment'].get('device_name')} "
          f"({report['environment']['device']}) in {report['seconds']:.0f} s", "",
          "## Final latent vs the BF16 control", "",
          "Each step count is a separate run from the same seed. rel. L2 = ||x - ref|| / ||ref|| (float64).", "",
          "| steps | mode | cosine | rel. L2 | max abs | kernels (calls) |", "|---:|---|---:|---:|---:|---|"]
    for r in report["runs"]:
        k = "; ".join(f"{a}: {n}" for a, n in r["kernels"].items()) or "-"
        if r.get("error"):
            k = f"failed: {r['error']}"
        L.append(f"| {r['steps']} | {r['mode']} | {_f(r['cosine'])} | {_f(r['rel_l2'])} | {_f(r['max_abs'])} | {k} |")
    L += ["", "![final-latent drift vs steps](drift.png)", "",
          "## Per-step trajectory", "", "![trajectory](trajectory.png)", ""]
    if report["layer_errors"]:
        c = report["capture"]
        L += ["## Per-layer attention-output error on captured inputs", "",
              f"q/k/v captured from the control run at steps {c['steps']} (0-based), layers {c['layers']}, "
              f"{', '.join(c['kinds'])}-attention, conditional branch; each mode's kernel runs on all rows, "
              f"{c['rows']} evenly spread query rows are compared with exact float32 attention.", ""]
        if c["skipped"]:
            L += [f"Not captured (memory budget {c['budget_gib']} GiB): {len(c['skipped'])} calls.", ""]
        modes = list(dict.fromkeys(e["mode"] for e in report["layer_errors"]))
        L += ["| mode | kernel | mean rel. L2 | worst rel. L2 (layer, step) | failed calls |", "|---|---|---:|---:|---:|"]
        for m in modes:
            es = [e for e in report["layer_errors"] if e["mode"] == m]
            ok = [e for e in es if e["rel_l2"] is not None and math.isfinite(e["rel_l2"])]
            worst = max(ok, key=lambda e: e["rel_l2"]) if ok else None
            mean = sum(e["rel_l2"] for e in ok) / len(ok) if ok else None
            kern = ", ".join(sorted({e.get("kernel", "?") for e in es}))
            w = f"{_f(worst['rel_l2'])} ({worst['layer']}, {worst['step']})" if worst else "n/a"
            L.append(f"| {m} | {kern} | {_f(mean)} | {w} | {len(es) - len(ok)} |")
        L += ["", "![per-layer attention error](layers.png)", ""]
    if report["frames"]:
        L += ["## Decoded frames", "", "| steps | mode | PSNR (dB) | SSIM (mean) | SSIM (worst frame) |",
              "|---:|---|---:|---:|---:|"]
        for f in report["frames"]:
            L.append(f"| {f['steps']} | {f['mode']} | {_f(f['psnr_db'])} | {_f(f['ssim'])} | "
                     f"{_f(min(f['ssim_per_frame']))} |")
        L += ["", "![frames](frames.png)", ""]
    sp = report["speed"]
    timed = report["timings_meaningful"]
    L += ["## Speed and drift per policy", ""]
    if timed:
        L += [f"Transformer time of a {s['policy_steps']}-step run with CFG, modelled from forwards measured at "
              f"this geometry ({sp['timing']}): BF16 steps cost a stock forward ({_f(sp['stock_forward_ms'])} ms, "
              f"attention {_f(100 * sp['stock_attention_share'], 3)}% of it), the others the policy's forward."]
    else:
        from wan_fp4.eval.report import CPU_TIMING_NOTE

        L += [CPU_TIMING_NOTE]
    L += [f"Drift: final latent of a run of the listed step count vs the control (`mode:` rows: the plain "
          f"modes).", "", "| policy | forward ms | speed-up vs stock | drift steps | cosine | rel. L2 |",
          "|---|---:|---:|---:|---:|---:|"]
    for r in report["mode_speed"] + report["policies"]:
        ms, up = (_f(r.get("forward_ms")), _f(r.get("speedup_vs_stock"), 3)) if timed else ("n/a", "n/a")
        L.append(f"| {r['policy']} | {ms} | {up} | {r.get('steps')} | {_f(r.get('cosine'))} | {_f(r.get('rel_l2'))} |")
    L += ["", "![speed vs drift](policies.png)", "", "## Reproduce", "", "```", report["command"], "```", "",
          "Every number and the environment are in `report.json`.", ""]
    return "\n".join(L)


def write(report, out_dir: Path):
    from wan_fp4.eval import capture as C
    from wan_fp4.eval import policies as P
    from wan_fp4.eval import report as R

    drift_view = {"runs": report["runs"], "model": report["model"], "smoke_test": report["smoke_test"]}
    R.drift_plot(drift_view, out_dir / "drift.png")
    plot_trajectory(report, out_dir / "trajectory.png")
    if report["layer_errors"]:
        C.plot_layer_errors(report["layer_errors"], out_dir / "layers.png",
                            title=f"wan-fp4 per-layer attention error, model {report['model']['name']}",
                            smoke=report["smoke_test"])
    if report["frames"]:
        plot_frames(report, out_dir / "frames.png")
    title = f"wan-fp4 policies, model {report['model']['name']}"
    if not report["timings_meaningful"]:
        title += "\nCPU: the speed axis is the reference emulation's, not the modes' speed"
    P.plot_speed_vs_drift(report["mode_speed"] + report["policies"], out_dir / "policies.png",
                          title=title, smoke=report["smoke_test"])
    (out_dir / "report.md").write_text(markdown(report))
    from wan_fp4.eval.latency import _clean

    R.write_json(_clean(report), out_dir / "report.json")


def print_summary(report, out_dir):
    if report["smoke_test"]:
        print(report["label"])
    print(f"wrote {out_dir / 'report.md'}, {out_dir / 'report.json'} and plots")
    print(f"{'steps':>5} {'mode':<14} {'cosine':>12} {'rel-L2':>10}")
    for r in report["runs"]:
        print(f"{r['steps']:>5} {r['mode']:<14} {_f(r['cosine']):>12} {_f(r['rel_l2']):>10}")
    for r in report["mode_speed"] + report["policies"]:
        up = _f(r.get("speedup_vs_stock"), 3) if report["timings_meaningful"] else "n/a"
        print(f"policy {r['policy']:<40} speed-up {up:>7}  rel-L2 {_f(r.get('rel_l2'))}")
    if not report["timings_meaningful"]:
        from wan_fp4.eval.report import CPU_TIMING_NOTE

        print(CPU_TIMING_NOTE)


if __name__ == "__main__":
    sys.exit(main())
