"""Error against exact attention of rows split in k key segments (reference.attention segments=k) over
the unsplit rows' error, per seed: N(0,1) BF16, B1 H2, 512 queries over 4,096 keys, D128.
Run: PYTHONPATH=. python3 docs/results/2026-12-05-cpu/segments_accuracy.py"""
import torch
from wan_fp4 import reference
from wan_fp4.eval.metrics import rel_l2
for mode in ("fp8", "direct-p"):
    for k in (2, 3, 11):
        ratios = []
        for seed in range(4):
            g = torch.Generator().manual_seed(seed)
            q, kk, v = (torch.randn(1, 512 if i == 0 else 4096, 2, 128, generator=g).to(torch.bfloat16) for i in range(3))
            seg = torch.full((1, 2, 512), k)
            ex = reference.attention(q.float(), kk.float(), v.float(), "bf16")
            a = rel_l2(reference.attention(q, kk, v, mode), ex)
            b = rel_l2(reference.attention(q, kk, v, mode, segments=seg), ex)
            ratios.append(b / a)
        print(mode, k, " ".join(f"{r:.3f}" for r in ratios), flush=True)
