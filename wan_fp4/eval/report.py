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


def _finite_or_none(obj):
    """JSON has no NaN/inf: a non-finite result (e.g. a mode that overflowed) is written as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_none(v) for v in obj]
    return obj


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return f"**{x}**"
    if x == 0:
        return "0"
    if abs(1 - x) < 1e-3 and x <= 1:  # cosines: show how far from 1, the informative part
        return f"1 - {1 - x:.3e}" if x != 1 else "1"
    return f"{x:.4g}" if 1e-3 <= abs(x) < 1e4 else f"{x:.3e}"


def drift_markdown(report: dict) -> str:
    """The drift report as Markdown: smoke banner, settings, one row per (steps, mode)."""
    s = report["settings"]
    lines = ["# wan-fp4 drift report", ""]
    if report["smoke_test"]:
        lines += [f"> **{report['label']}**", ""]
    lines += [f"- model: `{report['model']['name']}` ({report['model']['description']})",
              f"- control: {report['reference']}",
              f"- prompt: \"{s['prompt']}\" (negative: \"{s['negative_prompt']}\")",
              f"- seed {s['seed']}, guidance {s['guidance']}, {s['height']}x{s['width']}, {s['frames']} frames "
              f"({s['tokens']} self-attention tokens), sampler {s['sampler']}, dtype {s['dtype']}, "
              f"cross-attention low precision: {s['cross_attention']}",
              f"- created {report['created']} on {report['environment']['device']} "
              f"({report['environment'].get('device_name')})", "",
              "Final latent vs the control (cosine similarity and relative L2 = ||x - ref|| / ||ref||, float64):",
              ""]
    timed = timings_meaningful(report["environment"]["device"])
    lines += ["| steps | mode | cosine | rel. L2 | max abs | kernels (calls) |" + (" time (s) |" if timed else ""),
              "|---:|---|---:|---:|---:|---|" + ("---:|" if timed else "")]
    for r in report["runs"]:
        kernels = "; ".join(f"{k}: {n}" for k, n in r["kernels"].items()) or "-"
        lines.append(f"| {r['steps']} | {r['mode']} | {_fmt(r['cosine'])} | {_fmt(r['rel_l2'])} | "
                     f"{_fmt(r['max_abs'])} | {kernels} |" + (f" {r['seconds']:.2f} |" if timed else ""))
    if not timed:
        lines += ["", CPU_TIMING_NOTE]
    lines += ["", "![drift vs steps](drift.png)", "", "Command:", "", "```", report["command"], "```", "",
              "Every number, the per-step trajectories and the environment are in `drift.json`.", ""]
    return "\n".join(lines)


def drift_plot(report: dict, path) -> Path:
    """drift.png: relative L2 and 1 - cosine of the final latent against step count, per mode."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on CI or GPU hosts
    import matplotlib.pyplot as plt

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
    title = f"wan-fp4 latent drift, model {report['model']['name']}"
    if report["smoke_test"]:
        title += "\nSMOKE TEST (random weights): not a quality figure"
    fig.suptitle(title, color="firebrick" if report["smoke_test"] else "black")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_drift_report(report: dict, out_dir) -> dict:
    """drift.json, drift.md and drift.png in out_dir; returns their paths by kind."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": write_json(_finite_or_none(report), out / "drift.json"),
             "png": drift_plot(report, out / "drift.png")}
    paths["md"] = out / "drift.md"
    paths["md"].write_text(drift_markdown(report))
    return paths
