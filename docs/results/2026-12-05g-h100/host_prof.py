"""cProfile of an eager call's host pieces at B1 H1 S128 D128 direct-p (the GPU idle): prepare_fp8,
sm90.run and wan_fp4.attention, 1,000 calls each, the 30 largest own times."""
import cProfile
import io
import os
import pstats
import sys

import torch

sys.path.insert(0, os.getcwd())
import wan_fp4  # noqa: E402
from wan_fp4.kernels import prepare, sm90  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

q, k, v = (torch.randn(1, 128, 1, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
layout = v_layout_args("direct-p")
pieces = {
    "prepare_fp8": lambda: prepare.prepare_fp8(q, k, v, **layout),
    "sm90.run": lambda: sm90.run(q, k, v, "direct-p"),
    "wan_fp4.attention": lambda: wan_fp4.attention(q, k, v, "direct-p"),
}
for name, fn in pieces.items():
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(1000):
        fn()
    pr.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30)
    print(f"===== {name}\n{s.getvalue()}", flush=True)
