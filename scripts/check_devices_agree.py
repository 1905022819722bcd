#!/usr/bin/env python3
"""Each GPU of the machine gives the same attention output for the same inputs, and dispatch picks
the same kernel on each: what multi-GPU runs (Ulysses) rely on. Prints one line per mode."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import wan_fp4  # noqa: E402
from wan_fp4.eval.metrics import rel_l2  # noqa: E402


def main():
    n = torch.cuda.device_count()
    if n < 2:
        sys.exit("needs at least 2 GPUs")
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4097, 20, 128, dtype=torch.bfloat16) for _ in range(3))
    ok = True
    for mode in ("direct-p", "fp8"):
        outs, kernels = [], []
        for d in range(n):
            with torch.cuda.device(d):
                qd, kd, vd = (t.to(f"cuda:{d}") for t in (q, k, v))
                kernels.append(wan_fp4.kernel_for(qd, mode, kd, vd))
                outs.append(wan_fp4.attention(qd, kd, vd, mode).cpu())
        same = all(torch.equal(outs[0], o) for o in outs[1:])
        diff = max(rel_l2(o, outs[0]) for o in outs[1:])
        print(f"{mode}: kernels per GPU {kernels}, bit-identical {same}, max rel-L2 vs GPU 0 {diff:.2e}")
        ok &= same and len(set(kernels)) == 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
