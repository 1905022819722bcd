"""The pre-pass's column statistics with more loads in flight: each loop step of a statistics
program loads UNROLL tiles of 32 keys (prepare.STATS_UNROLL for the three-launch path's statistics
launch, prepare.SHORT_UNROLL for the one-launch path's whole-head programs), module constants set in
one process. Per shape: every variant's bytes against the torch path (two calls); then, two rounds,
the pre-pass from a CUDA graph of 10 calls and the whole direct-p call from a graph and eagerly."""
import sys
from functools import partial

import torch
import triton.testing as tt

sys.path.insert(0, ".")
from wan_fp4.eval.bench_attention import graphed, use_prebuilt_dir  # noqa: E402
from wan_fp4.eval.device_check import mismatch  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

NAMES = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
layout = v_layout_args("direct-p")
use_prebuilt_dir(sys.argv[1] if len(sys.argv) > 1 else None)
real = prepare._prepare_triton
# (label, launches, STATS_UNROLL, SHORT_UNROLL)
VARIANTS = [("3 launches", 3, 1, 1), ("3 launches, unroll 2", 3, 2, 1), ("3 launches, unroll 4", 3, 4, 1),
            ("1 launch", 1, 1, 1), ("1 launch, unroll 4", 1, 1, 4), ("1 launch, unroll 8", 1, 1, 8)]


def med(fn, rep=200):
    return tt.do_bench(fn, warmup=10, rep=rep, return_mode="median")


def use(v):
    prepare._prepare_triton = partial(real, launches=v[1])
    prepare.STATS_UNROLL, prepare.SHORT_UNROLL = v[2], v[3]


for b, h, s, d in ((1, 40, 1024, 128), (1, 12, 1024, 128), (1, 40, 2048, 128), (1, 40, 4096, 128),
                   (1, 40, 7680, 128), (1, 12, 32760, 128), (1, 40, 32760, 128)):
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    k = k + 2.0 * torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    variants = [x for x in VARIANTS if x[1] == 3 or s <= 4096]
    for var in variants:
        use(var)
        bad = [f"{f} (call {i})" for i in range(2) for f in NAMES
               if mismatch(getattr(prepare.prepare_fp8(q, k, v, **layout), f), getattr(want, f))]
        print(f"B{b} H{h} S{s} D{d} {var[0]}: == torch path bitwise: {'yes' if not bad else 'NO ' + ', '.join(bad)}",
              flush=True)
    rep = 200 if s < 32760 else 500
    for rnd in range(2):
        line = []
        for var in variants:
            use(var)
            pre = med(graphed(lambda: prepare.prepare_fp8(q, k, v, **layout), 10), rep) / 10 * 1e3
            txt = f"{var[0]}: pre-pass {pre:.1f}"
            if s <= 4096 or var[2] in (1, 4):
                call_g = med(graphed(lambda: host.run(q, k, v, "direct-p", prebuilt=True), 10), rep) / 10 * 1e3
                txt += f", call {call_g:.1f} from a graph"
            if s <= 4096:
                txt += f", {med(lambda: host.run(q, k, v, 'direct-p', prebuilt=True)) * 1e3:.1f} eager"
            line.append(txt)
        print(f"B{b} H{h} S{s} D{d} round {rnd}, us: " + "; ".join(line), flush=True)
    prepare._prepare_triton = real
    del q, k, v, want
    torch.cuda.empty_cache()
