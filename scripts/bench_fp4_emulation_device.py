"""Time the Triton direct-p-fp4 emulation (wan_fp4.kernels.fp4_emulation) on a GPU.

    PYTHONUNBUFFERED=1 python scripts/bench_fp4_emulation_device.py [--out DIR] [--budget-s 170]

Correctness is `wan-fp4 check --kernels fp4-emulation` (wan_fp4.eval.device_check); run it first.
Kernel only (operands prepared outside), triton.testing.do_bench median, TFLOP/s = 4 B H S^2 D / t,
at B1 H12 S7680, B1 H12 S32760, B1 H40 S32760 D128; torch SDPA BF16 for context; a few launch
configurations at S7680 while the time budget lasts. The table is printed last; JSON is written
to --out after every step.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for wan_fp4

from wan_fp4.eval.device_check import kmean_inputs  # noqa: E402
from wan_fp4.eval.timing import run_steps  # noqa: E402


def time_shape(b, s, h, d, results, configs):
    from triton.testing import do_bench

    q, k, v = kmean_inputs(b, s, s, h, d, "cuda", seed=s + h)
    flops = 4.0 * b * h * s * s * d
    torch.cuda.synchronize()
    t0 = time.time()
    qh, kh, vh, m = emu.prepare_operands(q, k, v)
    torch.cuda.synchronize()
    prep_s = time.time() - t0
    out = torch.empty(b, s, h, d, device="cuda")
    lse = torch.empty(b, h, s, device="cuda")
    rows = []
    for cfg in configs:
        fn = lambda: emu.launch(qh, kh, vh, m, out, lse, skv=s, d=d, scale=1 / math.sqrt(d),  # noqa: E731
                                affine=FP4Params().affine, **cfg)
        try:
            fn()  # compile outside the timing
            ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
        except Exception as exc:
            print(f"[time] config {cfg} failed: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        rows.append({"shape": f"B{b} H{h} S{s} D{d}", "what": f"emulation {cfg or 'default'}",
                     "ms": ms, "tflops": flops / (ms * 1e-3) / 1e12, "prepare_s_once": prep_s})
        print(f"[time] {rows[-1]}")
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)  # noqa: E731
    ms = do_bench(sdpa, warmup=25, rep=100, return_mode="median")
    rows.append({"shape": f"B{b} H{h} S{s} D{d}", "what": "torch SDPA BF16 (context)", "ms": ms,
                 "tflops": flops / (ms * 1e-3) / 1e12, "prepare_s_once": float("nan")})
    print(f"[time] {rows[-1]}")
    results.setdefault("timing", []).extend(rows)
    del q, k, v, qh, kh, vh, m, out, lse, qt, kt, vt
    torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--budget-s", type=float, default=170.0, help="skip optional steps after this")
    args = ap.parse_args()

    global torch, emu, FP4Params
    import torch
    import triton

    from wan_fp4.kernels import fp4_emulation as emu
    from wan_fp4.modes import FP4Params

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "torch": torch.__version__, "triton": triton.__version__,
               "device": torch.cuda.get_device_name(), "command": " ".join(sys.argv)}
    print(json.dumps(results))
    t0 = time.time()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    table = []
    steps = [
        ("time S7680", lambda: table.extend(time_shape(1, 7680, 12, 128, results, [{}]))),
        ("time S32760 H12", lambda: table.extend(time_shape(1, 32760, 12, 128, results, [{}]))),
        ("time S32760 H40", lambda: table.extend(time_shape(1, 32760, 40, 128, results, [{}]))),
        ("sweep S7680", lambda: table.extend(time_shape(1, 7680, 12, 128, results, [
            {"ladder": False}, {"num_stages": 3}, {"block_m": 64, "num_warps": 4}, {"num_warps": 4},
            {"reshape": False}]))),
    ]
    past_budget = lambda name: (f"past the {args.budget_s:.0f} s budget"  # noqa: E731
                                if name.startswith("sweep") and time.time() - t0 > args.budget_s else None)
    run_steps(steps, results, out_dir / "fp4_emulation_device.json", t0, skip=past_budget)

    print()
    print(f"{results['date']} {results['device']}, torch {results['torch']}, triton {results['triton']}; "
          f"kernel only (operands prepared outside), do_bench median; N(0,1) BF16 inputs; "
          f"TFLOP/s = 4 B H S^2 D / t")
    print("| shape | what | ms | TFLOP/s | prepare (s, once) |")
    print("|---|---|---|---|---|")
    for r in table:
        print(f"| {r['shape']} | {r['what']} | {r['ms']:.2f} | {r['tflops']:.0f} | {r['prepare_s_once']:.2f} |")
    print(f"failures: {results.get('failures', [])}; total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
