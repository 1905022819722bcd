"""Check and time the sm90 CuTe kernel on an H100/H200 (one script, one GPU job).

    python scripts/check_sm90_device.py check   # compile + compare with wan_fp4.reference at awkward shapes
    python scripts/check_sm90_device.py bench   # time vs torch SDPA (cuDNN BF16) in the same run
    python scripts/check_sm90_device.py all     # both, one job
    python scripts/check_sm90_device.py large   # B6 H40 S75600 D128 direct-p (B*S*H*D > 2^31)
    ... --configs '{"pingpong": true}' ... --prebuilt-dir DIR   # configs built ahead of time
                                                # (build_prebuilt.py --out DIR): no DSL needed

check also compares the prebuilt (AOT, ctypes shim) kernel with the JIT one bit for bit (when the
DSL is installed), and the pre-pass's kernel V^T layout with its definition (the torch gather).

check: huge but finite scores (q * 1e8, k * 1e30) give the reference's clear error or a finite
  output on the sm90 and Triton kernels, and inputs just inside direct-p's range still match.
  Fresh N(0,1) BF16 inputs per shape; outputs poisoned with NaN before the launch; reference
  run in torch on the same GPU with TF32 off; prints relative L2 (||out - ref|| / ||ref||), max abs
  error and LSE error. Fails (exit 1) if any rel L2 > 1e-2 or any NaN.
large: the batch whose output passes 2^31 elements (Wan2.1-14B 720p, batch 6): prints the kernel
  dispatch picks (must be sm90-cute) and runs the sm90 kernel on the whole batch, then on each batch
  element alone (B=1, the same prepared operands sliced): every output and LSE must be bit-identical
  (same operands, same per-CTA arithmetic; only the batch offsets differ), no NaN (outputs are
  poisoned first), plus a reference check of the last element's first and last query blocks.
bench: triton.testing.do_bench median; TFLOP/s = 4 B H S^2 D / t. "kernel" times the attention
  kernel on prepared operands; "e2e" is sm90_attention (quantisation pre-pass + kernel). The FP8
  tensor-core ceiling is measured in the same run: cuBLAS FP8 GEMM (torch._scaled_mm) 8192^3.
"""
from __future__ import annotations

import argparse
import faulthandler
import os
import sys
import time

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from wan_fp4 import reference  # noqa: E402
from wan_fp4.eval.metrics import max_abs, rel_l2  # noqa: E402
from wan_fp4.kernels import sm90  # noqa: E402
from wan_fp4.kernels.prepare import prepare_fp8  # noqa: E402
from wan_fp4.kernels.sm90 import aot  # noqa: E402
from wan_fp4.kernels.sm90.layout import sm90_v_layout, v_layout_args  # noqa: E402

TOL = 1e-2


def _rand(b, s, h, d, gen):
    return torch.randn(b, s, h, d, generator=gen, device="cuda", dtype=torch.float32).to(torch.bfloat16)


def _rel(a, b):
    return rel_l2(a, b), max_abs(a, b)


PREBUILT = None  # launch's prebuilt argument: None = AOT kernel if usable, else JIT


def check_one(name, b, h, sq, skv, d, mode, config, gen, rows=None):
    faulthandler.dump_traceback_later(90, exit=True)  # a hung kernel ends the job, not the lease
    q, k, v = _rand(b, sq, h, d, gen), _rand(b, skv, h, d, gen), _rand(b, skv, h, d, gen)
    ops = prepare_fp8(q, k, v, **v_layout_args(mode))
    out = torch.full((b, sq, h, d), float("nan"), dtype=torch.bfloat16, device="cuda")
    lse = torch.full((b, h, sq), float("nan"), dtype=torch.float32, device="cuda")
    sm90.launch(ops, mode, d, config=config, out=out, lse=lse, prebuilt=PREBUILT)
    torch.cuda.synchronize()
    lse = lse + sm90.lse_shift(ops, d)  # the reference adds back the K-smoothing shift
    qr = q if rows is None else q[:, rows]
    ref, ref_lse = reference.attention(qr, k, v, mode, return_lse=True)
    got = out if rows is None else out[:, rows]
    got_lse = lse if rows is None else lse[:, :, rows]
    nan = int(torch.isnan(out).sum().item() + torch.isnan(lse).sum().item())
    rel, mx = _rel(got, ref)
    lrel, _ = _rel(got_lse, ref_lse)
    ok = nan == 0 and rel < TOL
    print(f"{'ok  ' if ok else 'FAIL'} {name:28s} {mode:8s} cfg={config} relL2={rel:.3e} maxabs={mx:.3e} "
          f"lse_relL2={lrel:.3e} nan={nan}", flush=True)
    return ok


