"""Check and time the sm90 CuTe kernel on an H100/H200 (one script, one GPU job).

    python scripts/check_sm90_device.py check   # compile + compare with wan_fp4.reference at awkward shapes
    python scripts/check_sm90_device.py bench   # time vs torch SDPA (cuDNN BF16) in the same run
    python scripts/check_sm90_device.py all     # both, one job

check also compares the prebuilt (AOT, ctypes shim) kernel with the JIT one bit for bit, and the
Triton V^T re-layout pass with the torch gather.

check: fresh N(0,1) BF16 inputs per shape; outputs poisoned with NaN before the launch; reference
  run in torch on the same GPU with TF32 off; prints relative L2 (||out - ref|| / ||ref||), max abs
  error and LSE error. Fails (exit 1) if any rel L2 > 1e-2 or any NaN.
bench: triton.testing.do_bench median; TFLOP/s = 4 B H S^2 D / t. "kernel" times the attention
  kernel on prepared operands; "e2e" adds the FP8 quantisation pre-pass and the V^T re-layout.
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
from wan_fp4.kernels import sm90  # noqa: E402
from wan_fp4.kernels.prepare import prepare_fp8  # noqa: E402
from wan_fp4.kernels.sm90.layout import sm90_v_layout  # noqa: E402

TOL = 1e-2


def _rand(b, s, h, d, gen):
    return torch.randn(b, s, h, d, generator=gen, device="cuda", dtype=torch.float32).to(torch.bfloat16)


def _rel(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm()).item(), (a - b).abs().max().item()


def check_one(name, b, h, sq, skv, d, mode, config, gen, rows=None):
    faulthandler.dump_traceback_later(90, exit=True)  # a hung kernel ends the job, not the lease
    q, k, v = _rand(b, sq, h, d, gen), _rand(b, skv, h, d, gen), _rand(b, skv, h, d, gen)
    ops = prepare_fp8(q, k, v)
    out = torch.full((b, sq, h, d), float("nan"), dtype=torch.bfloat16, device="cuda")
    lse = torch.full((b, h, sq), float("nan"), dtype=torch.float32, device="cuda")
    sm90.launch(ops, mode, d, config=config, out=out, lse=lse, prebuilt=False)
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


CHECK_CONFIGS = [dict(sm90.DEFAULT_CONFIG), {"fold": 1}, {"fold": 2, "intra": True}]


def check_prebuilt_and_layout(gen):
    """Prebuilt (AOT shim) vs JIT, bit for bit, per mode; Triton V^T re-layout vs torch gather."""
    from wan_fp4.kernels.sm90 import aot

    ok = True
    for d in (128, 64):
        q, k, v = _rand(2, 1000, 3, d, gen), _rand(2, 1000, 3, d, gen), _rand(2, 1000, 3, d, gen)
        ops = prepare_fp8(q, k, v)
        for direct in (True, False):
            a = sm90_v_layout(ops.v8t, direct, backend="torch").view(torch.uint8)
            b_ = sm90_v_layout(ops.v8t, direct, backend="triton").view(torch.uint8)
            same = torch.equal(a, b_)
            ok &= same
            print(f"{'ok  ' if same else 'FAIL'} relayout triton == torch D{d} direct={direct}", flush=True)
        for mode in sm90.MODES:
            fn = aot.prebuilt_launcher(mode, d)
            if fn is None:
                print(f"FAIL prebuilt {mode} D{d}: none usable ({aot.find(mode, d, build=False)})", flush=True)
                ok = False
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


def do_check():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(20261129)
    accum_probe(gen)  # the FP8 tensor-core accumulation floor docs/NUMERICS.md cites
    ok = True
    try:
        ok &= check_prebuilt_and_layout(gen)
    except Exception as e:
        print(f"FAIL prebuilt/layout: {type(e).__name__}: {e}", flush=True)
        ok = False
    t = time.time()
    from wan_fp4.kernels.sm90.compile import compile_kernel

    for cfg in CHECK_CONFIGS:
        compile_kernel("direct-p", 128, **{**sm90.DEFAULT_CONFIG, **cfg})
    print(f"compile: {time.time() - t:.1f} s", flush=True)
    cases = [
        ("B2 H3 S1000", 2, 3, 1000, 1000, 128, None),
        ("B1 H12 S4097", 1, 12, 4097, 4097, 128, None),
        ("B1 H4 Sq4097 Skv512", 1, 4, 4097, 512, 128, None),
        ("B1 H2 Sq100 Skv77", 1, 2, 100, 77, 128, None),
        ("B1 H12 S32760 rows", 1, 12, 32760, 32760, 128, [slice(0, 256), slice(32640, 32760)]),
    ]
    for mode in sm90.MODES:
        for name, b, h, sq, skv, d, rows in cases:
            cfgs = CHECK_CONFIGS if mode == "direct-p" else CHECK_CONFIGS[:1]
            for cfg in cfgs:
                if rows is None:
                    ok &= check_one(name, b, h, sq, skv, d, mode, cfg, gen)
                else:
                    idx = torch.cat([torch.arange(r.start, r.stop) for r in rows]).cuda()
                    ok &= check_one(name, b, h, sq, skv, d, mode, cfg, gen, rows=idx)
    try:
        for mode in sm90.MODES:
            ok &= check_one("D64 B2 H3 S700", 2, 3, 700, 700, 64, mode, None, gen)
    except Exception as e:  # D = 64 is a bonus: report, do not hide the D = 128 results
        print(f"FAIL D64: {type(e).__name__}: {e}", flush=True)
        ok = False
    print("CHECK", "PASSED" if ok else "FAILED", flush=True)
    return ok


def do_bench(shapes, configs):
    import triton.testing as tt

    gen = torch.Generator(device="cuda").manual_seed(7)
    rows = []
    for b, h, s in shapes:
        d = 128
        q, k, v = _rand(b, s, h, d, gen), _rand(b, s, h, d, gen), _rand(b, s, h, d, gen)
        flops = 4 * b * h * s * s * d
        label = f"B{b} H{h} S{s}"

        def bench(name, fn):
            faulthandler.dump_traceback_later(120, exit=True)
            ms = tt.do_bench(fn, warmup=25, rep=150, return_mode="median")
            rows.append((label, name, ms, flops / ms / 1e9))
            print(f"{label:16s} {name:40s} {ms:9.3f} ms {flops / ms / 1e9:7.1f} TFLOP/s", flush=True)

        qt, kt, vt_ = (x.transpose(1, 2) for x in (q, k, v))
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            bench("torch SDPA cuDNN BF16", lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt_))
        ops = prepare_fp8(q, k, v)
        for mode in sm90.MODES:
            vt = sm90_v_layout(ops.v8t, mode == "direct-p")
            out = torch.empty(b, s, h, d, dtype=torch.bfloat16, device="cuda")
            lse = torch.empty(b, h, s, dtype=torch.float32, device="cuda")
            for cfg in (configs if mode == "direct-p" else configs[:1]):
                bench(f"sm90 {mode} kernel JIT {cfg}",
                      lambda: sm90.launch(ops, mode, d, config=cfg, out=out, lse=lse, vt=vt, prebuilt=False))
            bench(f"sm90 {mode} kernel prebuilt (default cfg)",
                  lambda: sm90.launch(ops, mode, d, out=out, lse=lse, vt=vt, prebuilt=True))
        bench("sm90 V^T relayout pass (Triton)", lambda: sm90_v_layout(ops.v8t, True))
        bench("sm90 V^T relayout (torch gather, old)", lambda: sm90_v_layout(ops.v8t, True, backend="torch"))
        bench("sm90 direct-p e2e (prepare+layout+kernel)", lambda: sm90.sm90_attention(q, k, v, "direct-p"))
        del q, k, v, ops, qt, kt, vt_
        torch.cuda.empty_cache()
    print("\n| shape | kernel | ms | TFLOP/s |\n|---|---|---|---|")
    for label, name, ms, tf in rows:
        print(f"| {label} | {name} | {ms:.3f} | {tf:.1f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["check", "bench", "all"])
    ap.add_argument("--quick", action="store_true", help="bench only the first shape")
    args = ap.parse_args()
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), torch.cuda.get_device_name(),
          "torch", torch.__version__, flush=True)
    ok = True
    if args.what in ("check", "all"):
        ok = do_check()
    if args.what in ("bench", "all"):
        shapes = [(1, 12, 32760), (1, 40, 32760), (1, 40, 75600)]
        configs = [dict(sm90.DEFAULT_CONFIG), {**sm90.DEFAULT_CONFIG, "fold": 1},
                   {**sm90.DEFAULT_CONFIG, "fold": 2, "intra": True}]
        do_bench(shapes[:1] if args.quick else shapes, configs)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
