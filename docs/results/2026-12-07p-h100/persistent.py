"""The persistent schedule (sm90 kernel option `persistent`, docs/SM90_GEN2.md items 63-64): at most
132 CTAs, CTA i taking work unit i, then the units a counter hands out (the producer warp takes each
and passes it to the consumers through shared memory), its producer loading the next unit's first K
and V tiles while its consumers run the epilogue and make the next unit's Q codes. First each shape's
output against the package's, bit for bit (awkward shapes included); then the whole call alternated
in rounds, each from a CUDA graph, replayed and after launches writing Q, K and V (rounds.py),
beside cuDNN BF16. A job script, not part of the package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, inputs, row  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.config import length_config  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))


def persistent(q):
    return {**length_config("direct-p", q.shape[-1], q.shape[1], q.shape[1]), "persistent": True}


if __name__ == "__main__":
    torch.manual_seed(0)
    # (B, S, H, D): the target's shape, a split and an unsplit short launch, units past 2 a CTA,
    # lengths not multiples of 128, a batch, fewer units than SMs
    for shape in ((1, 1024, 40, 128), (1, 1024, 12, 128), (1, 2048, 40, 128), (2, 1000, 3, 128), (3, 700, 7, 128),
                  (1, 333, 5, 128), (1, 4096, 40, 128), (2, 1900, 11, 128), (1, 32760, 12, 128)):
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        base = host.run(q, k, v, "direct-p", prebuilt=True)[0]
        outs = []
        for rep in range(2):
            out = torch.full_like(base, float("nan"))  # poisoned: every row must be written
            out.copy_(host.run(q, k, v, "direct-p", config=persistent(q), prebuilt=True)[0])
            outs.append(out)
        torch.cuda.synchronize()
        same = all(torch.equal(o.view(torch.int16), base.view(torch.int16)) for o in outs)
        print(f"bits B{shape[0]} S{shape[1]} H{shape[2]} D{shape[3]}: persistent == package: {same}, "
              f"finite: {bool(torch.isfinite(outs[0]).all())}", flush=True)
    for shape in ((1, 1024, 40, 128), (1, 1024, 12, 128), (1, 2048, 40, 128), (1, 4096, 40, 128), (1, 32760, 12, 128)):
        b, s, h, d = shape
        q, k, v, writer, cudnn = inputs(shape)
        calls = {"package": lambda: host.run(q, k, v, "direct-p", prebuilt=True)[0],
                 "persistent": lambda: host.run(q, k, v, "direct-p", config=persistent(q), prebuilt=True)[0],
                 "cuDNN BF16": cudnn}
        rep, mod = alternated(calls, writer, ROUNDS if s < 32760 else 2)
        print(f"B{b} H{h} S{s} D{d} direct-p ({ROUNDS} rounds; replayed | inputs written)", flush=True)
        for n in calls:
            print(row(n, rep[n], mod[n], 12), flush=True)
        del q, k, v, writer, cudnn, calls
        torch.cuda.empty_cache()
