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
    """Each part of the pre-pass, and the whole, with the kernels' launch settings varied
    (num_warps), to see where its time goes."""
    import triton
    import triton.testing as tt

    from wan_fp4.kernels.sm90.layout import SIGMA

    for b, h, s in ((1, 12, 32760), (1, 40, 32760), (1, 40, 75600)):
        d = 128
        q, k, v = _rand(b, s, h, d), _rand(b, s, h, d), _rand(b, s, h, d)
        s_pad = -(-s // 128) * 128
        nb = s_pad // 128
        f8 = torch.float8_e4m3fn
        q8 = torch.empty(b, h, s_pad, d, dtype=f8, device="cuda")
        sc = torch.empty(b, h, nb, dtype=torch.float32, device="cuda")
        vt = torch.empty(b, h, d + 8, s_pad, dtype=torch.uint8, device="cuda")
        vs = torch.empty(b, h, d, dtype=torch.float32, device="cuda")
        k_mean, v_amax = prepare._column_stats_triton(k, v)
        from wan_fp4.reference import key_mean

        same = torch.equal(k_mean, key_mean(k)) and torch.equal(v_amax, prepare._v_amax(v))
        print(f"B{b} H{h} S{s}  column stats == reference key_mean / torch amax (bitwise): {same}", flush=True)
        perm = torch.tensor(SIGMA, dtype=torch.int32, device="cuda")
        parts = {"column stats (K mean, V amax)": lambda: prepare._column_stats_triton(k, v)}
        for nw in (4, 8):
            meta = dict(D=d, BLOCK_D=d, BLOCK_S=128, HW_CVT=True, num_warps=nw)
            parts[f"quantise Q rows, num_warps={nw}"] = lambda meta=meta: prepare._quant_rows_kernel[(nb, b * h)](
                q, sc, q8, sc, s, h, nb, *q.stride(), HAS_MEAN=False, **meta)
            parts[f"quantise K rows (mean), num_warps={nw}"] = lambda meta=meta: prepare._quant_rows_kernel[(nb, b * h)](
                k, k_mean, q8, sc, s, h, nb, *k.stride(), HAS_MEAN=True, **meta)
            parts[f"quantise V^T (sm90 layout), num_warps={nw}"] = lambda meta=meta: prepare._quant_v_kernel[(nb, b * h)](
                v, v_amax, perm, vt, vs, s, h, s_pad, *v.stride(), PERM=True, ONES_ROWS=8,
                ONE_CODE=prepare.E4M3_ONE, **meta)
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
