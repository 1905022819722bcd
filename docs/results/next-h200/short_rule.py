"""config.length_config as committed (fold 1 for direct-p at D128 and D64 and fp8 at D128 where both
lengths are at most SHORT_TOKENS; direct-p D128's persistent grid up to PERSISTENT_TOKENS where the
key tiles come in fours) against each (mode, D)'s defaults everywhere (config={}), the
package's own prebuilt kernels:
the whole call replayed from a CUDA graph and after launches writing Q, K and V
(wan_fp4.eval.graph_spans), alternated in rounds, beside cuDNN BF16 (SDPA) timed the same two ways in
the same rounds. A job script, not part of the package."""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, inputs, row  # noqa: E402
from wan_fp4.eval.metrics import rel_l2  # noqa: E402
from wan_fp4.kernels.sm90 import host, length_config  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
torch.manual_seed(0)
CASES = (("direct-p", (1, 1024, 40, 128)), ("direct-p", (1, 1024, 12, 128)), ("direct-p", (1, 2048, 40, 128)),
         ("fp8", (1, 1024, 40, 128)), ("direct-p", (1, 1024, 40, 64)), ("direct-p", (2, 320, 4, 64)))
for mode, shape in CASES:
    b, s, h, d = shape
    q, k, v, writer, cudnn = inputs(shape)
    calls = {n: (lambda c=c: host.run(q, k, v, mode, config=c, prebuilt=True)[0])
             for n, c in (("package", None), ("defaults", {}))}
    calls["cuDNN BF16"] = cudnn
    first = {n: fn().float() for n, fn in calls.items()}
    exact = F.scaled_dot_product_attention(*(x.transpose(1, 2).float() for x in (q, k, v))).transpose(1, 2)
    rep, mod = alternated(calls, writer, ROUNDS)
    print(f"B{b} H{h} S{s} D{d} {mode}, the package's short options {length_config(mode, d, s, s)} "
          f"({ROUNDS} rounds; replayed | inputs written; package vs defaults output {rel_l2(first['package'], first['defaults']):.2e}; vs exact: "
          + ", ".join(f"{n} {rel_l2(first[n], exact):.2e}" for n in calls) + "):", flush=True)
    for n in calls:
        print(row(n, rep[n], mod[n], 10), flush=True)
    del q, k, v, writer, cudnn
    torch.cuda.empty_cache()
