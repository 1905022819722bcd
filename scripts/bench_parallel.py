#!/usr/bin/env python3
"""Direct-P under diffusers' own context parallelism, 1 GPU vs N GPUs (issue 6).

    torchrun --nproc_per_node=2 scripts/bench_parallel.py --model 14b --height 720 --width 1280 \
        --frames 81 --json $OUT/parallel.json

Every rank builds the same random-weight Wan2.1 transformer (same seed) and the same inputs.
Rank 0 first runs each mode alone on its device: the 1-device output and step time. Then every
rank enables diffusers' context parallelism (`transformer.enable_parallelism`, Ulysses by default,
ring with --ring) and runs each mode again; rank 0 compares the N-device output with its
1-device output of the same mode and reports step times and scaling efficiency
(t1 / (N * tN)). `--model tiny --device cpu` runs the same code on CPU processes (gloo), which is
how CI checks the plumbing.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import wan_fp4  # noqa: E402
from wan_fp4.eval.latency import Geometry, make_inputs  # noqa: E402
from wan_fp4.pipelines.random import CONFIGS, build_random_transformer  # noqa: E402

# A tiny transformer for CPU runs: 4 heads so Ulysses can split them over 2 or 4 ranks.
TINY = dict(patch_size=(1, 2, 2), num_attention_heads=4, attention_head_dim=32, in_channels=16, out_channels=16,
            text_dim=32, freq_dim=256, ffn_dim=64, num_layers=2, cross_attn_norm=True,
            qk_norm="rms_norm_across_heads", rope_max_seq_len=64)
# Tolerance of the N-device output against the 1-device output of the same mode (relative L2):
# the math is the same per token and per head (Ulysses computes whole heads over the whole
# sequence), so only BF16 rounding of GEMMs whose shapes changed remains, carried through the
# layers. Ring attention splits the keys: fp8/direct-p then smooth and scale each key chunk on
# its own and merge by LSE, a different (equally valid) quantisation, so it gets the
# quantisation error of the mode as its bound.
TOLERANCE = {"ulysses": 2e-2, "ring": {"bf16": 2e-2, "fp8": 8e-2, "direct-p": 8e-2, "direct-p-fp4": 0.3}}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["1.3b", "14b", "tiny"], default="14b")
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--frames", type=int, default=81)
    ap.add_argument("--modes", default="bf16,direct-p")
    ap.add_argument("--ring", action="store_true", help="ring attention instead of Ulysses")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in args.modes:
        if m not in wan_fp4.MODES:
            ap.error(f"--modes: unknown mode {m!r}; choose from {', '.join(wan_fp4.MODES)}")
    if args.height % 16 or args.width % 16:
        ap.error("--height and --width must be multiples of 16")
    return args


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_forwards(transformer, inputs, mode, warmup, reps, device, group_barrier):
    """Median seconds of one forward in `mode`, and the output of the last one (on CPU)."""
    handle = wan_fp4.enable(transformer, mode=mode)
    try:
        times, out = [], None
        with torch.no_grad():
            for i in range(warmup + reps):
                group_barrier()
                _sync(device)
                t0 = time.perf_counter()
                out = transformer(**inputs)[0]
                _sync(device)
                group_barrier()
                if i >= warmup:
                    times.append(time.perf_counter() - t0)
        return statistics.median(times), out.float().cpu()
    finally:
        handle.disable()


def rel_l2(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def main(argv=None):
    args = parse_args(argv)
    dist.init_process_group(backend="nccl" if args.device == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', rank))}" if args.device == "cuda" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    config = TINY if args.model == "tiny" else CONFIGS[args.model]
    heads = config["num_attention_heads"]
    if not args.ring and heads % world:
        sys.exit(f"Ulysses needs the {heads} heads to split over {world} ranks")
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    transformer = build_random_transformer(config, device=device, dtype=dtype, seed=0)
    if args.ring:
        # diffusers' native backend cannot return the LSE that ring attention merges with: route
        # bf16 calls through our backend too (its bf16 mode is exact attention with an LSE)
        from wan_fp4.backend import set_attention_backend

        set_attention_backend(transformer, "direct_p")
    geom = Geometry(args.height, args.width, args.frames, text_tokens=512 if args.model != "tiny" else 16)
    inputs = make_inputs(transformer, geom, device, seed=1)
    tokens = geom.tokens(transformer)
    if tokens % world:
        sys.exit(f"{tokens} tokens do not split over {world} ranks")

    # 1 device: rank 0 alone, the others wait.
    single = {}
    if rank == 0:
        for mode in args.modes:
            single[mode] = timed_forwards(transformer, inputs, mode, args.warmup, args.reps, device, lambda: None)
            print(f"[1 device] {mode}: {single[mode][0]:.3f} s/forward", flush=True)
    dist.barrier()

    from diffusers import ContextParallelConfig

    kind = "ring" if args.ring else "ulysses"
    cp = ContextParallelConfig(ring_degree=world) if args.ring else ContextParallelConfig(ulysses_degree=world)
    transformer.enable_parallelism(config=cp)
    rows = []
    for mode in args.modes:
        seconds, out = timed_forwards(transformer, inputs, mode, args.warmup, args.reps, device, dist.barrier)
        if rank == 0:
            t1, ref = single[mode]
            err = rel_l2(out, ref)
            bound = TOLERANCE[kind] if kind == "ulysses" else TOLERANCE[kind][mode]
            rows.append({"mode": mode, "t1_s": t1, f"t{world}_s": seconds, "speedup": t1 / seconds,
                         "efficiency": t1 / (world * seconds), "rel_l2_vs_1_device": err,
                         "tolerance": bound, "match": err <= bound})
            print(f"[{world} devices, {kind}] {mode}: {seconds:.3f} s/forward, rel-L2 vs 1 device {err:.2e}", flush=True)
    if rank == 0:
        result = {"model": args.model, "weights": "random (not a quality figure)", "tokens": tokens,
                  "geometry": [args.height, args.width, args.frames], "world": world, "parallelism": kind,
                  "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                  "torch": torch.__version__, "command": " ".join(sys.argv), "rows": rows,
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        print(f"| mode | 1 device s/forward | {world} devices ({kind}) s/forward | speed-up | efficiency | rel-L2 vs 1 device |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['mode']} | {r['t1_s']:.3f} | {r[f't{world}_s']:.3f} | {r['speedup']:.2f}x | "
                  f"{100 * r['efficiency']:.0f}% | {r['rel_l2_vs_1_device']:.2e} ({'ok' if r['match'] else 'MISMATCH'}) |")
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(result, indent=1))
    dist.barrier()
    dist.destroy_process_group()
    failed = rank == 0 and not all(r["match"] for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
