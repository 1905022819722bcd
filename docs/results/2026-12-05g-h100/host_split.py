"""Host time of an eager call, piece by piece, at a shape too small for the GPU to matter
(B1 H1 S128 D128 direct-p): microseconds per call over 2,000 calls of each piece, after warm-up,
the GPU synchronised once at the end. Then the same at B1 H40 S1024."""
import os
import sys
import time

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

sys.path.insert(0, os.getcwd())
import wan_fp4  # noqa: E402
from wan_fp4 import dispatch  # noqa: E402
from wan_fp4.kernels import prepare, sm90  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402


@triton.jit
def _one(x):
    tl.store(x, 1.0)


def per_call(fn, calls):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return 1e6 * (time.perf_counter() - t) / calls


def main():
    mode, d = "direct-p", 128
    buf = torch.zeros(4, device="cuda")
    for shape, calls in (((1, 128, 1, 128), 2000), ((1, 1024, 40, 128), 500)):
        q, k, v = (torch.randn(*shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        layout = v_layout_args(mode)
        ops = prepare.prepare_fp8(q, k, v, **layout)
        scale = d ** -0.5
        pieces = {
            "wan_fp4.attention (auto)": lambda: wan_fp4.attention(q, k, v, mode),
            "wan_fp4.attention (kernel='sm90-cute')": lambda: wan_fp4.attention(q, k, v, mode, kernel="sm90-cute"),
            "the op's implementation (dispatch._run)": lambda: dispatch._run(q, k, v, mode, "auto", scale, 1.6, 0.95,
                                                                           float("nan"), False),
            "sm90.run": lambda: sm90.run(q, k, v, mode),
            "prepare_fp8": lambda: prepare.prepare_fp8(q, k, v, **layout),
            "sm90.launch on prepared operands": lambda: sm90.launch(ops, mode, d),
            "score-range check (start + finish)": lambda: ops.start_score_range_check(mode, scale).finish(),
            "one Triton launch (one store)": lambda: _one[(1,)](buf),
            "torch.empty (one small tensor)": lambda: torch.empty(16, device="cuda"),
            "torch SDPA (cuDNN BF16 path)": lambda: F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)),
        }
        for name, fn in pieces.items():
            print(f"B{shape[0]} S{shape[1]} H{shape[2]} D{shape[3]} {name:42s} {per_call(fn, calls):8.1f} us per call",
                  flush=True)


if __name__ == "__main__":
    main()
