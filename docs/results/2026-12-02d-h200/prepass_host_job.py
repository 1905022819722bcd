"""Host time per prepare_fp8 call (the GPU kept ahead with a sleep kernel), Triton's JIT launch
against prepare._launch's reuse of the compiled kernel, and the reuse path's bytes against the torch path."""
import sys, time, inspect, torch, triton
sys.path.insert(0, ".")
from wan_fp4.eval.device_check import mismatch
from wan_fp4.kernels import prepare
from wan_fp4.kernels.sm90.layout import v_layout_args
import triton.runtime.jit as jit
src = inspect.getsource(jit.JITFunction.run)
print("triton", triton.__version__, "| JIT launch passes:", [l.strip() for l in src.splitlines() if "kernel.run(" in l or "bound_args.values()" in l][-2:])
names = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
reuse = prepare._launch
jit_only = lambda kernel, grid, *a, **c: kernel[grid](*a, **c)
for (b, h, s, d, mode) in ((1, 40, 1024, 128, "direct-p"), (1, 40, 4096, 128, "direct-p"), (2, 3, 4097, 64, "fp8"),
                           (1, 12, 700, 128, "fp8"), (1, 12, 32760, 128, "direct-p")):
    layout = v_layout_args(mode)
    q, k, v = (torch.randn(b, s, h * 2, d, device="cuda", dtype=torch.bfloat16)[:, :, ::2] for _ in range(3))  # strided
    k = k + 2.0
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    res = {}
    for label, fn in (("JIT", jit_only), ("reuse", reuse), ("JIT", jit_only), ("reuse", reuse)):
        prepare._launch = fn
        bad = []
        for i in range(3):
            got = prepare.prepare_fp8(q, k, v, **layout)
            bad += [n for n in names if mismatch(getattr(got, n), getattr(want, n))]
        torch.cuda.synchronize()
        n = 200
        torch.cuda._sleep(int(2e9))  # keeps the GPU ahead: host time alone
        t0 = time.perf_counter()
        for _ in range(n):
            prepare.prepare_fp8(q, k, v, **layout)
        host = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize()
        res.setdefault(label, []).append(host)
        print(f"B{b} H{h} S{s} D{d} {mode:8s} {label:5s} bitwise={'yes' if not bad else 'NO ' + ','.join(bad)} host per prepare_fp8 call {host:.1f} us", flush=True)
    prepare._launch = reuse
