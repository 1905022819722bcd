"""One launch of each thing worth profiling on the H200, for Nsight Compute to wrap:

    ncu --set full -k regex:'Sm90Attention|nvjet|gemm' -o prof python scripts/profile_sm90_device.py launch
    python scripts/profile_sm90_device.py prepass     # times the quantisation pre-pass, part by part

launch: the sm90 direct-p kernel at B1 H12 S32760 D128 on prepared operands (the default config,
  then each --configs JSON; prebuilt kernels, from --prebuilt-dir if given), then a cuBLAS FP8
  GEMM 8192^3 (the tensor-core reference the kernel is read against: tensor-pipe activity, issue
  stalls, clocks).
prepass: triton.testing.do_bench medians of the pre-pass's kernels (column statistics, the three
  quantise kernels at two warp counts) and of the whole pre-pass, at the Wan shapes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from wan_fp4.kernels import prepare, sm90  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402


def _rand(b, s, h, d):
    return torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)


def launch(configs):
    b, h, s, d = 1, 12, 32760, 128
    q, k, v = _rand(b, s, h, d), _rand(b, s, h, d), _rand(b, s, h, d)
    ops = prepare.prepare_fp8(q, k, v, **v_layout_args("direct-p"))
    out = torch.empty(b, s, h, d, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(b, h, s, dtype=torch.float32, device="cuda")
    for config in configs:
        sm90.launch(ops, "direct-p", d, config=config, out=out, lse=lse, prebuilt=True)
    from wan_fp4.eval.bench_attention import fp8_gemm

    fp8_gemm()[0]()
    torch.cuda.synchronize()


def prepass():
    """The pre-pass's column statistics, and the whole pre-pass, to see where its time goes."""
    import triton.testing as tt

    for b, h, s in ((1, 12, 32760), (1, 40, 32760), (1, 40, 75600)):
        d = 128
        q, k, v = _rand(b, s, h, d), _rand(b, s, h, d), _rand(b, s, h, d)
        k_mean, v_amax = prepare._column_stats_triton(k, v)
        from wan_fp4.reference import key_mean

        same = torch.equal(k_mean, key_mean(k)) and torch.equal(v_amax, prepare._v_amax(v))
        print(f"B{b} H{h} S{s}  column stats == reference key_mean / torch amax (bitwise): {same}", flush=True)
        parts = {"column stats (K mean, V amax: partials + totals)": lambda: prepare._column_stats_triton(k, v)}
        parts["whole pre-pass, sm90 direct-p layout"] = lambda: prepare.prepare_fp8(q, k, v, **v_layout_args("direct-p"))
        for name, fn in parts.items():
            ms = tt.do_bench(fn, warmup=25, rep=200, return_mode="median")
            print(f"B{b} H{h} S{s}  {name:44s} {ms:.3f} ms", flush=True)
        del q, k, v
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["launch", "prepass"])
    ap.add_argument("--configs", nargs="*", type=json.loads, default=[])
    ap.add_argument("--prebuilt-dir", default=None)
    args = ap.parse_args()
    if args.prebuilt_dir:
        from pathlib import Path

        from wan_fp4.kernels.sm90 import aot

        aot.PREBUILT.directory = Path(args.prebuilt_dir).resolve()
    launch([{}] + args.configs) if args.what == "launch" else prepass()


if __name__ == "__main__":
    main()
