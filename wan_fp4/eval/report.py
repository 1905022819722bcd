"""Writing evaluation reports: JSON (every number), Markdown (tables) and PNG (plots)."""
from __future__ import annotations

import json
import math
import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import torch

SMOKE_LABEL = ("SMOKE TEST, NOT A QUALITY FIGURE: model {model!r} has random weights, so these numbers "
               "only show that every mode runs end to end and how far its latents move from the "
               "control on this toy; they say nothing about video quality on a trained Wan2.1.")


CPU_TIMING_NOTE = ("Times are left out: on a CPU every low-precision mode runs the PyTorch reference "
                   "emulation and the times follow the machine's load, so they say nothing about the "
                   "modes' speed (GPU figures are in BENCHMARKS.md).")


def timings_meaningful(device) -> bool:
    """Whether times measured on `device` say anything about the modes' speed: on a GPU only."""
    return torch.device(device).type == "cuda"


def environment(device) -> dict:
    """Versions and device, so a reported number can be traced to what produced it."""
    device = torch.device(device)
    env = {"python": sys.version.split()[0], "platform": platform.platform(),
           "machine": platform.machine(), "device": str(device), "torch_threads": torch.get_num_threads()}
    for dist in ("wan-fp4", "torch", "diffusers", "transformers", "accelerate", "triton",
                 "nvidia-cutlass-dsl"):
        try:
            env[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            env[dist] = None
    env["torch_build"] = torch.__version__
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(device_name=props.name, capability=f"sm{props.major}{props.minor}",
                   cuda=torch.version.cuda, driver_visible_gpus=torch.cuda.device_count())
    else:
        env["device_name"] = platform.processor() or platform.machine()
    return env


def timestamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json(obj, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # allow_nan=False: a NaN would make the file invalid JSON for strict readers; fail loudly instead.
    path.write_text(json.dumps(obj, indent=2, allow_nan=False) + "\n")
    return path


def finite_or_none(obj):
    """JSON has no NaN/inf: a non-finite result (e.g. a mode that overflowed) is written as null;
    keys become strings, as JSON's are."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def fmt(x, digits: int = 4) -> str:
    """The reports' one number format: n/a for a missing value, non-finite in bold, cosines near 1
    as the distance from 1 (the informative part), else `digits` significant digits."""
    if x is None:
        return "n/a"
    if not math.isfinite(x):
        return f"**{x}**"
    if x == 0:
        return "0"
    if x == 1:
        return "1"
    if 0 < 1 - x < 1e-3:
        return f"1 - {1 - x:.3e}"
    return f"{x:.{digits}g}" if 1e-3 <= abs(x) < 1e4 else f"{x:.3e}"


def _kernels(r) -> str:
    if r.get("error"):
        return f"failed: {r['error']}"
    return "; ".join(f"{k}: {n}" for k, n in r["kernels"].items()) or "-"


def drift_markdown(report: dict) -> str:
    """The drift report as Markdown: smoke banner, settings, then one section per part present."""
    s = report["settings"]
    env = report["environment"]
    timed = timings_meaningful(env["device"])
    lines = ["# wan-fp4 drift report", ""]
    if report["smoke_test"]:
        lines += [f"> **{report['label']}**", ""]
    lines += [f"- model: `{report['model']['name']}` ({report['model']['description']})",
              f"- control: {report['reference']}",
              f"- prompt: \"{s['prompt']}\" (negative: \"{s['negative_prompt']}\")",
              f"- seed {s['seed']}, guidance {s['guidance']}, {s['height']}x{s['width']}, {s['frames']} frames "
              f"({s['tokens']} self-attention tokens), sampler {s['sampler']}, dtype {s['dtype']}, "
              f"cross-attention low precision: {s['cross_attention']}",
              f"- created {report['created']} on {env['device']} ({env.get('device_name')})"
              + (f" in {report['seconds']:.0f} s" if "seconds" in report else ""),
              *_peer_lines(report.get("peers")), "",
              "## Final latent vs the control", "",
              "Each step count is a separate run from the same seed. Cosine similarity and relative L2 = "
              "||x - ref|| / ||ref||, float64.", "",
              "| steps | mode | cosine | rel. L2 | max abs | kernels (calls) |" + (" time (s) |" if timed else ""),
              "|---:|---|---:|---:|---:|---|" + ("---:|" if timed else "")]
    for r in report["runs"]:
        lines.append(f"| {r['steps']} | {r['mode']} | {fmt(r['cosine'])} | {fmt(r['rel_l2'])} | "
                     f"{fmt(r['max_abs'])} | {_kernels(r)} |" + (f" {r['seconds']:.2f} |" if timed else ""))
    if not timed:
        lines += ["", CPU_TIMING_NOTE]
    lines += ["", "![drift vs steps](drift.png)", ""]
    if any(r["trajectory"] for r in report["runs"]):
        lines += ["## Per-step trajectory", "", "![trajectory](trajectory.png)", ""]
    if report.get("layer_errors"):
        lines += _layer_section(report)
    if report.get("frames"):
        lines += ["## Decoded frames", "", "| steps | mode | PSNR (dB) | SSIM (mean) | SSIM (worst frame) |",
                  "|---:|---|---:|---:|---:|"]
        for f in report["frames"]:
            lines.append(f"| {f['steps']} | {f['mode']} | {fmt(f['psnr_db'])} | {fmt(f['ssim'])} | "
                         f"{fmt(min(f['ssim_per_frame']))} |")
        lines += ["", "![frames](frames.png)", ""]
    if report.get("speed"):
        lines += _policy_section(report, timed)
    if report.get("accuracy"):
        lines += _accuracy_section(report["accuracy"])
    lines += ["## Reproduce", "", "```", report["command"], "```", "",
              "Every number, the per-step trajectories and the environment are in `drift.json`.", ""]
    return "\n".join(lines)


def _peer_lines(peers) -> list[str]:
    """The settings lines on peers: which ran (and on which calls), which were skipped and why."""
    if not peers:
        return []
    lines = []
    if peers["run"]:
        ran = "; ".join(f"`{label}` {what}" for label, what in peers["run"].items())
        lines.append(f"- peers (attention kernels that are not wan_fp4's, measured like a mode on the stock "
                     f"processors' {' and '.join(peers['kinds'])}-attention calls): {ran}")
    if peers["skipped"]:
        lines.append("- peers skipped: " + "; ".join(f"{n} ({why})" for n, why in peers["skipped"].items()))
    return lines


def drift_summary(report: dict) -> str:
    """A few lines for the terminal: final-latent drift per run and per policy."""
    lines = [f"{'steps':>5} {'mode':<14} {'cosine':>12} {'rel-L2':>10}"]
    for r in report["runs"]:
        lines.append(f"{r['steps']:>5} {r['mode']:<14} {fmt(r['cosine']):>12} {fmt(r['rel_l2']):>10}")
    timed = timings_meaningful(report["environment"]["device"])
    for r in report.get("mode_speed", []) + report.get("policies", []):
        up = fmt(r.get("speedup_vs_stock"), 3) if timed else "n/a"
        lines.append(f"policy {r['policy']:<40} speed-up {up:>7}  rel-L2 {fmt(r.get('rel_l2'))}")
    for mode, a in ((report.get("accuracy") or {}).get("modes") or {}).items():
        f = ((report.get("accuracy") or {}).get("frames_vs_bf16") or {}).get(mode)
        lines.append(f"prompt accuracy {mode:<14} all three {fmt(a['all'], 3)}"
                     + (f"  frames vs bf16 median PSNR {fmt(f['median_db'], 3)} dB" if f else ""))
    for name, why in ((report.get("peers") or {}).get("skipped") or {}).items():
        lines.append(f"peer {name} skipped: {why}")
    if not timed:
        lines.append(CPU_TIMING_NOTE)
    if report["smoke_test"]:
        lines.append(report["label"])
    return "\n".join(lines)


def _layer_section(report) -> list[str]:
    c = report["capture"]
    lines = ["## Per-layer attention-output error on captured inputs", "",
             f"q/k/v captured from the control run at steps {c['steps']} (0-based), layers {c['layers']}, "
             f"{', '.join(c['kinds'])}-attention, conditional branch; each mode's kernel runs on all rows, "
             f"{c['rows']} evenly spread query rows are compared with exact float32 attention.", ""]
    if c["skipped"]:
        lines += [f"Not captured (memory budget {c['budget_gib']} GiB): {len(c['skipped'])} calls.", ""]
    lines += ["| mode | kernel | mean rel. L2 | worst rel. L2 (layer, step) | failed calls |",
              "|---|---|---:|---:|---:|"]
    errors = report["layer_errors"]
    for m in dict.fromkeys(e["mode"] for e in errors):
        es = [e for e in errors if e["mode"] == m]
        ok = [e for e in es if e["rel_l2"] is not None and math.isfinite(e["rel_l2"])]
        worst = max(ok, key=lambda e: e["rel_l2"]) if ok else None
        mean = sum(e["rel_l2"] for e in ok) / len(ok) if ok else None
        kern = ", ".join(sorted({e.get("kernel", "?") for e in es}))
        w = f"{fmt(worst['rel_l2'])} ({worst['layer']}, {worst['step']})" if worst else "n/a"
        lines.append(f"| {m} | {kern} | {fmt(mean)} | {w} | {len(es) - len(ok)} |")
    return lines + ["", "![per-layer attention error](layers.png)", ""]


def _policy_section(report, timed: bool) -> list[str]:
    s, sp = report["settings"], report["speed"]
    lines = ["## Speed and drift per policy", ""]
    if timed:  # else the CPU note above already says why the times are left out
        lines += [f"Transformer time of a {s['policy_steps']}-step run with CFG, modelled from forwards measured at "
                  f"this geometry ({sp['timing']}): BF16 steps cost a stock forward ({fmt(sp['stock_forward_ms'])} "
                  f"ms, attention {fmt(100 * sp['stock_attention_share'], 3)}% of it), the others the policy's "
                  "forward."]
    lines += ["Drift: final latent of a run of the listed step count vs the control (`mode:` rows: the plain "
              "modes)." + (" Peers are not timed here (`wan-fp4 bench e2e` times them)."
                           if (report.get("peers") or {}).get("run") else ""), "", "| policy | forward ms | speed-up vs stock | drift steps | cosine | rel. L2 |",
              "|---|---:|---:|---:|---:|---:|"]
    for r in report["mode_speed"] + report["policies"]:
        ms, up = (fmt(r.get("forward_ms")), fmt(r.get("speedup_vs_stock"), 3)) if timed else ("n/a", "n/a")
        lines.append(f"| {r['policy']} | {ms} | {up} | {r.get('steps')} | {fmt(r.get('cosine'))} | "
                     f"{fmt(r.get('rel_l2'))} |")
    # a policy's name alone does not say what it runs; and a policy whose BF16 steps cover the whole
    # run (first2-last2 at 4 steps) has drift 0 for that reason, not because its mode is exact
    described = [f"- `{r['policy']}`: {r['description']}"
                 + (f" (at {r['steps']} steps every step is BF16)" if _all_bf16(r) else "")
                 for r in report["policies"] if r.get("description")]
    if described:
        lines += ["", *described]
    title = "speed vs drift" if timed else "drift per policy"
    return lines + ["", f"![{title}](policies.png)", ""]


def _all_bf16(row) -> bool:
    kernels = row.get("kernels") or {}
    return bool(kernels) and all(k.startswith("bf16 /") for k in kernels)


def _accuracy_section(acc) -> list[str]:
    lines = ["## Prompt accuracy", "", acc["note"], "",
             f"{acc['prompts']} prompts x seeds {acc['seeds']}, {acc['steps']} steps, per mode:", "",
             "| mode | colour | shape | direction | all three | frames vs bf16: PSNR median (quartiles), worst |",
             "|---|---:|---:|---:|---:|---|"]
    spreads = acc.get("frames_vs_bf16") or {}
    for mode, a in acc["modes"].items():
        f = spreads.get(mode)
        vs = (f"{fmt(f['median_db'], 3)} dB ({fmt(f['p25_db'], 3)}-{fmt(f['p75_db'], 3)}), {fmt(f['min_db'], 3)}"
              if f else ("control" if mode == "bf16" else "n/a"))
        lines.append(f"| {mode} | {fmt(a['colour'], 3)} | {fmt(a['shape'], 3)} | {fmt(a['direction'], 3)} | "
                     f"{fmt(a['all'], 3)} | {vs} |")
    if spreads:
        lines += ["", "Frames vs bf16: each video against bf16's video of the same prompt and seed (8-bit "
                  "frames), over all the videos above; a spread over many trajectories, where the drift "
                  "table follows one."]
    failed = [f"{mode}: {a['error']}" for mode, a in acc["modes"].items() if a.get("error")]
    return lines + ([""] + [f"Failed: {'; '.join(failed)}"] if failed else []) + [""]


def _plt():
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on CI or GPU hosts
    import matplotlib.pyplot as plt

    return plt


def _title(report, what: str) -> str:
    t = f"wan-fp4 {what}, model {report['model']['name']}"
    return t + ("\nSMOKE TEST (random weights): not a quality figure" if report["smoke_test"] else "")


def _save(fig, plt, path, dpi) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _nan(x):
    return math.nan if x is None else x


def drift_plot(report: dict, path) -> Path:
    """drift.png: relative L2 and 1 - cosine of the final latent against step count, per mode."""
    plt = _plt()
    fig, (ax_l2, ax_cos) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    modes = list(dict.fromkeys(r["mode"] for r in report["runs"]))
    for mode in modes:
        runs = sorted((r for r in report["runs"] if r["mode"] == mode), key=lambda r: r["steps"])
        steps = [r["steps"] for r in runs]
        ax_l2.plot(steps, [r["rel_l2"] for r in runs], marker="o", clip_on=False, label=mode)
        ax_cos.plot(steps, [1 - r["cosine"] for r in runs], marker="o", clip_on=False, label=mode)
    all_steps = sorted({r["steps"] for r in report["runs"]})
    for ax, ylabel in ((ax_l2, "relative L2 vs control"), (ax_cos, "1 - cosine vs control")):
        ax.set_xscale("log")
        ax.set_xticks(all_steps, [str(s) for s in all_steps])
        ax.minorticks_off()
        # symlog keeps the exact zeros of the bf16 row on the axis.
        ax.set_yscale("symlog", linthresh=1e-6)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("denoising steps")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(_title(report, "latent drift"), color="firebrick" if report["smoke_test"] else "black")
    return _save(fig, plt, path, 120)


def _zero_based_log(ax, values) -> None:
    """A log y axis that keeps exact zeros (bf16 rows, BF16 steps of a policy) at 0: symlog, linear
    only below the smallest nonzero value, so zeros no longer stretch the axis down to a made-up 1e-12."""
    pos = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    ax.set_yscale("symlog", linthresh=10.0 ** math.floor(math.log10(min(pos))) if pos else 1e-6)
    ax.set_ylim(0, 2 * max(pos) if pos else None)  # headroom: the top point's marker and label stay inside


def trajectory_plot(report: dict, path) -> Path:
    """trajectory.png: relative L2 of the latent after each step of the longest run, per mode and policy."""
    from matplotlib.ticker import MaxNLocator

    plt = _plt()
    n = max(report["settings"]["steps"])
    fig, ax = plt.subplots(figsize=(7.5, 4.5), constrained_layout=True)
    shown = []
    for r in report["runs"]:
        if r["steps"] == n:
            ys = [_nan(t["rel_l2"]) for t in r["trajectory"]]
            ax.plot([t["step"] for t in r["trajectory"]], ys, marker="o", ms=3, label=r["mode"])
            shown += ys
    for p in report.get("policies", []):
        if p["steps"] == n:
            ys = [_nan(t["rel_l2"]) for t in p["trajectory"]]
            ax.plot([t["step"] for t in p["trajectory"]], ys, ls="--", lw=1, label=f"policy {p['policy']}")
            shown += ys
    _zero_based_log(ax, shown)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no 2.5 ticks
    ax.set_xlabel("denoising step (latent after step n)")
    ax.set_ylabel("rel. L2 of the latent vs control")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(_title(report, f"trajectory drift ({n}-step run)"),
                 color="firebrick" if report["smoke_test"] else "black", fontsize=10)
    return _save(fig, plt, path, 110)


def frames_plot(report: dict, path) -> Path:
    """frames.png: PSNR and SSIM of each decoded frame against the control's."""
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    # identical frames (PSNR inf) are drawn on a line just above the largest finite PSNR: a fixed
    # 200 dB squeezed the real values into the bottom of the panel
    finite = [v for f in report["frames"] for v in f["psnr_db_per_frame"] if v is not None and math.isfinite(v)]
    top = 10 * math.ceil(max(finite) / 10) + 10 if finite else 100.0
    for f in report["frames"]:
        x = range(1, len(f["psnr_db_per_frame"]) + 1)
        a1.plot(x, [min(_nan(v), top) for v in f["psnr_db_per_frame"]], marker="o", ms=3,
                label=f"{f['mode']} ({f['steps']} steps)")
        a2.plot(x, f["ssim_per_frame"], marker="o", ms=3, label=f"{f['mode']} ({f['steps']} steps)")
    a1.axhline(top, color="grey", lw=0.8, ls=":")
    a1.annotate("identical to the control (PSNR inf)", (0.01, top), xycoords=("axes fraction", "data"),
                xytext=(0, 3), textcoords="offset points", fontsize=7, color="grey")
    a1.set_ylabel("PSNR (dB) vs control")
    a2.set_ylabel("SSIM vs control")
    for ax in (a1, a2):
        ax.set_xlabel("frame")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(_title(report, "decoded frames"), color="firebrick" if report["smoke_test"] else "black")
    return _save(fig, plt, path, 110)


def policies_plot(rows: list[dict], path, *, title: str, smoke: bool, speed: bool = True) -> Path:
    """policies.png: each policy as a point, modelled speed-up vs stock BF16 (x) against final-latent
    rel-L2 (y); speed False (a CPU, where the times are the emulation's): one bar of rel-L2 per policy."""
    plt = _plt()
    if smoke:
        title += "\nSMOKE TEST (random weights): drift is not a quality figure"
    if not speed:  # a speed axis the report calls meaningless would still be read as one
        return _drift_bars(plt, rows, path, title=title, smoke=smoke)
    fig, ax = plt.subplots(figsize=(7.5, 5), constrained_layout=True)
    shown = []
    for r in rows:
        x, y = r.get("speedup_vs_stock"), r.get("rel_l2")
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
            continue
        ax.scatter([x], [y], s=40)
        ax.annotate(r["policy"], (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
        shown.append(y)
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    ax.margins(x=0.2)  # the labels run right of their points
    _zero_based_log(ax, shown)
    ax.set_xlabel("speed-up of the transformer over a full run vs stock BF16 (modelled from measured forwards)")
    ax.set_ylabel("final-latent rel. L2 vs control")
    ax.grid(True, alpha=0.3)
    ax.set_title(title, color="firebrick" if smoke else "black", fontsize=10)
    return _save(fig, plt, path, 110)


def _drift_bars(plt, rows: list[dict], path, *, title: str, smoke: bool) -> Path:
    rows = [r for r in rows if r.get("rel_l2") is not None]
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.4 * max(1, len(rows))), constrained_layout=True)
    mixed = len({r.get("steps") for r in rows}) > 1  # say the step count per bar only where it varies
    names = [r["policy"] + (f" ({r.get('steps')} steps)" if mixed else "") for r in rows][::-1]  # table order
    vals = [r["rel_l2"] if math.isfinite(r["rel_l2"]) else 0.0 for r in rows][::-1]
    ax.barh(names, vals, color=["C1" if n.startswith("mode:") else "C0" for n in names])
    for i, r in enumerate(rows[::-1]):
        v = r["rel_l2"]
        ax.annotate(f"{v:.3g}" if math.isfinite(v) else "failed", (vals[i], i), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.set_xlim(0, 1.15 * max(vals + [1e-12]))  # room for the value labels
    ax.set_xlabel("final-latent rel. L2 vs control (lower: closer)"
                  + ("" if mixed or not rows else f", {rows[0].get('steps')}-step runs"))
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(title, color="firebrick" if smoke else "black", fontsize=10)
    return _save(fig, plt, path, 110)


def write_drift_report(report: dict, out_dir) -> dict:
    """drift.json, drift.md and the plots of the parts present, in out_dir; returns paths by name."""
    from .capture import plot_layer_errors

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": write_json(finite_or_none(report), out / "drift.json"),
             "drift.png": drift_plot(report, out / "drift.png")}
    if any(r["trajectory"] for r in report["runs"]):
        paths["trajectory.png"] = trajectory_plot(report, out / "trajectory.png")
    if report.get("layer_errors"):
        paths["layers.png"] = out / "layers.png"
        plot_layer_errors(report["layer_errors"], paths["layers.png"],
                          title=f"wan-fp4 per-layer attention error, model {report['model']['name']}",
                          smoke=report["smoke_test"])
    if report.get("frames"):
        paths["frames.png"] = frames_plot(report, out / "frames.png")
    if report.get("speed"):
        title = f"wan-fp4 policies, model {report['model']['name']}"
        if not timings_meaningful(report["environment"]["device"]):
            title += "\nCPU: drift only (times are the reference emulation's, not the modes' speed)"
        paths["policies.png"] = policies_plot(report["mode_speed"] + report["policies"], out / "policies.png",
                                              title=title, smoke=report["smoke_test"],
                                              speed=timings_meaningful(report["environment"]["device"]))
    paths["md"] = out / "drift.md"
    paths["md"].write_text(drift_markdown(report))
    return paths