def accum_probe(gen):
    """Error of the FP8 tensor-core accumulation itself: torch._scaled_mm with use_fast_accum=True
    (raw wgmma accumulation) vs FP32 on the same E4M3 operands, K = 128 (one key tile)."""
    a = (torch.rand(4096, 128, generator=gen, device="cuda") * 256).to(torch.float8_e4m3fn)  # P-like, >= 0
    b = (torch.randn(128, 256, generator=gen, device="cuda") * 100).to(torch.float8_e4m3fn)  # V-like
    exact = a.float() @ b.float()
    one = torch.ones((), device="cuda")
    for fast in (True, False):
        got = torch._scaled_mm(a, b.t().contiguous().t(), one, one, out_dtype=torch.float32, use_fast_accum=fast)
        rel, _ = _rel(got, exact)
        print(f"accum probe: _scaled_mm e4m3 K=128 use_fast_accum={fast}: relL2 vs fp32 = {rel:.3e}", flush=True)


def _dsl_installed():
    import importlib.util

    return importlib.util.find_spec("cutlass") is not None


def check_prebuilt_and_layout(gen):
    """The pre-pass's kernel V^T layout vs its definition; prebuilt (AOT shim) vs JIT, bit for bit,
    per mode (when the DSL is installed)."""
    ok = True
    for d in (128, 64):
        q, k, v = _rand(2, 1000, 3, d, gen), _rand(2, 1000, 3, d, gen), _rand(2, 1000, 3, d, gen)
        plain = prepare_fp8(q, k, v)
        for mode in sm90.SUPPORTED_MODES:
            ops = prepare_fp8(q, k, v, **v_layout_args(mode))
            same = torch.equal(ops.v8t.view(torch.uint8),
                               sm90_v_layout(plain.v8t, mode == "direct-p").view(torch.uint8))
            ok &= same
            print(f"{'ok  ' if same else 'FAIL'} pre-pass V^T layout == definition D{d} {mode}", flush=True)
            if not _dsl_installed():
                continue
            outs = []
            for pb in (True, False):
                out = torch.full((2, 1000, 3, d), float("nan"), dtype=torch.bfloat16, device="cuda")
                lse = torch.full((2, 3, 1000), float("nan"), dtype=torch.float32, device="cuda")
                sm90.launch(ops, mode, d, out=out, lse=lse, prebuilt=pb)
                torch.cuda.synchronize()
                outs.append((out, lse))
            same = torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
            nan = bool(torch.isnan(outs[0][0]).any())
            ok &= same and not nan
            print(f"{'ok  ' if same and not nan else 'FAIL'} prebuilt == JIT {mode} D{d} (bitwise) nan={nan}", flush=True)
    return ok


def _outcome(fn):
    """("error", message) for a ValueError, else ("out", output)."""
    try:
        return "out", fn()
    except ValueError as exc:
        return "error", str(exc)


def check_score_range(gen):
    """Huge but finite scores: every FP8 kernel gives a finite output or the reference's error
    (direct-p's FP32 map holds only for row maxima |m| < 2^19, modes.MAX_SCORE_LOG2), and just
    inside that range the kernels still match the reference."""
    import wan_fp4
    from wan_fp4.modes import MAX_SCORE_LOG2, default_scale

    ok = True
    d = 128
    q, v = _rand(1, 1000, 2, d, gen), _rand(1, 1000, 2, d, gen)
    # keys = queries: each row's largest score is its own key's, at the Cauchy-Schwarz bound, and far
    # above the rest (no near-ties for the FP8 tensor cores' accumulation error to flip)
    k = q.clone()
    c = reference.log2_scale(default_scale(d))
    norm_q, norm_k = (t.float().norm(dim=-1).max().item() for t in (q, k))
    near = (0.9 * MAX_SCORE_LOG2["direct-p"] / (c * norm_q * norm_k)) ** 0.5  # |m| ~ 0.9 2^19
    # (name, q factor, k factor, compare with the reference): the huge cases are one-hot attention
    # with near-ties the tensor cores' accumulation may flip, so there only finiteness is checked
    cases = [("q*1e8", 1e8, 1.0, False), ("k*1e30", 1.0, 1e30, False),
             (f"q,k*{near:.0f} (|m| < 2^19)", near, near, True)]
    for kernel in ("sm90-cute", "triton"):
        for mode in sm90.SUPPORTED_MODES:
            for name, qm, km, compare in cases:
                args = ((q.float() * qm).bfloat16(), (k.float() * km).bfloat16(), v)
                want, ref = _outcome(lambda: reference.attention(*args, mode))
                got, out = _outcome(lambda: wan_fp4.attention(*args, mode, kernel=kernel))
                if want == "error" or got == "error":
                    good = want == got == "error"
                    detail = f"reference: {want}, kernel: {got} ({(out if got == 'error' else '')[:60]})"
                else:
                    finite = bool(torch.isfinite(out).all())
                    rel, _ = _rel(out, ref)
                    good = finite and (rel < TOL or not compare)
                    detail = f"finite {finite}, relL2 vs reference {rel:.3e}" + ("" if compare else " (not compared)")
                ok &= good
                print(f"{'ok  ' if good else 'FAIL'} score range {kernel:9s} {mode:8s} {name:24s} {detail}",
                      flush=True)
    return ok


