"""EXPERIMENT: the quantise launch's head order and L2 hints. Bitwise equality, pre-pass and whole call times."""
import sys, torch, triton.testing as tt
sys.path.insert(0, ".")
from wan_fp4.eval.bench_attention import graphed, use_prebuilt_dir
from wan_fp4.eval.device_check import mismatch
from wan_fp4.kernels import prepare, sm90
from wan_fp4.kernels.sm90.layout import v_layout_args
use_prebuilt_dir(".device/sm90")
layout = v_layout_args("direct-p")
names = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
variants = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 0)]
shapes = [(1, 40, 1024), (1, 40, 4096), (1, 40, 7680), (1, 40, 16384), (1, 12, 32760), (1, 40, 32760)]
if len(sys.argv) > 1:
    shapes = shapes[: int(sys.argv[1])]
for b, h, s in shapes:
    d = 128
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    k = k + 2.0 * torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    for var in variants:
        prepare._L2[:] = list(var)
        bad = []
        for i in range(3):
            got = prepare.prepare_fp8(q, k, v, **layout)
            bad += [n for n in names if mismatch(getattr(got, n), getattr(want, n))]
        pre = lambda: prepare._prepare_triton(q, k, v, True, **layout)
        call = lambda: sm90.sm90_attention(q, k, v, "direct-p", prebuilt=True)
        pe = tt.do_bench(pre, warmup=25, rep=300, return_mode="median")
        pg = tt.do_bench(graphed(pre, 10), warmup=5, rep=300, return_mode="median") / 10
        ce = tt.do_bench(call, warmup=25, rep=400, return_mode="median")
        cg = tt.do_bench(graphed(call, 5), warmup=5, rep=400, return_mode="median") / 5
        print(f"B{b} H{h} S{s} reverse={var[0]} evict={var[1]} bitwise={'yes' if not bad else 'NO ' + ','.join(bad)} "
              f"pre-pass {pe:.4f} eager {pg:.4f} graph | call {ce:.4f} eager {cg:.4f} graph", flush=True)
    del q, k, v, want
    torch.cuda.empty_cache()
