"""The pre-pass in one launch for short sequences (prepare._quant_short_kernel) against the three
launches, both through prepare._prepare_triton(launches=...) in one process. Per shape: each
path's bytes against the torch path (two calls, every field); then, interleaved over two rounds,
the pre-pass from a CUDA graph of 10 calls, the whole direct-p call (wan_fp4 sm90 host.run) from a
graph and eagerly (do_bench medians); cuDNN BF16 (torch SDPA) beside it at H40 D128."""
import sys
from functools import partial

import torch
import torch.nn.functional as F
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


def med(fn, rep=200):
    return tt.do_bench(fn, warmup=10, rep=rep, return_mode="median")


for b, h, s, d in ((1, 40, 1024, 128), (1, 12, 1024, 128), (2, 40, 1024, 128), (1, 40, 2048, 128),
                   (1, 40, 4096, 128), (1, 12, 2048, 64), (1, 40, 1024, 64)):
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    k = k + 2.0 * torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    for n in (1, 3):
        bad = [f"{f} (call {i})" for i in range(2) for f in NAMES
               if mismatch(getattr(real(q, k, v, True, launches=n, **layout), f), getattr(want, f))]
        print(f"B{b} H{h} S{s} D{d} {n} launch(es): == torch path bitwise: {'yes' if not bad else 'NO ' + ', '.join(bad)}",
              flush=True)
    for rnd in range(2):
        line = []
        for n in (1, 3):
            prepare._prepare_triton = partial(real, launches=n)
            pre = med(graphed(lambda: prepare.prepare_fp8(q, k, v, **layout), 10)) / 10 * 1e3
            call_g = med(graphed(lambda: host.run(q, k, v, "direct-p", prebuilt=True), 10)) / 10 * 1e3
            call_e = med(lambda: host.run(q, k, v, "direct-p", prebuilt=True)) * 1e3
            line.append(f"{n} launch(es): pre-pass {pre:.1f}, call {call_g:.1f} from a graph, {call_e:.1f} eager")
        prepare._prepare_triton = real
        if h == 40 and d == 128 and b == 1:
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                sd = lambda: F.scaled_dot_product_attention(qt, kt, vt)  # noqa: E731
                sd()
                line.append(f"cuDNN BF16 {med(graphed(sd, 10)) / 10 * 1e3:.1f} from a graph, {med(sd) * 1e3:.1f} eager")
        print(f"B{b} H{h} S{s} D{d} round {rnd}, us: " + "; ".join(line), flush=True)
    del q, k, v, want
    torch.cuda.empty_cache()
