"""Where the persistent kernel (docs/SM90_GEN2.md items 68, 70 and 73) gains beyond the lengths its
rule covers (config.PERSISTENT_TOKENS, 4,096): the package's call against the same call with
`persistent` 132 and with one unit a CTA (`persistent` 0) where key tiles are a multiple of 4: Wan's
self-attention at 32,760 tokens, the text cross-attention (512 keys), 8,192 tokens, and 1,024 and
2,048 again (the rule's own lengths, where the package is the persistent kernel), alternated in
rounds from CUDA graphs, replayed and after a launch writing the inputs (rounds.py); the bits first.
A job script, not part of the package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, row  # noqa: E402
from wan_fp4.eval import graph_spans  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.config import length_config  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
VARIANTS = {"persistent 132": {"persistent": 132}, "one unit a CTA": {"persistent": 0}}
# (B, Sq, Skv, H, D)
SHAPES = ((1, 1024, 1024, 40, 128), (1, 2048, 2048, 40, 128), (1, 1024, 1024, 12, 128),
          (1, 8192, 8192, 40, 128), (1, 32760, 32760, 12, 128), (1, 32760, 32760, 40, 128),
          (1, 32760, 512, 12, 128), (1, 75600, 512, 40, 128))

if __name__ == "__main__":
    torch.manual_seed(0)
    for b, sq, skv, h, d in SHAPES:
        q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, skv, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        base = length_config("direct-p", d, sq, skv)
        calls = {"package": lambda: host.run(q, k, v, "direct-p", prebuilt=True)[0]}
        for n, extra in VARIANTS.items():
            calls[n] = (lambda e: lambda: host.run(q, k, v, "direct-p", config={**base, **e}, prebuilt=True)[0])(extra)
        ref = calls["package"]()
        same = {n: torch.equal(calls[n]().view(torch.int16), ref.view(torch.int16)) for n in VARIANTS}
        rep, mod = alternated(calls, graph_spans.input_writer(q, k, v), ROUNDS)
        print(f"B{b} Sq{sq} Skv{skv} H{h} D{d} direct-p, same bits {same} ({ROUNDS} rounds; replayed | "
              f"inputs written)", flush=True)
        for n in calls:
            print(row(n, rep[n], mod[n], 16), flush=True)
        del q, k, v, calls, ref
        torch.cuda.empty_cache()
