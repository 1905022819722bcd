"""The whole direct-p call from a CUDA graph at short and Wan lengths (B1, D128), for the variant of
prepare.py in place: argv[1] its label, argv[2:] the lengths to run as HxS (default all)."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import wan_fp4  # noqa: E402
from profile_sm90_device import _graph_ms  # noqa: E402

SHAPES = ((40, 1024), (40, 2048), (40, 4096), (40, 7680), (40, 16384), (12, 32760), (40, 32760), (40, 75600))


def main(label, shapes):
    for h, s in shapes:
        q, k, v = (torch.randn(1, s, h, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        calls = 20 if s <= 16384 else 2
        ms = _graph_ms(lambda: wan_fp4.attention(q, k, v, "direct-p", kernel="sm90-cute"), calls, rep=200 if s < 32760 else 400)
        print(f"[{label}] H{h} S{s} whole call {ms * 1e3:10.2f} us", flush=True)
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    picked = [tuple(int(x) for x in a.split("x")) for a in sys.argv[2:]] or SHAPES
    main(sys.argv[1], picked)
