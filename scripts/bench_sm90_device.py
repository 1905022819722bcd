"""Time the sm90 CuTe kernel on an H100/H200 next to torch SDPA (cuDNN BF16), in one run.

    python scripts/bench_sm90_device.py [--quick] [--configs '{"pingpong": true}' ...] [--prebuilt-dir DIR]

Correctness is `wan-fp4 check --kernels sm90-cute` (wan_fp4.eval.device_check); run it first.
triton.testing.do_bench median; TFLOP/s = 4 B H S^2 D / t. "kernel" times the attention kernel on
prepared operands; "e2e" is sm90_attention (quantisation pre-pass + kernel). The FP8 tensor-core
ceiling is measured in the same run: cuBLAS FP8 GEMM (torch._scaled_mm) 8192^3. --prebuilt-dir:
configs built ahead of time (build_prebuilt.py --out DIR); without the DSL every config must be
prebuilt.
"""
from __future__ import annotations

import argparse
import faulthandler
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from wan_fp4.kernels import sm90  # noqa: E402
from wan_fp4.kernels.prepare import prepare_fp8  # noqa: E402
from wan_fp4.kernels.sm90 import aot  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

PREBUILT = None  # launch's prebuilt argument: None = AOT kernel if usable, else JIT


def _rand(b, s, h, d, gen):
    return torch.randn(b, s, h, d, generator=gen, device="cuda", dtype=torch.float32).to(torch.bfloat16)


def do_bench(shapes, configs):
    import triton.testing as tt

    gen = torch.Generator(device="cuda").manual_seed(7)
    rows = []

    def bench(label, name, flops, fn):
        faulthandler.dump_traceback_later(120, exit=True)
        ms = tt.do_bench(fn, warmup=25, rep=150, return_mode="median")
        rows.append((label, name, ms, flops / ms / 1e9))
        print(f"{label:16s} {name:52s} {ms:9.3f} ms {flops / ms / 1e9:7.1f} TFLOP/s", flush=True)

    from wan_fp4.eval.bench_attention import fp8_gemm

    gemm, gemm_flops = fp8_gemm()
    bench("-", "cuBLAS FP8 GEMM 8192^3 (tensor-core ceiling)", gemm_flops, gemm)
    for b, h, s in shapes:
        d = 128
        q, k, v = _rand(b, s, h, d, gen), _rand(b, s, h, d, gen), _rand(b, s, h, d, gen)
        flops = 4 * b * h * s * s * d
        label = f"B{b} H{h} S{s}"
        qt, kt, vt_ = (x.transpose(1, 2) for x in (q, k, v))
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            bench(label, "torch SDPA cuDNN BF16", flops,
                  lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt_))
        for mode in sm90.SUPPORTED_MODES:
            ops = prepare_fp8(q, k, v, **v_layout_args(mode))
            out = torch.empty(b, s, h, d, dtype=torch.bfloat16, device="cuda")
            lse = torch.empty(b, h, s, dtype=torch.float32, device="cuda")
            for cfg in filter(lambda cfg: sm90.applies(mode, cfg), configs):
                bench(label, f"sm90 {mode} kernel {aot.kernel_name(mode, d, cfg)[12:]}", flops,
                      lambda: sm90.launch(ops, mode, d, config=cfg, out=out, lse=lse, prebuilt=PREBUILT))
            del ops
        bench(label, "pre-pass, plain V^T", flops, lambda: prepare_fp8(q, k, v))
        bench(label, "pre-pass, V^T in the sm90 direct-p layout", flops,
              lambda: prepare_fp8(q, k, v, **v_layout_args("direct-p")))
        bench(label, "sm90 direct-p e2e (sm90_attention)", flops, lambda: sm90.sm90_attention(q, k, v, "direct-p"))
        bench(label, "sm90 fp8 e2e (sm90_attention)", flops, lambda: sm90.sm90_attention(q, k, v, "fp8"))
        del q, k, v, qt, kt, vt_
        torch.cuda.empty_cache()
    print("\n| shape | kernel | ms | TFLOP/s |\n|---|---|---|---|")
    for label, name, ms, tf in rows:
        print(f"| {label} | {name} | {ms:.3f} | {tf:.1f} |")


def main():
    global PREBUILT
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="bench only the first shape")
    ap.add_argument("--configs", nargs="*", type=json.loads, default=[],
                    help="extra kernel configs (JSON, over each mode's default) to time")
    ap.add_argument("--prebuilt-dir", type=Path, default=None,
                    help="load prebuilt kernels (all configs) from DIR (build_prebuilt.py --out DIR)")
    args = ap.parse_args()
    dsl = importlib.util.find_spec("cutlass") is not None
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), torch.cuda.get_device_name(),
          "torch", torch.__version__, "DSL installed:", dsl, flush=True)
    if args.prebuilt_dir is not None:
        aot.PREBUILT.directory = args.prebuilt_dir.resolve()
    if not dsl:
        PREBUILT = True  # without the DSL every config must be prebuilt: fail loudly, never skip
    shapes = [(1, 12, 32760), (1, 40, 32760), (1, 40, 75600)]
    do_bench(shapes[:1] if args.quick else shapes, [{}] + args.configs)


if __name__ == "__main__":
    main()
