"""Pre-pass launch shapes at short lengths: each variant bitwise against the torch path, then timed
from a CUDA graph; plus the bytes' floor (plain casts) on this device."""
import sys, itertools
import torch, triton.testing as tt
from wan_fp4.kernels import prepare as P
from wan_fp4.kernels.sm90.layout import v_layout_args
from wan_fp4.eval.bench_attention import graphed
from wan_fp4.eval.device_check import mismatch

layout = v_layout_args("direct-p")
names = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
shapes = [(1, 40, 1024), (1, 40, 4096), (1, 40, 7680), (1, 12, 32760)]
variants = [dict(QUANT_WARPS=8, STATS_WARPS=4, STATS_ROWS=32, STATS_STAGES=3), dict(QUANT_WARPS=4, STATS_WARPS=4, STATS_ROWS=32, STATS_STAGES=3),
            dict(QUANT_WARPS=2, STATS_WARPS=4, STATS_ROWS=32, STATS_STAGES=3)]
variants += [dict(QUANT_WARPS=4, STATS_WARPS=w, STATS_ROWS=r, STATS_STAGES=st) for w, r, st in
             ((4, 16, 3), (4, 16, 6), (4, 32, 2), (4, 32, 4), (2, 16, 3), (2, 32, 3), (2, 16, 6))]
variants.append(variants[0])
mode = sys.argv[1] if len(sys.argv) > 1 else "time"
for b, h, s in shapes:
    d = 128
    g = torch.Generator(device="cuda").manual_seed(s)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    k = k + 2.0 * torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    fn = lambda: P._prepare_triton(q, k, v, True, **layout)
    if mode == "ncu":
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        continue
    want = P.prepare_fp8(q, k, v, backend="torch", **layout)
    base = None
    for var in variants:
        for key, val in var.items():
            setattr(P, key, val)
        bad = [n for n in names for _ in range(2) if mismatch(getattr(fn(), n), getattr(want, n))]
        ms = tt.do_bench(graphed(fn, 10), warmup=5, rep=300, return_mode="median") / 10
        base = base or ms
        print(f"B{b} H{h} S{s} {var}: {ms:.4f} ms from a graph ({base / ms:.3f}x the first), bitwise: {'yes' if not bad else 'NO ' + str(bad)}", flush=True)
    for key, val in variants[0].items():
        setattr(P, key, val)
    # the floor: Q, K, V each read once and cast to FP8 (no scales), and K, V read once more
    casts = lambda: [t.to(torch.float8_e4m3fn) for t in (q, k, v)]
    reads = lambda: [t.amax() for t in (k, v)]
    for name, f, mb in (("plain casts of q, k, v", casts, 9 * q.numel() / 1e6), ("amax of k, v", reads, 2 * q.numel() * 2 / 1e6)):
        ms = tt.do_bench(graphed(f, 10), warmup=5, rep=300, return_mode="median") / 10
        print(f"B{b} H{h} S{s} floor: {name}: {ms:.4f} ms ({mb / ms / 1e3:.2f} TB/s of {mb:.0f} MB)", flush=True)
    del q, k, v, want
    torch.cuda.empty_cache()