def do_check(configs):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(20261130)
    accum_probe(gen)  # the FP8 tensor-core accumulation floor docs/NUMERICS.md cites
    ok = True
    try:
        ok &= check_score_range(gen)
    except Exception as e:
        print(f"FAIL score range: {type(e).__name__}: {e}", flush=True)
        ok = False
    try:
        ok &= check_prebuilt_and_layout(gen)
    except Exception as e:
        print(f"FAIL prebuilt/layout: {type(e).__name__}: {e}", flush=True)
        ok = False
    cases = [
        ("B2 H3 S1000", 2, 3, 1000, 1000, 128, None),
        ("B1 H12 S4097", 1, 12, 4097, 4097, 128, None),
        ("B1 H4 Sq4097 Skv512", 1, 4, 4097, 512, 128, None),
        ("B1 H2 Sq100 Skv77", 1, 2, 100, 77, 128, None),
        ("B1 H12 S7680 rows", 1, 12, 7680, 7680, 128, [slice(0, 256), slice(7552, 7680)]),
        ("B1 H12 S32760 rows", 1, 12, 32760, 32760, 128, [slice(0, 256), slice(32640, 32760)]),
    ]
    for mode in sm90.SUPPORTED_MODES:
        for name, b, h, sq, skv, d, rows in cases:
            for cfg in configs:
                if rows is None:
                    ok &= check_one(name, b, h, sq, skv, d, mode, cfg, gen)
                else:
                    idx = torch.cat([torch.arange(r.start, r.stop) for r in rows]).cuda()
                    ok &= check_one(name, b, h, sq, skv, d, mode, cfg, gen, rows=idx)
    try:
        for mode in sm90.SUPPORTED_MODES:
            ok &= check_one("D64 B2 H3 S700", 2, 3, 700, 700, 64, mode, None, gen)
    except Exception as e:  # D = 64 is a bonus: report, do not hide the D = 128 results
        print(f"FAIL D64: {type(e).__name__}: {e}", flush=True)
        ok = False
    print("CHECK", "PASSED" if ok else "FAILED", flush=True)
    return ok


