"""Check that torch.compile traces wan_fp4 cleanly on the real Wan2.1 architectures, every policy.

For each architecture (random weights, `pipelines.random`) and compile scope, every enable()
policy case of `compiled.POLICY_CASES` is compiled and run for a few denoising steps; a row passes
when dynamo made exactly the expected graphs (`compiled.expected_graphs`), no graph break and no
warning (a recompile-limit hit is one). The default backend "eager" runs dynamo alone: the same
trace, guards and graph count as inductor, without inductor's compile time. The shape is small
(the depth is what matters); exit status 1 when any row fails.

Entry point: `main(argv)`, used by `scripts/check_compile_device.py`.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from .compiled import COMPILE_MODES, SCOPES, CompileSettings, check_policies
from .forward_inputs import Geometry, make_inputs


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="check_compile_device", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1.3b,14b", help="comma-separated random:<size> architectures (default 1.3b,14b)")
    p.add_argument("--scopes", default=",".join(SCOPES), help=f"comma-separated compile scopes (default {','.join(SCOPES)})")
    p.add_argument("--backend", default="eager", choices=("eager", "aot_eager", "inductor"),
                   help="torch.compile backend (default eager: dynamo only)")
    p.add_argument("--mode", default="default", choices=COMPILE_MODES, help="inductor mode (with --backend inductor)")
    p.add_argument("--height", type=int, default=480)
    p.add_argument("--width", type=int, default=832)
    p.add_argument("--frames", type=int, default=5)
    p.add_argument("--steps", type=int, default=3, help="denoising steps per case (default 3)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--json", required=True, help="where to write the rows (JSON)")
    return p


def main(argv=None) -> int:
    from ..pipelines.random import CONFIGS, build_random_transformer

    args = build_parser().parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
    for s in sizes:
        if s not in CONFIGS:
            raise SystemExit(f"--sizes: unknown size {s!r}; known: {', '.join(CONFIGS)}")
    settings = [CompileSettings(args.mode, scope, args.backend) for scope in scopes]  # checks the values
    device = torch.device(args.device)
    geom = Geometry(args.height, args.width, args.frames)
    rows = []
    for size in sizes:
        t0 = time.perf_counter()
        transformer = build_random_transformer(CONFIGS[size], device, torch.bfloat16)
        inputs = make_inputs(transformer, geom, device)
        print(f"random:{size}: {transformer.config.num_layers} layers, built in {time.perf_counter() - t0:.0f} s, "
              f"{geom.tokens(transformer)} tokens", flush=True)
        for cs in settings:
            t0 = time.perf_counter()
            for row in check_policies(transformer, inputs, cs, steps=args.steps):
                row.update(model=f"random:{size}", layers=transformer.config.num_layers, scope=cs.scope,
                           backend=cs.backend, mode=cs.mode)
                rows.append(row)
                print(f"  {cs.scope:<6} {row['policy']:<16} graphs {row['graphs']} (expected "
                      f"{row['expected_graphs']}), breaks {row['graph_breaks']}, warnings {len(row['warnings'])}: "
                      f"{'ok' if row['ok'] else 'FAIL'}", flush=True)
                for why in row["graph_break_reasons"] + row["warnings"]:
                    print(f"      {why}", flush=True)
            print(f"  {cs.scope}: {time.perf_counter() - t0:.0f} s", flush=True)
        del transformer, inputs
        if device.type == "cuda":
            torch.cuda.empty_cache()
    with open(args.json, "w") as f:
        json.dump({"schema": "wan-fp4/compile-check/1", "device": str(device),
                   "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                   "torch": torch.__version__, "command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    failed = [r for r in rows if not r["ok"]]
    print(f"{len(rows) - len(failed)}/{len(rows)} ok; wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
