"""Time the Triton fp8 / direct-p path (prepare + attention kernel) on a GPU; measure its
accumulation variants.

    PYTHONUNBUFFERED=1 python scripts/bench_triton_device.py [--out DIR] [--sweep]
    python scripts/bench_triton_device.py --promote-sweep-only   # FP32-promotion variants only

Correctness is `wan-fp4 check --kernels triton` (wan_fp4.eval.device_check); run it first.
--sweep first measures the kernel's accumulation variants (PV_SPLIT x QK_SPLIT: accuracy against
the reference at B1 H12 S4097 and S32760, kernel time at B1 H40 S32760). Timing
(triton.testing.do_bench, median): prepare, kernel, prepare + kernel, torch SDPA BF16 (cuDNN
backend) at Wan shapes; TFLOP/s = 4 B H S^2 D / t. Table printed last, JSON in --out.
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
from wan_fp4.eval.metrics import rel_l2  # noqa: E402
from wan_fp4.eval.timing import run_steps  # noqa: E402


ALL_VARIANTS = [(pv, qk, 0) for pv in (False, True) for qk in (False, True)]
PROMOTE_VARIANTS = [(True, False, 0), (True, False, 64), (True, False, 32), (True, True, 0)]


def sweep_accumulation(results, variants=ALL_VARIANTS, modes=("fp8", "direct-p")):
    """Accuracy and speed of the kernel's accumulation variants (PV_SPLIT, QK_SPLIT, PROMOTE; see
    _tile and _dot in the kernel)."""
    from triton.testing import do_bench

    acc_shapes = [((1, 4097, 4097, 12, 128), slice(0, 4097)), ((1, 32760, 32760, 12, 128), slice(0, 1024))]
    for shape, rows in acc_shapes:
        b, sq, skv, h, d = shape
        q, k, v = kmean_inputs(b, sq, skv, h, d, "cuda", seed=sq + 17)
        prep = prepare.prepare_fp8(q, k, v, backend="triton")
        for mode in modes:
            ref = reference.attention(q[:, rows], k, v, mode)
            for pv, qk, pr in variants:
                out = torch.full_like(q, float("nan"))
                tri.attention_prepared(prep, mode, 1 / math.sqrt(d), out, pv_split=pv, qk_split=qk, promote=pr)
                err = rel_l2(out[:, rows], ref)
                results.setdefault("sweep_accuracy", []).append(
                    {"shape": list(shape), "mode": mode, "pv_split": pv, "qk_split": qk, "promote": pr,
                     "rel_l2_vs_reference": err})
                print(f"[sweep] {mode:8s} B{b} S{sq}/{skv} H{h} pv_split={pv!s:5} qk_split={qk!s:5} "
                      f"promote={pr:2d}: rel L2 vs ref {err:.2e}")
    b, s_, h, d = 1, 32760, 40, 128
    q, k, v = kmean_inputs(b, s_, s_, h, d, "cuda", seed=3)
    prep = prepare.prepare_fp8(q, k, v, backend="triton")
    out = torch.empty_like(q)
    flops = 4.0 * b * h * s_ * s_ * d
    for mode in modes:
        for pv, qk, pr in variants:
            fn = lambda: tri.attention_prepared(prep, mode, 1 / math.sqrt(d), out, pv_split=pv,  # noqa: E731
                                                qk_split=qk, promote=pr)
            fn()
            ms = do_bench(fn, warmup=50, rep=300, return_mode="median")
            results.setdefault("sweep_timing", []).append(
                {"shape": f"B{b} H{h} S{s_} D{d}", "mode": mode, "pv_split": pv, "qk_split": qk, "promote": pr,
                 "ms": ms, "tflops": flops / ms / 1e9})
            print(f"[sweep] {mode:8s} B{b} H{h} S{s_} pv_split={pv!s:5} qk_split={qk!s:5} promote={pr:2d}: "
                  f"kernel {ms:.2f} ms ({flops / ms / 1e9:.0f} TFLOP/s)")


# --------------------------------------------------------------------------------------- timing
def time_shapes(shapes, results):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    rows = []
    for (b, s, h, d) in shapes:
        q, k, v = kmean_inputs(b, s, s, h, d, "cuda", seed=s + h)
        flops = 4.0 * b * h * s * s * d
        rep = max(200, int(3 * flops / 5e11))  # ms: at least ~5 timed calls at 500 TFLOP/s
        bench = lambda fn: do_bench(fn, warmup=max(25, rep // 4), rep=rep, return_mode="median")  # noqa: E731
        r = {"shape": f"B{b} H{h} S{s} D{d}"}
        prep = prepare.prepare_fp8(q, k, v, backend="triton")
        r["prepare_ms"] = bench(lambda: prepare.prepare_fp8(q, k, v, backend="triton"))
        out = torch.empty_like(q)
        for mode in ("fp8", "direct-p"):
            tri.attention_prepared(prep, mode, 1 / math.sqrt(d), out)  # autotune outside the timing
            r[f"{mode}_kernel_ms"] = bench(lambda: tri.attention_prepared(prep, mode, 1 / math.sqrt(d), out))
            r[f"{mode}_total_ms"] = bench(lambda: tri.triton_attention(q, k, v, mode))
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        try:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
                r["sdpa_cudnn_bf16_ms"] = bench(lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt))
        except Exception as exc:  # report, keep the Triton numbers
            print(f"[time] cuDNN SDPA failed: {exc}")
            r["sdpa_cudnn_bf16_ms"] = float("nan")
        for key in [k_ for k_ in r if k_.endswith("_ms") and k_ != "prepare_ms"]:
            r[key.replace("_ms", "_tflops")] = flops / (r[key] * 1e-3) / 1e12
        r["prepare_pct_of_direct_p_total"] = 100 * r["prepare_ms"] / r["direct-p_total_ms"]
        print(f"[time] {r}")
        rows.append(r)
        del q, k, v, qt, kt, vt, prep, out
        torch.cuda.empty_cache()
    results["timing"] = rows
    return rows


def print_table(rows, header):
    print()
    print(header)
    print("| shape | prepare ms | fp8 kernel | fp8 prepare+kernel | direct-p kernel | direct-p prepare+kernel | SDPA cuDNN BF16 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        cell = lambda key: f"{r[key + '_ms']:.2f} ms ({r[key + '_tflops']:.0f} TF/s)"  # noqa: E731
        print(f"| {r['shape']} | {r['prepare_ms']:.3f} ({r['prepare_pct_of_direct_p_total']:.1f}% of direct-p) "
              f"| {cell('fp8_kernel')} | {cell('fp8_total')} | {cell('direct-p_kernel')} "
              f"| {cell('direct-p_total')} | {cell('sdpa_cudnn_bf16')} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--sweep", action="store_true", help="also measure the accumulation variants first")
    ap.add_argument("--promote-sweep-only", action="store_true",
                    help="only the direct-p sweep of FP32 promotion variants (PROMOTE, QK_SPLIT)")
    args = ap.parse_args()

    global torch, reference, prepare, tri
    import torch
    from wan_fp4 import reference
    from wan_fp4.kernels import prepare
    from wan_fp4.kernels.triton import attention as tri
    import triton

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "torch": torch.__version__, "triton": triton.__version__,
               "device": torch.cuda.get_device_name(), "command": " ".join(sys.argv),
               "defaults": {"pv_split": tri.PV_SPLIT, "qk_split": tri.QK_SPLIT, "promote": tri.PROMOTE}}
    print(json.dumps(results))
    t0 = time.time()
    rows = []
    shapes = [(1, 32760, 12, 128), (1, 32760, 40, 128), (1, 75600, 40, 128)]
    if args.promote_sweep_only:
        steps = [("promote sweep", lambda: sweep_accumulation(results, PROMOTE_VARIANTS, ("direct-p",)))]
    else:
        steps = [("sweep", lambda: sweep_accumulation(results))] if args.sweep else []
        steps += [("timing", lambda: rows.extend(time_shapes(shapes, results)))]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    run_steps(steps, results, out_dir / "triton_device.json", t0)
    if rows:
        print_table(rows, f"{results['date']} {results['device']}, torch {results['torch']}, triton "
                          f"{results['triton']}; do_bench median; N(0,1) BF16 inputs; `{results['command']}`")
    print(f"failures: {results.get('failures', [])}; total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
