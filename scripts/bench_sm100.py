"""Time the sm100a Direct-P FP4 kernel on a B200/GB200 next to FA4 BF16 and torch SDPA BF16.

    python scripts/bench_sm100.py [--affine A B] [--json out.json]

Correctness is `wan-fp4 check --kernels sm100-cute` (wan_fp4.eval.device_check); run it first.
CUDA-event median over repeats after warm-up, same run, same inputs: this kernel on prepared
operands ("kernel"), with the quantisation pre-pass ("e2e"), FA4 BF16 when flash-attn-4 is
installed, and torch SDPA BF16. TFLOP/s = 4 B H Sq Skv D / t.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from wan_fp4.kernels import sm100  # noqa: E402
from wan_fp4.kernels.sm100.launch import launch  # noqa: E402
from wan_fp4.modes import FP4Params  # noqa: E402

BENCH_SHAPES = [(1, 7680, 7680, 12), (1, 7680, 7680, 40), (1, 4096, 4096, 24), (1, 32768, 32768, 24)]


def _inputs(b, sq, skv, h, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    mk = lambda s: torch.randn(b, s, h, 128, device="cuda", dtype=torch.bfloat16, generator=g)  # noqa: E731
    return mk(sq), mk(skv), mk(skv)


def _time(fn, warmup=10, reps=50):
    for _ in range(warmup):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


def bench(fp4: FP4Params) -> list[dict]:
    rows = []
    for b, sq, skv, h in BENCH_SHAPES:
        q, k, v = _inputs(b, sq, skv, h, seed=7)
        ops = sm100.prepare_operands(q, k, v)
        args = sm100.build_launch_args(ops, 1 / math.sqrt(128), fp4,
                                       torch.cuda.get_device_properties(0).multi_processor_count)
        out = torch.empty(q.shape, dtype=torch.bfloat16, device="cuda")
        denom = torch.empty(b * h, sq, dtype=torch.float32, device="cuda")
        flops = 4 * b * h * sq * skv * 128
        timings = {"direct-p-fp4 kernel": _time(lambda: launch(ops, args, out, denom)),
                   "direct-p-fp4 e2e": _time(lambda: sm100.sm100_attention(q, k, v, fp4=fp4))}
        try:
            from flash_attn.cute import flash_attn_func
            timings["FA4 bf16"] = _time(lambda: flash_attn_func(q, k, v))
        except ImportError:
            print("flash-attn-4 not installed: FA4 BF16 not timed")
        qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
        timings["SDPA bf16"] = _time(lambda: torch.nn.functional.scaled_dot_product_attention(qh, kh, vh))
        for name, ms in timings.items():
            rows.append(dict(shape=[b, sq, skv, h], kernel=name, ms=ms, tflops=flops / ms / 1e9))
            print(f"bench {[b, sq, skv, h]} {name:22s} {ms:9.4f} ms {flops / ms / 1e9:8.1f} TFLOP/s", flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--affine", type=float, nargs=2, default=None, metavar=("A", "B"))
    p.add_argument("--json", default=None, help="write every number here")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: this script needs a B200/GB200 (sm_100)")
        return 2
    dev = torch.cuda.get_device_name(0)
    cap = torch.cuda.get_device_capability(0)
    print(f"device: {dev} (sm_{cap[0]}{cap[1]}), torch {torch.__version__}")
    fp4 = FP4Params() if a.affine is None else FP4Params(affine=tuple(a.affine))
    result = dict(device=dev, capability=list(cap), affine=list(fp4.affine), bench=bench(fp4))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
