"""Where the persistent kernel (docs/SM90_GEN2.md items 68, 70 and 73) gains beyond the lengths its
rule covers (config.PERSISTENT_TOKENS, 4,096): the package's call against the same call on the other
grid, where key tiles are a multiple of 4: `persistent` 132 at Wan's self-attention (32,760 tokens),
the text cross-attention (512 keys) and 8,192 tokens; one unit a CTA (`persistent` 0) at 1,024 and
2,048 tokens again (the rule's own lengths, where the package is the persistent kernel), alternated in
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
# (B, Sq, Skv, H, D): the Wan shapes first (a device call may stop early), then 8,192 tokens and the
# rule's own lengths
SHAPES = ((1, 32760, 32760, 40, 128), (1, 32760, 512, 12, 128), (1, 75600, 512, 40, 128),
          (1, 32760, 32760, 12, 128), (1, 8192, 8192, 40, 128), (1, 1024, 1024, 40, 128),
          (1, 2048, 2048, 40, 128), (1, 1024, 1024, 12, 128))

if __name__ == "__main__":
    torch.manual_seed(0)
    for b, sq, skv, h, d in SHAPES:
        q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, skv, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        base = length_config("direct-p", d, sq, skv)
        # the package against the other grid: one unit a CTA where the rule gives persistent, else it
        variants = {"one unit a CTA": {"persistent": 0}} if base.get("persistent") else {"persistent 132":
                                                                                        {"persistent": 132}}
        calls = {"package": lambda: host.run(q, k, v, "direct-p", prebuilt=True)[0]}
        for n, extra in variants.items():
            calls[n] = (lambda e: lambda: host.run(q, k, v, "direct-p", config={**base, **e}, prebuilt=True)[0])(extra)
        ref = calls["package"]()
        same = {n: torch.equal(calls[n]().view(torch.int16), ref.view(torch.int16)) for n in variants}
        rep, mod = alternated(calls, graph_spans.input_writer(q, k, v), ROUNDS)
        print(f"B{b} Sq{sq} Skv{skv} H{h} D{d} direct-p, same bits {same} ({ROUNDS} rounds; replayed | "
              f"inputs written)", flush=True)
        for n in calls:
            print(row(n, rep[n], mod[n], 16), flush=True)
        del q, k, v, calls, ref
        torch.cuda.empty_cache()
