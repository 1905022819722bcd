"""Where a persistent CTA's per-unit cost lies (docs/SM90_GEN2.md item 64): the counter-fed
persistent kernel capped at 132 CTAs against the same kernel with its cap past the launch's units
(every CTA runs one unit, then finds none: the persistent code with no unit after the first), and
the package. Bits first, then the whole call alternated in rounds from CUDA graphs (rounds.py).
A job script, not part of the package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, inputs, row  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.config import length_config  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
CAPS = {"persistent 132": 132, "one unit a CTA": 1_000_000}


def config(q, cap):
    return {**length_config("direct-p", q.shape[-1], q.shape[1], q.shape[1]), "persistent": cap}


if __name__ == "__main__":
    torch.manual_seed(0)
    for shape in ((1, 1024, 40, 128), (2, 1000, 3, 128), (1, 4096, 40, 128)):
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        base = host.run(q, k, v, "direct-p", prebuilt=True)[0]
        same = {n: torch.equal(host.run(q, k, v, "direct-p", config=config(q, c), prebuilt=True)[0].view(torch.int16),
                               base.view(torch.int16)) for n, c in CAPS.items()}
        print(f"bits B{shape[0]} S{shape[1]} H{shape[2]}: {same}", flush=True)
    for shape in ((1, 1024, 40, 128), (1, 2048, 40, 128), (1, 4096, 40, 128)):
        b, s, h, d = shape
        q, k, v, writer, cudnn = inputs(shape)
        calls = {"package": lambda: host.run(q, k, v, "direct-p", prebuilt=True)[0]}
        for n, c in CAPS.items():
            calls[n] = (lambda c: lambda: host.run(q, k, v, "direct-p", config=config(q, c), prebuilt=True)[0])(c)
        calls["cuDNN BF16"] = cudnn
        rep, mod = alternated(calls, writer, ROUNDS)
        print(f"B{b} H{h} S{s} D{d} direct-p ({ROUNDS} rounds; replayed | inputs written)", flush=True)
        for n in calls:
            print(row(n, rep[n], mod[n], 16), flush=True)
        del q, k, v, writer, cudnn, calls
        torch.cuda.empty_cache()
