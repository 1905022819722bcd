"""GPU check and timing of the Triton direct-p-fp4 emulation (wan_fp4.kernels.fp4_emulation).

    PYTHONUNBUFFERED=1 python scripts/check_fp4_emulation_device.py [--out DIR] [--budget-s 170]

1. fp4_emulation_attention vs reference.attention(..., "direct-p-fp4") on CUDA (TF32 off), both
   on the same inputs: FP32 outputs (float32 inputs; the kernel's operands are still BF16) rel L2,
   BF16 outputs rel L2 and fraction differing, LSE max abs diff. Shapes: B1 H3 S1000 D128 (Wan,
   generic and guard 110 affines), Sq 4097 vs Skv 512, B2 D64, and B1 H12 S7680 D128 on query
   rows 0:256 (full K/V). Codes and block exponents (debug output) vs reference.fp4_p_codes.
   Scores beyond the map's range (q, k * 8) warn FP4RangeWarning on the kernel as on the reference.
2. Timing, kernel only (operands prepared outside), triton.testing.do_bench median,
   TFLOP/s = 4 B H S^2 D / t, at B1 H12 S7680, B1 H12 S32760, B1 H40 S32760 D128; torch SDPA
   BF16 for context; a few launch configurations at S7680 while the time budget lasts.
Imports wan_fp4's submodules without running wan_fp4/__init__ (the GPU machine has no diffusers).
The table is printed last; JSON is written to --out after every step.
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


def inputs(b, sq, skv, h, d, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(b, sq, h, d, generator=g, device="cuda")
    k = torch.randn(b, skv, h, d, generator=g, device="cuda") * 1.5
    k += torch.randn(b, 1, h, d, generator=g, device="cuda")  # a K mean, as real K has
    v = torch.randn(b, skv, h, d, generator=g, device="cuda")
    return q.bfloat16(), k.bfloat16(), v.bfloat16()


def check_case(name, shape, fp4, rows, results):
    b, sq, skv, h, d = shape
    q, k, v = inputs(b, sq, skv, h, d, seed=sq + skv + d + h)
    if rows is not None:
        q = q[:, rows].contiguous()
    out32, lse = emu.fp4_emulation_attention(q.float(), k.float(), v.float(), fp4=fp4, return_lse=True)
    ref32, ref_lse = reference.attention(q.float(), k.float(), v.float(), "direct-p-fp4", fp4=fp4,
                                         return_lse=True)
    out16 = emu.fp4_emulation_attention(q, k, v, fp4=fp4)
    ref16 = reference.attention(q, k, v, "direct-p-fp4", fp4=fp4)
    finite = torch.isfinite(ref_lse)
    row = {"case": name, "shape": list(shape), "rows": None if rows is None else [rows.start, rows.stop],
           "affine": list(fp4.affine), "guard": fp4.guard_margin,
           "rel_l2_fp32": rel_l2(out32, ref32), "rel_l2_bf16": rel_l2(out16, ref16),
           "frac_bf16_differing": (out16 != ref16).float().mean().item(),
           "lse_max_abs_diff": (lse - ref_lse)[finite].abs().max().item(),
           "lse_inf_agree": bool((torch.isfinite(lse) == finite).all())}
    results.setdefault("checks", []).append(row)
    print(f"[check] {name}: relL2 fp32 {row['rel_l2_fp32']:.2e} | bf16 relL2 {row['rel_l2_bf16']:.2e} "
          f"differ {row['frac_bf16_differing']:.2e} | lse {row['lse_max_abs_diff']:.1e} "
          f"inf-agree {row['lse_inf_agree']}")


def check_codes(shape, guard, results, **variant):
    b, sq, skv, h, d = shape
    q, k, v = inputs(b, sq, skv, h, d, seed=99)
    qh, kh, vh, m = emu.prepare_operands(q, k, v, guard)
    pq = torch.full((b, h, sq, kh.shape[2]), float("nan"), device="cuda")
    pe = torch.full_like(pq, float("nan"))
    out = torch.empty(b, sq, h, d, device="cuda")
    lse = torch.empty(b, h, sq, device="cuda")
    scale = 1 / math.sqrt(d)
    emu.launch(qh, kh, vh, m, out, lse, skv=skv, d=d, scale=scale, affine=FP4Params().affine,
               debug_p=(pq, pe), **variant)
    s = torch.matmul(qh.float(), kh.float().transpose(-1, -2))
    s[..., skv:] = -math.inf
    code, e = reference.fp4_p_codes(s, m.unsqueeze(-1), reference.log2_scale(scale), FP4Params().affine)
    e = e.repeat_interleave(32, dim=-1)
    row = {"shape": list(shape), "guard": guard, "variant": variant,
           "unwritten": int((~torch.isfinite(pq)).sum()),
           "code_mismatch": (pq != code).float().mean().item(),
           "exponent_mismatch": (pe != e).float().mean().item()}
    results.setdefault("codes", []).append(row)
    print(f"[codes] {row}")


def time_shape(b, s, h, d, results, configs):
    from triton.testing import do_bench

    q, k, v = inputs(b, s, s, h, d, seed=s + h)
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


def check_range_warning(results):
    """Scores too large for the map (q, k * 8): the kernel warns FP4RangeWarning exactly when the
    reference does (shiftless, and guarded with anchors that miss); ordinary inputs stay silent."""
    import warnings

    from wan_fp4.modes import FP4RangeWarning

    q, k, v = inputs(1, 1000, 1000, 3, 128, seed=11)
    rows = []
    for name, mul, fp4 in (("q,k*8 shiftless", 8.0, FP4Params()), ("q,k*8 guard110", 8.0, FP4Params(guard_margin=110.0)),
                           ("N(0,1) shiftless", 1.0, FP4Params())):
        warned = []
        for fn in (reference.attention, emu.fp4_emulation_attention):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", FP4RangeWarning)
                fn(q * mul, k * mul, v, "direct-p-fp4", fp4=fp4)
            warned.append(any(issubclass(w.category, FP4RangeWarning) for w in caught))
        rows.append({"case": name, "reference_warns": warned[0], "kernel_warns": warned[1]})
        print(f"[range] {name}: reference warns {warned[0]}, kernel warns {warned[1]}")
    results["range_warning"] = rows
    if any(r["reference_warns"] != r["kernel_warns"] for r in rows) or not rows[0]["kernel_warns"]:
        raise AssertionError(f"FP4RangeWarning differs between kernel and reference: {rows}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--budget-s", type=float, default=170.0, help="skip optional steps after this")
    args = ap.parse_args()

    global torch, reference, emu, FP4Params
    import torch
    import triton

    from wan_fp4 import reference
    from wan_fp4.kernels import fp4_emulation as emu
    from wan_fp4.modes import AFFINE_GENERIC, FP4Params

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "torch": torch.__version__, "triton": triton.__version__,
               "device": torch.cuda.get_device_name(), "command": " ".join(sys.argv)}
    print(json.dumps(results))
    t0 = time.time()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    # The reshape variant first; if this Triton rejects it, the select variant (reported).
    try:
        check_codes((1, 300, 333, 2, 128), None, results)
    except Exception:
        traceback.print_exc()
        print("[fallback] reshape variant failed; using reshape=False")
        emu._DEFAULT["reshape"] = False
        results["fallback_select_variant"] = True
    wan = FP4Params()
    steps = [
        ("codes guard", lambda: check_codes((1, 1000, 1000, 3, 128), 110.0, results)),
        ("S1000 wan", lambda: check_case("B1 H3 S1000 D128 wan", (1, 1000, 1000, 3, 128), wan, None, results)),
        ("S1000 generic", lambda: check_case("B1 H3 S1000 D128 generic", (1, 1000, 1000, 3, 128),
                                             FP4Params(affine=AFFINE_GENERIC), None, results)),
        ("S1000 guard", lambda: check_case("B1 H3 S1000 D128 guard110", (1, 1000, 1000, 3, 128),
                                           FP4Params(guard_margin=110.0), None, results)),
        ("cross", lambda: check_case("B1 H3 Sq4097 Skv512 D128", (1, 4097, 512, 3, 128), wan, None, results)),
        ("B2 D64", lambda: check_case("B2 H3 Sq1000 Skv777 D64", (2, 1000, 777, 3, 64), wan, None, results)),
        ("S7680 slice", lambda: check_case("B1 H12 S7680 D128 rows 0:256", (1, 7680, 7680, 12, 128), wan,
                                           slice(0, 256), results)),
        ("range warning", lambda: check_range_warning(results)),
        ("codes variants", lambda: [check_codes((1, 300, 333, 2, 128), None, results, ladder=False),
                                    check_codes((1, 300, 333, 2, 128), None, results, reshape=False)]),
    ]
    table = []
    steps += [
        ("time S7680", lambda: table.extend(time_shape(1, 7680, 12, 128, results, [{}]))),
        ("time S32760 H12", lambda: table.extend(time_shape(1, 32760, 12, 128, results, [{}]))),
        ("time S32760 H40", lambda: table.extend(time_shape(1, 32760, 40, 128, results, [{}]))),
        ("sweep S7680", lambda: table.extend(time_shape(1, 7680, 12, 128, results, [
            {"ladder": False}, {"num_stages": 3}, {"block_m": 64, "num_warps": 4}, {"num_warps": 4},
            {"reshape": False}]))),
    ]
    for name, fn in steps:
        if name.startswith("sweep") and time.time() - t0 > args.budget_s:
            print(f"[skip] {name}: past the {args.budget_s:.0f} s budget")
            continue
        try:
            fn()
        except Exception:
            traceback.print_exc()
            results.setdefault("failures", []).append(name)
        print(f"  ({time.time() - t0:.0f} s) {name}")
        (out_dir / "fp4_emulation_device.json").write_text(json.dumps(results, indent=1, default=str))

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
