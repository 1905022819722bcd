#!/usr/bin/env python3
"""Train the embedded model (VAE, then transformer + text encoder) on the procedural world.

Resumable: each call advances the state in --state for --budget-s seconds, then exports the
current pipeline (EMA weights, shipped precision) and, with --eval, scores prompt accuracy.

    python scripts/train_tiny.py --state /tmp/wanfp4_train --budget-s 480 --out $OUT --eval
    python scripts/train_tiny.py --state /tmp/new --init-from DIR ...  # a lost state, from an export
    python scripts/train_tiny.py --state S --budget-s 0 --decoder-s 200 ...  # sharpen the decoder
    python scripts/train_tiny.py --plot OUT/history.json              # OUT/losses.png, on any machine
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wan_fp4.pipelines import trained, training, world  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--state", help="training state directory (created; resumed if present)")
    ap.add_argument("--budget-s", type=float, default=480.0, help="wall-clock seconds of training this call")
    ap.add_argument("--max-steps", type=int, help="stop the transformer at this step")
    ap.add_argument("--out", help="write the exported pipeline (two tar files), history.json and eval here")
    ap.add_argument("--eval", action="store_true", help="score prompt accuracy of the export (GPU)")
    ap.add_argument("--eval-modes", default="bf16", help="attention modes to score, comma-separated")
    ap.add_argument("--device", help="torch device (default cuda if available)")
    ap.add_argument("--init-from", help="an exported pipeline directory (with history.json beside it, if "
                                        "any) to start an empty state from")
    ap.add_argument("--decoder-s", type=float, default=0.0,
                    help="then fine-tune the VAE's decoder alone for this many seconds (latents unchanged)")
    ap.add_argument("--smoke", action="store_true", help="a tiny configuration that runs in a minute on a CPU")
    ap.add_argument("--compile", default="", metavar="BACKEND",
                    help="torch.compile the transformer's training forward with this backend (e.g. inductor)")
    ap.add_argument("--plot", metavar="HISTORY_JSON",
                    help="only plot the loss curves of a history.json to losses.png beside it (needs matplotlib, "
                         "which the GPU machine lacks)")
    args = ap.parse_args(argv)
    if args.plot:
        print(training.plot_losses(json.loads(Path(args.plot).read_text()), Path(args.plot).with_name("losses.png")))
        return 0
    if not args.state:
        ap.error("--state is required (unless --plot)")

    started = time.time()
    config = training.SMOKE_CONFIG if args.smoke else training.TrainConfig()
    config = dataclasses.replace(config, compile_backend=args.compile)
    trainer = training.Trainer(args.state, config, device=args.device, log=lambda m: print(m, flush=True))
    if args.init_from:
        past = Path(args.init_from).parent / "history.json"
        trainer.init_from(args.init_from, json.loads(past.read_text()) if past.is_file() else None)
    history = trainer.run(args.budget_s, args.max_steps)
    if args.decoder_s > 0:
        trainer.finetune_decoder(args.decoder_s)
    summary = {"command": shlex.join([sys.executable] + sys.argv), "stage": trainer.stage,
               "seconds": round(time.time() - started, 1), "config": dataclasses.asdict(trainer.config),
               **training.loss_summary(history)}
    print(json.dumps(summary), flush=True)
    if not args.out:
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "history.json").write_text(json.dumps(history))
    if trainer.stage == "vae" or not history["transformer"]:  # nothing trained to export yet
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        export = training.save_pipeline(trainer.pipeline(), Path(tmp) / "tiny")
        # Files come back from the GPU machine at most 16 MiB each: the transformer on its own.
        with tarfile.open(out / "transformer.tar", "w") as tar:
            tar.add(export / "transformer", arcname="transformer")
        with tarfile.open(out / "rest.tar", "w") as tar:
            for item in export.iterdir():
                if item.name != "transformer":
                    tar.add(item, arcname=item.name)
        if args.eval:
            summary["eval"] = evaluate(export, args.eval_modes.split(","), args.device, args.smoke)
    summary["seconds"] = round(time.time() - started, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary.get("eval", {}), indent=1), flush=True)
    return 0


def evaluate(export: Path, modes, device, smoke: bool = False) -> dict:
    import torch

    import wan_fp4
    from wan_fp4.eval import adherence
    from wan_fp4.pipelines import load_pipeline

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    pipe = load_pipeline(str(export), device=device, dtype=torch.bfloat16)
    pipe.set_progress_bar_config(disable=True)
    geometry = {k: trained.DEFAULTS[k] for k in ("height", "width", "frames")}
    if smoke:
        geometry, prompts, steps = {"height": 32, "width": 32, "frames": 5}, world.prompt_set()[:2], 2
    else:
        prompts, steps = world.prompt_set(), trained.DEFAULTS["steps"]
    results = {}
    for mode in modes:
        handle = wan_fp4.enable(pipe, mode=mode) if mode != "bf16" else None
        rows = adherence.generate_and_read(pipe, prompts, seeds=(0, 1), steps=steps, **geometry)
        if handle is not None:
            wan_fp4.disable(pipe)
        results[mode] = {"accuracy": adherence.accuracy(rows),
                         "misses": [r for r in rows if not r["all"]][:12]}
    return results


if __name__ == "__main__":
    sys.exit(main())
