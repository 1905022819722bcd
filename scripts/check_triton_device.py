"""GPU check and timing of the Triton fp8 / direct-p path (prepare + attention kernel).

    PYTHONUNBUFFERED=1 python scripts/check_triton_device.py [--out DIR] [--skip-timing] [--sweep]
    python scripts/check_triton_device.py --promote-sweep-only   # FP32-promotion variants only
    python scripts/check_triton_device.py --cpu-smoke      # tiny shapes under the Triton interpreter

--sweep first measures the kernel's accumulation variants (PV_SPLIT x QK_SPLIT: accuracy against
the reference at B1 H12 S4097 and S32760, kernel time at B1 H40 S32760).

1. The hardware FP32 -> E4M3 convert the kernels use equals formats.e4m3_encode (ties, saturation).
2. prepare_fp8 (Triton, hardware convert and bit-arithmetic encoder) vs reference.quantize_fp8 on
   the same device: mismatch fraction of every code and scale tensor (expected 0).
3. triton_attention vs reference.attention on CUDA (TF32 off), awkward shapes and a Wan shape
   (there on slices of 1024 query rows starting at multiples of 128, so Q scale blocks line up;
   K/V stay full): rel L2, fraction of BF16 outputs differing, LSE; the error of both against
   exact FP32 attention (reference mode "bf16"), i.e. the mode's own error.
4. Timing (triton.testing.do_bench, median): prepare, kernel, prepare + kernel, torch SDPA BF16
   (cuDNN backend) at Wan shapes; TFLOP/s = 4 B H S^2 D / t. Table printed last, JSON in --out.
The script imports wan_fp4's submodules without running wan_fp4/__init__ (the GPU machine has
no diffusers).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for wan_fp4

from wan_fp4.eval.metrics import rel_l2  # noqa: E402


def _mismatch(a, b):
    if a.dtype == torch.float8_e4m3fn:
        a, b = a.view(torch.uint8), b.view(torch.uint8)
    if a.shape != b.shape:
        return f"shape {tuple(a.shape)} != {tuple(b.shape)}"
    return (a != b).float().mean().item()


def inputs(b, sq, skv, h, d, device, seed):
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(b, sq, h, d, generator=g, device=device)
    k = torch.randn(b, skv, h, d, generator=g, device=device) * 1.5
    k += torch.randn(b, 1, h, d, generator=g, device=device)  # a K mean, as real K has
    v = torch.randn(b, skv, h, d, generator=g, device=device)
    return q.bfloat16(), k.bfloat16(), v.bfloat16()


# --------------------------------------------------------------------------------------- checks
def check_hw_convert(device, results):
    import triton
    import triton.language as tl

    @triton.jit
    def enc(x_ptr, y_ptr, n, HW: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(y_ptr + offs, prepare.e4m3_rne_sat(x, HW).to(tl.uint8, bitcast=True), mask=offs < n)

    grid_vals = formats.e4m3_decode(torch.arange(0, 127, dtype=torch.uint8))
    mids = (grid_vals[:-1] + grid_vals[1:]) / 2
    inf = torch.tensor(float("inf"))
    pos = torch.cat([grid_vals, mids, torch.nextafter(mids, inf), torch.nextafter(mids, torch.tensor(0.0)),
                     torch.exp2(torch.rand(100000) * 34 - 24),
                     torch.tensor([447.9, 448.0, 463.99, 464.0, 480.0, 1000.0, 3.0e38, 2.0**-10])])
    x = torch.cat([pos, -pos]).to(device)
    want = formats.e4m3_encode(x.cpu())
    for hw in (True, False):
        y = torch.empty(x.numel(), dtype=torch.uint8, device=device)
        enc[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), HW=hw, BLOCK=1024)
        bad = (y.cpu() != want)
        name = "hw" if hw else "bitarith"
        results[f"e4m3_convert_{name}_mismatches"] = int(bad.sum())
        msg = "" if not bad.any() else f" e.g. {x.cpu()[bad][:4].tolist()} -> {y.cpu()[bad][:4].tolist()} want {want[bad][:4].tolist()}"
        print(f"[convert] E4M3 encode ({name}) vs formats.e4m3_encode: {int(bad.sum())} / {x.numel()} differ{msg}")


def check_prepare(shape, device, results):
    b, sq, skv, h, d = shape
    q, k, v = inputs(b, sq, skv, h, d, device, seed=sq + skv + d)
    ref = reference.quantize_fp8(q, k, v)
    row = {"shape": list(shape)}
    for hw in ((True, False) if device == "cuda" else (False,)):
        prep = prepare.prepare_fp8(q, k, v, backend="triton", hw_cvt=hw)
        mism = {n: _mismatch(t, getattr(ref, n)) for n, t in prep.reference_layout().items()}
        row["hw" if hw else "bitarith"] = mism
        worst = max((m for m in mism.values() if isinstance(m, float)), default=0.0)
        print(f"[prepare] B{b} Sq{sq} Skv{skv} H{h} D{d} {'hw' if hw else 'bitarith'}: "
              f"worst mismatch fraction {worst:.3g}  {mism}")
    results.setdefault("prepare", []).append(row)


def check_attention(shape, device, results, row_slices=None):
    b, sq, skv, h, d = shape
    q, k, v = inputs(b, sq, skv, h, d, device, seed=sq * 3 + skv + d)
    prep = prepare.prepare_fp8(q, k, v, backend="triton")
    for mode in ("fp8", "direct-p"):
        out = torch.full_like(q, float("nan"))  # poison: every element must be written
        lse = torch.full((b, h, sq), float("nan"), device=device)
        tri.attention_prepared(prep, mode, 1 / math.sqrt(d), out, lse)
        torch.cuda.synchronize() if device == "cuda" else None
        unwritten = int((~torch.isfinite(out)).sum())
        slices = row_slices or [slice(0, sq)]
        for rows in slices:
            ref, ref_lse = reference.attention(q[:, rows], k, v, mode, return_lse=True)
            exact = reference.attention(q[:, rows].float(), k.float(), v.float(), "bf16")  # FP32 exact
            o = out[:, rows]
            row = {
                "mode": mode, "shape": list(shape), "rows": [rows.start, rows.stop],
                "unwritten": unwritten,
                "rel_l2_vs_reference": rel_l2(o, ref),
                "frac_bf16_differing": (o != ref).float().mean().item(),
                "max_abs_diff": (o.float() - ref.float()).abs().max().item(),
                "lse_max_abs_diff": (lse[:, :, rows] - ref_lse).abs().max().item(),
                "kernel_rel_l2_vs_exact": rel_l2(o, exact),
                "reference_rel_l2_vs_exact": rel_l2(ref, exact),
            }
            results.setdefault("attention", []).append(row)
            print(f"[attn] {mode:8s} B{b} Sq{sq} Skv{skv} H{h} D{d} rows {rows.start}:{rows.stop} "
                  f"unwritten {unwritten} | vs ref: relL2 {row['rel_l2_vs_reference']:.2e} "
                  f"differ {row['frac_bf16_differing']:.2e} maxabs {row['max_abs_diff']:.2e} "
                  f"lse {row['lse_max_abs_diff']:.1e} | vs exact: kernel {row['kernel_rel_l2_vs_exact']:.4f} "
                  f"ref {row['reference_rel_l2_vs_exact']:.4f}")


def check_bitarith_kernel(shape, device, results):
    """The kernel with HW_CVT=False (what the CPU interpreter runs) on the GPU agrees too."""
    b, sq, skv, h, d = shape
    q, k, v = inputs(b, sq, skv, h, d, device, seed=5)
    prep = prepare.prepare_fp8(q, k, v, backend="triton")
    for mode in ("fp8", "direct-p"):
        o_hw = tri.attention_prepared(prep, mode, 1 / math.sqrt(d), torch.empty_like(q), hw_cvt=True)
        o_sw = tri.attention_prepared(prep, mode, 1 / math.sqrt(d), torch.empty_like(q), hw_cvt=False)
        frac = (o_hw != o_sw).float().mean().item()
        results.setdefault("hw_vs_bitarith_kernel", []).append({"mode": mode, "frac_differing": frac})
        print(f"[attn] {mode} hardware vs bit-arithmetic converts: {frac:.2e} of outputs differ")


ALL_VARIANTS = [(pv, qk, 0) for pv in (False, True) for qk in (False, True)]
PROMOTE_VARIANTS = [(True, False, 0), (True, False, 64), (True, False, 32), (True, True, 0)]


def sweep_accumulation(results, variants=ALL_VARIANTS, modes=("fp8", "direct-p")):
    """Accuracy and speed of the kernel's accumulation variants (PV_SPLIT, QK_SPLIT, PROMOTE; see
    _tile and _dot in the kernel)."""
    from triton.testing import do_bench

    acc_shapes = [((1, 4097, 4097, 12, 128), slice(0, 4097)), ((1, 32760, 32760, 12, 128), slice(0, 1024))]
    for shape, rows in acc_shapes:
        b, sq, skv, h, d = shape
        q, k, v = inputs(b, sq, skv, h, d, "cuda", seed=sq + 17)
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
    q, k, v = inputs(b, s_, s_, h, d, "cuda", seed=3)
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
        q, k, v = inputs(b, s, s, h, d, "cuda", seed=s + h)
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
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="also measure the accumulation variants first")
    ap.add_argument("--promote-sweep-only", action="store_true",
                    help="only the direct-p sweep of FP32 promotion variants (PROMOTE, QK_SPLIT)")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny shapes under TRITON_INTERPRET=1, no timing")
    args = ap.parse_args()
    if args.cpu_smoke:
        os.environ["TRITON_INTERPRET"] = "1"

    global torch, formats, reference, prepare, tri
    import torch
    from wan_fp4 import formats, reference
    from wan_fp4.kernels import prepare
    from wan_fp4.kernels.triton import attention as tri
    import triton

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = "cpu" if args.cpu_smoke else "cuda"
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "torch": torch.__version__, "triton": triton.__version__,
               "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (interpreter)",
               "command": " ".join(sys.argv)}
    print(json.dumps(results))
    t0 = time.time()

    if args.cpu_smoke:
        prep_shapes = [(1, 200, 333, 2, 64)]
        attn_cases = [((1, 200, 333, 2, 64), None)]
        kernel_sw_shape = (1, 130, 140, 1, 64)
    else:
        prep_shapes = [(2, 1000, 1000, 3, 128), (1, 4097, 4097, 12, 128), (1, 4097, 512, 12, 128),
                       (2, 1000, 777, 3, 64), (1, 32760, 32760, 12, 128)]
        wan_rows = [slice(0, 1024), slice(16384, 17408), slice(31744, 32760)]
        attn_cases = [((2, 1000, 1000, 3, 128), None), ((1, 4097, 4097, 12, 128), None),
                      ((1, 4097, 512, 12, 128), None), ((2, 1000, 777, 3, 64), None),
                      ((1, 32760, 32760, 12, 128), wan_rows)]
        kernel_sw_shape = (2, 1000, 1000, 3, 128)

    steps = [("convert", lambda: check_hw_convert(device, results))] if device == "cuda" else []
    if args.sweep and device == "cuda":
        steps += [("sweep", lambda: sweep_accumulation(results))]
    if args.promote_sweep_only:
        steps, prep_shapes, attn_cases, args.skip_timing = [], [], [], True
        steps += [("promote sweep", lambda: sweep_accumulation(results, PROMOTE_VARIANTS, ("direct-p",)))]
    results["defaults"] = {"pv_split": tri.PV_SPLIT, "qk_split": tri.QK_SPLIT, "promote": tri.PROMOTE}
    steps += [(f"prepare {s}", (lambda s=s: check_prepare(s, device, results))) for s in prep_shapes]
    steps += [(f"attention {s}", (lambda s=s, r=r: check_attention(s, device, results, r)))
              for s, r in attn_cases[:-1]]
    rows = []
    if device == "cuda" and not args.skip_timing:
        shapes = [(1, 32760, 12, 128), (1, 32760, 40, 128), (1, 75600, 40, 128)]
        steps += [("timing", lambda: rows.extend(time_shapes(shapes, results)))]
    if attn_cases:
        s, r = attn_cases[-1]
        steps += [(f"attention {s}", lambda: check_attention(s, device, results, r))]
        steps += [("bitarith kernel", lambda: check_bitarith_kernel(kernel_sw_shape, device, results))]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, fn in steps:
        try:
            fn()
        except Exception:
            traceback.print_exc()
            results.setdefault("failures", []).append(name)
        print(f"  ({time.time() - t0:.0f} s)")
        # written after every step, so a run cut short still returns what it measured
        (out_dir / "triton_device.json").write_text(json.dumps(results, indent=1, default=str))
    if rows:
        print_table(rows, f"{results['date']} {results['device']}, torch {results['torch']}, triton "
                          f"{results['triton']}; do_bench median; N(0,1) BF16 inputs; `{results['command']}`")
    print(f"failures: {results.get('failures', [])}; total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
