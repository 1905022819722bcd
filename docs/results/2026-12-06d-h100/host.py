"""Where an eager call's host time goes at short lengths: the whole call (wan_fp4.attention) and
its pieces timed on the host (perf_counter, median of many calls; the GPU work is small and
queued), then cProfile of the whole call by function. A job script, not part of the package."""
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import torch

sys.path.insert(0, os.getcwd())
import wan_fp4  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402
from wan_fp4.modes import default_scale  # noqa: E402

N = int(os.environ.get("N", 300))
layout = v_layout_args("direct-p")


def med_us(fn, n=N, sync_each=True):
    ts = []
    for _ in range(n):
        if sync_each:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(ts) * 1e6


SHAPES = {"first": ((1, 1024, 40, 128), (1, 1024, 12, 64), (1, 128, 1, 128)),
          # the second call: the order changed and H40 twice, to tell a shape's cost from a warm-up
          "again": ((1, 1024, 12, 64), (1, 1024, 40, 128), (1, 128, 1, 128), (1, 1024, 40, 128))}
for b, s, h, d in SHAPES[os.environ.get("ORDER", "first")]:
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ops = prepare.prepare_fp8(q, k, v, **layout)
    scale = default_scale(d)
    for _ in range(20):
        wan_fp4.attention(q, k, v, "direct-p")
    torch.cuda.synchronize()
    rows = {
        "wan_fp4.attention (whole eager call)": lambda: wan_fp4.attention(q, k, v, "direct-p"),
        "host.run (no dispatch, no op)": lambda: host.run(q, k, v, "direct-p"),
        "prepare_fp8": lambda: prepare.prepare_fp8(q, k, v, **layout),
        "start_score_range_check + finish": lambda: ops.start_score_range_check("direct-p", scale).finish(),
        "sm90 launch": lambda: host.launch(ops, "direct-p", d),
        "torch SDPA (cuDNN BF16), for scale": lambda: torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)),
    }
    for name, fn in rows.items():
        print(f"B{b} S{s} H{h} D{d} {name:40s} {med_us(fn):8.1f} us host (median of {N})", flush=True)
    if (s, h) == (1024, 40) and os.environ.get("ORDER", "first") == "first":
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(200):
            wan_fp4.attention(q, k, v, "direct-p")
        pr.disable()
        torch.cuda.synchronize()
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(45)
        print(out.getvalue(), flush=True)
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("cumulative").print_stats(45)
        print(out.getvalue(), flush=True)
