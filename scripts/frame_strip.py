#!/usr/bin/env python3
"""Draw a frame strip of the embedded trained model: a few prompts, bf16 and direct-p side by side.

    python scripts/frame_strip.py --out docs/frame_strip.png

On a CPU, direct-p runs through the reference (wan_fp4.reference), the numerics the GPU kernels
follow; on a GPU through the kernels. Library: wan_fp4.eval.strip.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_PROMPTS = ("a red ball moving right", "a blue square moving up", "a yellow ball moving left",
                   "a green square moving down")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="PNG path")
    ap.add_argument("--model", default="tiny", help="model name or directory (default: the embedded trained model)")
    ap.add_argument("--prompts", default="|".join(DEFAULT_PROMPTS), help="prompts separated by '|'")
    ap.add_argument("--modes", default="bf16,direct-p", help="comma-separated attention modes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shown", type=int, default=5, help="frames shown per video")
    ap.add_argument("--device", help="torch device (default cuda if available)")
    args = ap.parse_args(argv)

    import torch

    from wan_fp4.eval import strip
    from wan_fp4.pipelines import load_pipeline, model_info

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    info = model_info(args.model)
    missing = [k for k in ("height", "width", "frames", "steps") if k not in info.defaults]
    if missing:
        ap.error(f"--model {args.model!r} sets no default {', '.join(missing)} ({info.defaults_source}); "
                 "the strip draws at the geometry a model was trained at")
    geometry = {k: info.defaults[k] for k in ("height", "width", "frames", "steps")}
    prompts = [p.strip() for p in args.prompts.split("|") if p.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    pipe = load_pipeline(args.model, device=device, dtype=torch.bfloat16)
    pipe.set_progress_bar_config(disable=True)
    started = time.time()
    videos = strip.generate_modes(pipe, prompts, modes, seed=args.seed, **geometry,
                                  progress=lambda mode: print(f"{mode}: done ({time.time() - started:.0f} s)",
                                                              flush=True))
    kernel = "the reference" if device == "cpu" else "the GPU kernels"
    title = (f"{info.name}: {geometry['height']}x{geometry['width']}, {geometry['frames']} frames, "
             f"{geometry['steps']} steps, seed {args.seed}, on {device} (low-precision modes through {kernel})")
    print(strip.plot_strip(videos, prompts, args.out, shown=args.shown, title=title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
