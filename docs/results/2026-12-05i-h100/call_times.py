"""The whole call from a CUDA graph of 20 calls (us), for the prepare.py in place; run once per
variant in alternating processes (job.sh `vs_head`) to compare the package with its parent commit."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import wan_fp4  # noqa: E402
from profile_sm90_device import _graph_ms  # noqa: E402

CASES = (("direct-p", 40, 1024, 1024, 128), ("fp8", 40, 1024, 1024, 128), ("direct-p", 40, 2048, 2048, 128),
         ("direct-p", 40, 4096, 4096, 128), ("direct-p", 12, 32760, 512, 128))
row = []
for mode, h, sq, skv, d in CASES:
    q = torch.randn(1, sq, h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, skv, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ms = min(_graph_ms(lambda: wan_fp4.attention(q, k, v, mode, kernel="sm90-cute"), 20) for _ in range(3))
    row.append(f"{mode} H{h} Sq{sq} Skv{skv} D{d} {ms * 1e3:.1f}")
print(sys.argv[1], " | ".join(row), flush=True)
