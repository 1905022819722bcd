"""The package with Q's codes made in the kernel (direct-p's default quant_q 2, docs/SM90_GEN2.md
item 60) against the same kernels with Q's codes from the pre-pass (quant_q 0, host.run's fallback
kernels, prebuilt beside the defaults), the whole call alternated in rounds, replayed from a CUDA
graph and after launches writing Q, K and V: at the Wan shapes, where the first run had two noisy
rounds, and at the short shapes beside cuDNN BF16. A job script, not part of the package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, inputs, row  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.config import default_config, length_config  # noqa: E402

if __name__ == "__main__":
    torch.manual_seed(0)
    cases = ((1, 32760, 12, 128, 6), (1, 75600, 40, 128, 3), (1, 32760, 40, 128, 4),
             (1, 1024, 40, 128, 4), (2, 320, 4, 64, 4), (1, 4096, 40, 128, 4))
    for b, s, h, d, rounds in cases[:int(os.environ.get("CASES", len(cases)))]:
        base = length_config("direct-p", d, s, s)
        assert default_config("direct-p", d, base)["quant_q"] == 2
        q, k, v, writer, cudnn = inputs((b, s, h, d))
        calls = {"package": lambda: host.run(q, k, v, "direct-p", prebuilt=True)[0],
                 "quant_q 0": lambda: host.run(q, k, v, "direct-p", config={**base, "quant_q": 0}, prebuilt=True)[0]}
        if s <= 4096:
            calls["cuDNN BF16"] = cudnn
        rep, mod = alternated(calls, writer, rounds)
        print(f"B{b} H{h} S{s} D{d} direct-p ({rounds} rounds; replayed | inputs written):", flush=True)
        for n in calls:
            print(row(n, rep[n], mod[n], 12), flush=True)
        del q, k, v, writer, cudnn, calls
        torch.cuda.empty_cache()