def do_large(b=6, h=40, s=75600, d=128, mode="direct-p"):
    import dataclasses

    from wan_fp4 import dispatch

    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(20261201)
    # resolve (and link on first use) the prebuilt kernel first: without the DSL, is_supported
    # accepts only a prebuilt kernel that is already linked
    run = aot.prebuilt_launcher(mode, d) if PREBUILT is not False else None
    if PREBUILT and run is None:
        raise RuntimeError(f"no usable prebuilt sm90 kernel for {mode} D{d} (see the log)")
    print(f"sm90 kernel {aot.kernel_name(mode, d)} runs {'prebuilt (AOT)' if run else 'JIT'}", flush=True)
    q, k, v = _rand(b, s, h, d, gen), _rand(b, s, h, d, gen), _rand(b, s, h, d, gen)
    name = dispatch.kernel_for(q, mode, k, v)
    ok_sup, why = sm90.is_supported(q, k, v, mode)
    print(f"B{b} H{h} S{s} D{d} {mode}: B*S*H*D = {b * s * h * d} (2^31 = {2**31}); dispatch picks {name!r}; "
          f"sm90 is_supported={ok_sup} {why}", flush=True)
    ok = name == "sm90-cute" and ok_sup
    ops = prepare_fp8(q, k, v, **v_layout_args(mode))
    # whole 128-row Q scale blocks (the first and the last), so the reference quantises them alike
    last = (s - 1) // 128 * 128
    rows = torch.cat([torch.arange(0, 128), torch.arange(last, s)]).cuda()
    q_last = q[b - 1:, rows].clone()
    k_last, v_last = k[b - 1:].clone(), v[b - 1:].clone()
    del q, k, v
    faulthandler.dump_traceback_later(300, exit=True)
    out = torch.full((b, s, h, d), float("nan"), dtype=torch.bfloat16, device="cuda")
    lse = torch.full((b, h, s), float("nan"), dtype=torch.float32, device="cuda")
    sm90.launch(ops, mode, d, out=out, lse=lse, prebuilt=PREBUILT)
    torch.cuda.synchronize()
    nan = int(torch.isnan(out).sum().item() + torch.isnan(lse).sum().item())
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    sm90.launch(ops, mode, d, out=torch.empty_like(out), lse=torch.empty_like(lse), prebuilt=PREBUILT)
    stop.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(stop)
    print(f"{'ok  ' if nan == 0 else 'FAIL'} B{b} launch nan={nan}; second launch {ms:.1f} ms, "
          f"{4 * b * h * s * s * d / ms / 1e9:.0f} TFLOP/s", flush=True)
    ok &= nan == 0
    for i in range(b):
        one = dataclasses.replace(
            ops, q8=ops.q8[i:i + 1], k8=ops.k8[i:i + 1], v8t=ops.v8t[i:i + 1], q_scale=ops.q_scale[i:i + 1],
            k_scale=ops.k_scale[i:i + 1], v_scale=ops.v_scale[i:i + 1], k_mean=ops.k_mean[i:i + 1])
        o1 = torch.full((1, s, h, d), float("nan"), dtype=torch.bfloat16, device="cuda")
        l1 = torch.full((1, h, s), float("nan"), dtype=torch.float32, device="cuda")
        sm90.launch(one, mode, d, out=o1, lse=l1, prebuilt=PREBUILT)
        torch.cuda.synchronize()
        same = torch.equal(out[i:i + 1], o1) and torch.equal(lse[i:i + 1], l1)
        diff = (out[i:i + 1].float() - o1.float()).abs().max().item()
        ok &= same
        print(f"{'ok  ' if same else 'FAIL'} batch element {i} (O offset {i * s * h * d}): B{b} == B1 bitwise "
              f"(max |diff| {diff:.3e})", flush=True)
        if i == b - 1:
            ref = reference.attention(q_last, k_last, v_last, mode)
            rel, mx = _rel(out[i:i + 1, rows], ref)
            ok &= rel < TOL
            print(f"{'ok  ' if rel < TOL else 'FAIL'} element {i} rows 0..127, {last}..{s - 1} vs reference: "
                  f"relL2={rel:.3e} maxabs={mx:.3e} (tol {TOL})", flush=True)
        del o1, l1
    faulthandler.cancel_dump_traceback_later()
    print("LARGE", "PASSED" if ok else "FAILED", flush=True)
    return ok


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
            for cfg in configs:
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
    import json
    from pathlib import Path

    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["check", "bench", "all", "large"])
    ap.add_argument("--quick", action="store_true", help="bench only the first shape")
    ap.add_argument("--configs", nargs="*", type=json.loads, default=[],
                    help="extra kernel configs (JSON, over each mode's default) to check and time")
    ap.add_argument("--prebuilt-dir", type=Path, default=None,
                    help="load prebuilt kernels (all configs) from DIR (build_prebuilt.py --out DIR)")
    args = ap.parse_args()
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), torch.cuda.get_device_name(),
          "torch", torch.__version__, "DSL installed:", _dsl_installed(), flush=True)
    if args.prebuilt_dir is not None:
        aot.PREBUILT.directory = args.prebuilt_dir.resolve()
    if not _dsl_installed():
        PREBUILT = True  # without the DSL every config must be prebuilt: fail loudly, never skip
    configs = [{}] + args.configs  # over each mode's default_config
    ok = True
    if args.what in ("check", "all"):
        ok = do_check(configs)
    if args.what == "large":
        ok = do_large()
    if args.what in ("bench", "all"):
        shapes = [(1, 12, 32760), (1, 40, 32760), (1, 40, 75600)]
        do_bench(shapes[:1] if args.quick else shapes, configs)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
