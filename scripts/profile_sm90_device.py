"""One launch of each thing worth profiling on the H200, for Nsight Compute to wrap:

    ncu --set full -k regex:'Sm90Attention|nvjet|gemm' -o prof python scripts/profile_sm90_device.py launch
    python scripts/profile_sm90_device.py prepass     # times the quantisation pre-pass, part by part

launch: the sm90 direct-p kernel at B1 H12 S32760 D128 on prepared operands (the default config,
  then each --configs JSON; prebuilt kernels, from --prebuilt-dir if given), then a cuBLAS FP8 GEMM 8192^3 (the tensor-core reference the kernel is read
  against: tensor-pipe activity, issue stalls, clocks).
prepass: triton.testing.do_bench medians of the K mean, the V channel amax and the three quantise
  kernels, against the whole pre-pass, at the Wan shapes.
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
    n = 8192
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    bt = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    torch._scaled_mm(a, bt, one, one, out_dtype=torch.bfloat16, use_fast_accum=True)
    torch.cuda.synchronize()


def prepass():
    import triton.testing as tt

    from wan_fp4.reference import key_mean

    for b, h, s in ((1, 12, 32760), (1, 40, 32760), (1, 40, 75600)):
        q, k, v = _rand(b, s, h, 128), _rand(b, s, h, 128), _rand(b, s, h, 128)
        parts = {
            "K mean (float64 sum, torch)": lambda: key_mean(k),
            "V channel amax (torch aminmax)": lambda: prepare._v_amax(v),
            "whole pre-pass, sm90 direct-p layout": lambda: prepare.prepare_fp8(q, k, v, **v_layout_args("direct-p")),
        }
        for name, fn in parts.items():
            ms = tt.do_bench(fn, warmup=25, rep=200, return_mode="median")
            print(f"B{b} H{h} S{s}  {name:40s} {ms:.3f} ms", flush=True)


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
