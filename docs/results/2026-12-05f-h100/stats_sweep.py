"""The column statistics' launch (prepare._column_partials) under each launch shape, alone and in
the whole pre-pass, from a CUDA graph, at B1 H40 D128 1,024 / 4,096 tokens and the Wan shapes; the
pre-pass's bytes checked against the torch path for every shape. A job script, not part of the
package: the shapes are prepare's module constants, set here in turn."""
import itertools
import os
import sys

import torch
import triton.testing as tt

sys.path.insert(0, os.getcwd())
from wan_fp4.eval.bench_attention import graphed  # noqa: E402
from wan_fp4.eval.device_check import mismatch  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402


def us(fn, calls=10):
    return tt.do_bench(graphed(fn, calls), warmup=5, rep=200, return_mode="median") / calls * 1e3


layout = v_layout_args("direct-p")
names = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
default = (prepare.STATS_WARPS, prepare.STATS_ROWS, prepare.STATS_STAGES)
for b, h, s in ((1, 40, 1024), (1, 40, 4096), (1, 12, 32760), (1, 40, 75600)):
    q, k, v = (torch.randn(b, s, h, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    k = k + 2.0 * torch.randn(b, 1, h, 128, device="cuda", dtype=torch.bfloat16)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    stats = torch.empty(prepare.RANGE_STATS, device="cuda")
    for warps, rows, stages in itertools.product((4, 8), (16, 32, 64), (1, 2, 3)):
        prepare.STATS_WARPS, prepare.STATS_ROWS, prepare.STATS_STAGES = warps, rows, stages
        got = prepare.prepare_fp8(q, k, v, **layout)
        bad = [n for n in names if mismatch(getattr(got, n), getattr(want, n))]
        alone = us(lambda: prepare._column_partials(k, v, stats))
        whole = us(lambda: prepare.prepare_fp8(q, k, v, **layout))
        mark = " (today's)" if (warps, rows, stages) == default else ""
        print(f"B{b} H{h} S{s} warps {warps} rows {rows:2d} stages {stages}: partials {alone:7.1f} us, pre-pass "
              f"{whole:7.1f} us, bytes == torch path: {'yes' if not bad else 'NO ' + ', '.join(bad)}{mark}", flush=True)
    prepare.STATS_WARPS, prepare.STATS_ROWS, prepare.STATS_STAGES = default
    del q, k, v, want
    torch.cuda.empty_cache()
