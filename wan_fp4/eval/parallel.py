"""Direct-P under diffusers' own context parallelism: one device vs U x R devices.

A layout `UxR` is diffusers' `ContextParallelConfig(ulysses_degree=U, ring_degree=R)` on U*R ranks:
Ulysses (R = 1) gives each rank H/U whole heads over the whole sequence; ring (U = 1) gives each
rank a query chunk and merges the attention over the R key chunks by LSE; the hybrid (both > 1)
does Ulysses inside groups of U ranks and ring attention across the R groups.

Every rank builds the same random-weight Wan2.1 transformer (same seed) and the same inputs.
Rank 0 first runs each mode alone: the 1-device output and time per forward. Then, for each
layout, every rank takes a copy of the model, enables diffusers' context parallelism on it and runs
each mode again; rank 0 compares the output with its 1-device output of the same mode and reports
the speed-up t1 / tN, the efficiency t1 / (N * tN) and the relative L2 difference. The 1-device
run is shared by all layouts of one launch (`--layouts 4x1,2x2,1x4`).

Entry point: `main(argv)` (`scripts/bench_parallel.py`, under torchrun). `--model tiny-random
--device cpu` runs the same code on CPU processes (gloo): that is how CI checks the plumbing.
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from ..modes import MODES
from .metrics import rel_l2

# A tiny transformer for CPU runs: 4 heads so Ulysses can split them over 2 or 4 ranks.
TINY = dict(patch_size=(1, 2, 2), num_attention_heads=4, attention_head_dim=32, in_channels=16, out_channels=16,
            text_dim=32, freq_dim=256, ffn_dim=64, num_layers=2, cross_attn_norm=True,
            qk_norm="rms_norm_across_heads", rope_max_seq_len=64)

# Bound on the relative L2 difference of the N-device output from the 1-device output of the same
# mode. Ulysses computes whole heads over the whole sequence, so only BF16 rounding of GEMMs whose
# shapes changed remains, carried through the layers. As soon as R > 1 the keys are split: fp8 and
# direct-p then smooth and scale each key chunk on its own and merge by LSE, a different (equally
# valid) quantisation, so the bound is the mode's own quantisation error.
ULYSSES_TOLERANCE = 2e-2
RING_TOLERANCE = {"bf16": 2e-2, "fp8": 8e-2, "direct-p": 8e-2, "direct-p-fp4": 0.3}


class LayoutError(ValueError):
    """A layout that cannot run on this launch or this model; the message names the argument."""


@dataclass(frozen=True)
class Layout:
    ulysses: int
    ring: int

    @property
    def world(self) -> int:
        return self.ulysses * self.ring

    @property
    def kind(self) -> str:
        if self.ring == 1:
            return "ulysses"
        return "ring" if self.ulysses == 1 else "hybrid"

    @property
    def name(self) -> str:
        return f"{self.ulysses}x{self.ring}"

    def tolerance(self, mode: str) -> float:
        return ULYSSES_TOLERANCE if self.ring == 1 else RING_TOLERANCE[mode]


def parse_layouts(text: str) -> list[Layout]:
    """'4x1,2x2' -> [Layout(4, 1), Layout(2, 2)] (Ulysses degree x ring degree)."""
    layouts = []
    for item in (s.strip() for s in text.split(",")):
        u, sep, r = item.lower().partition("x")
        if not sep or not u.isdigit() or not r.isdigit() or int(u) < 1 or int(r) < 1:
            raise LayoutError(f"--layouts: {item!r} is not ULYSSESxRING with positive integers (e.g. 2x2)")
        layouts.append(Layout(int(u), int(r)))
    if len(set(layouts)) != len(layouts):
        raise LayoutError(f"--layouts: {text!r} names a layout twice")
    return layouts


def resolve_layouts(args, world: int) -> list[Layout]:
    """The layouts to run on `world` ranks: --layouts, or one from --ulysses/--ring (a missing
    degree is world / the other; neither given is Ulysses over every rank)."""
    if args.layouts is not None:
        layouts = parse_layouts(args.layouts)
    else:
        for flag, value in (("--ulysses", args.ulysses), ("--ring", args.ring)):
            if value is not None and (value < 1 or world % value):
                raise LayoutError(f"{flag} {value} does not divide the {world} ranks")
        ring = args.ring or (world // args.ulysses if args.ulysses else 1)
        layouts = [Layout(args.ulysses or world // ring, ring)]
    for layout in layouts:
        if layout.world != world:
            raise LayoutError(f"layout {layout.name} needs {layout.world} ranks, this launch has {world} "
                             "(torchrun --nproc_per_node)")
        if layout.world == 1:
            raise LayoutError("layout 1x1 is not context parallelism: give a Ulysses or ring degree > 1")
    return layouts


def check_layout(layout: Layout, heads: int, tokens: int) -> None:
    if heads % layout.ulysses:
        raise LayoutError(f"layout {layout.name}: Ulysses degree {layout.ulysses} does not divide the model's "
                         f"{heads} heads")
    if tokens % layout.world:
        raise LayoutError(f"layout {layout.name}: the {tokens} tokens do not split over {layout.world} ranks; "
                         "change --height/--width/--frames")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="bench_parallel.py", description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["1.3b", "14b", "tiny-random"], default="14b")
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--frames", type=int, default=81)
    ap.add_argument("--modes", default="bf16,direct-p")
    ap.add_argument("--ulysses", type=int, default=None, help="Ulysses degree (default: ranks / ring degree)")
    ap.add_argument("--ring", type=int, default=None, help="ring degree (default: ranks / Ulysses degree)")
    ap.add_argument("--layouts", default=None,
                    help="several ULYSSESxRING layouts sharing one 1-device run, e.g. 4x1,2x2,1x4")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.layouts is not None and (args.ulysses is not None or args.ring is not None):
        ap.error("--layouts names whole layouts: give it or --ulysses/--ring, not both")
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in args.modes:
        if m not in MODES:
            ap.error(f"--modes: unknown mode {m!r}; choose from {', '.join(MODES)}")
    if not args.modes:
        ap.error("--modes: name at least one mode")
    if args.height % 16 or args.width % 16:
        ap.error("--height and --width must be multiples of 16")
    if args.reps < 1 or args.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0")
    return args


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_forwards(transformer, inputs, mode, warmup, reps, device, barrier):
    """Median seconds of one forward in `mode`, and the output of the last one (float32, on CPU)."""
    import wan_fp4

    handle = wan_fp4.enable(transformer, mode=mode)
    try:
        times, out = [], None
        with torch.no_grad():
            for i in range(warmup + reps):
                barrier()
                _sync(device)
                t0 = time.perf_counter()
                out = transformer(**inputs)[0]
                _sync(device)
                barrier()
                if i >= warmup:
                    times.append(time.perf_counter() - t0)
        return statistics.median(times), out.float().cpu()
    finally:
        handle.disable()


def parallel_copy(transformer, layout: Layout):
    """A copy of `transformer` with diffusers' context parallelism for `layout` enabled (diffusers
    cannot disable it again, so each layout gets its own copy)."""
    from diffusers import ContextParallelConfig

    from ..backend import set_attention_backend

    model = copy.deepcopy(transformer)
    if layout.ring > 1:
        # ring attention merges chunks by LSE, which diffusers' native backend does not return:
        # bf16 calls go through our backend too (its bf16 mode is exact attention with an LSE)
        set_attention_backend(model, "direct_p")
    model.enable_parallelism(config=ContextParallelConfig(ulysses_degree=layout.ulysses, ring_degree=layout.ring))
    return model


def table(result) -> str:
    lines = ["| layout (Ulysses x ring) | mode | 1 device s/forward | N devices s/forward | speed-up | efficiency "
             "| rel-L2 vs 1 device (bound) |", "|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        verdict = "ok" if r["match"] else "MISMATCH"
        lines.append(f"| {r['layout']} ({r['parallelism']}, {r['world']} devices) | {r['mode']} | {r['t1_s']:.3f} "
                     f"| {r['tN_s']:.3f} | {r['speedup']:.2f}x | {100 * r['efficiency']:.0f}% "
                     f"| {r['rel_l2_vs_1_device']:.2e} ({r['tolerance']:g}, {verdict}) |")
    return "\n".join(lines)


def _refuse(rank, exc) -> int:
    if rank == 0:
        print(f"bench_parallel.py: error: {exc}", file=sys.stderr, flush=True)
    return 2


def run(args) -> int:
    from ..pipelines.random import CONFIGS, build_random_transformer
    from .forward_inputs import Geometry, make_inputs

    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', rank))}" if args.device == "cuda" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    try:
        layouts = resolve_layouts(args, world)
    except LayoutError as exc:
        return _refuse(rank, exc)
    config = TINY if args.model == "tiny-random" else CONFIGS[args.model]
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    transformer = build_random_transformer(config, device=device, dtype=dtype, seed=0)
    geom = Geometry(args.height, args.width, args.frames, text_tokens=16 if args.model == "tiny-random" else 512)
    inputs = make_inputs(transformer, geom, device, seed=1)
    tokens = geom.tokens(transformer)
    try:
        for layout in layouts:
            check_layout(layout, config["num_attention_heads"], tokens)
    except LayoutError as exc:
        return _refuse(rank, exc)

    single = {}
    if rank == 0:  # 1 device: rank 0 alone, the others wait
        for mode in args.modes:
            single[mode] = timed_forwards(transformer, inputs, mode, args.warmup, args.reps, device, lambda: None)
            print(f"[1 device] {mode}: {single[mode][0]:.3f} s/forward", flush=True)
    dist.barrier()

    rows = []
    for layout in layouts:
        model = parallel_copy(transformer, layout)
        for mode in args.modes:
            seconds, out = timed_forwards(model, inputs, mode, args.warmup, args.reps, device, dist.barrier)
            if rank == 0:
                t1, ref = single[mode]
                err, bound = rel_l2(out, ref), layout.tolerance(mode)
                rows.append({"layout": layout.name, "ulysses": layout.ulysses, "ring": layout.ring,
                             "parallelism": layout.kind, "world": world, "mode": mode, "t1_s": t1, "tN_s": seconds,
                             "speedup": t1 / seconds, "efficiency": t1 / (world * seconds),
                             "rel_l2_vs_1_device": err, "tolerance": bound, "match": err <= bound})
                print(f"[{layout.name} {layout.kind}] {mode}: {seconds:.3f} s/forward, rel-L2 vs 1 device "
                      f"{err:.2e}", flush=True)
        del model
        gc.collect()  # the copy's modules reference each other: free its weights before the next copy
        if device.type == "cuda":
            torch.cuda.empty_cache()

    if rank == 0:
        result = {"model": args.model, "weights": "random (not a quality figure)", "tokens": tokens,
                  "geometry": [args.height, args.width, args.frames], "world": world,
                  "layouts": [layout.name for layout in layouts],
                  "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                  "torch": torch.__version__, "command": " ".join(sys.argv), "rows": rows,
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        print(table(result), flush=True)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(result, indent=1))
    return 1 if rank == 0 and not all(r["match"] for r in rows) else 0


def main(argv=None) -> int:
    args = parse_args(argv)
    dist.init_process_group(backend="nccl" if args.device == "cuda" else "gloo")
    try:
        code = run(args)
        dist.barrier()
        return code
    finally:
        dist.destroy_process_group()
