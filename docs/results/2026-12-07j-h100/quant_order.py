"""The order the quantise launch's blocks start in (prepare.QUANT_ORDER): 0, head by head (the
package); 1, every head's first block, then every head's second (all Q blocks first); 2, the same
with K's and V's blocks first, so that Q's reads from DRAM run after the statistics launch's, not
beside them (docs/SM90_GEN2.md item 56: Q's blocks are worth up to 2.3-2.7 us of the replayed
1,024-token call). The whole call replayed from a CUDA graph and after launches writing Q, K and V
(wan_fp4.eval.graph_spans), alternated in rounds beside cuDNN BF16, the package's prebuilt attention
kernels; then the pre-pass alone (prepare_fp8) at the Wan shapes, alternated the same way. Each
call sets the order itself, so that the graphs capture its launch. A job script, not part of the
package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, inputs, row  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
VARIANTS = {"0: head by head": 0, "1: Q blocks first": 1, "2: Q blocks last": 2}
CASES = (("direct-p", (1, 1024, 40, 128)), ("fp8", (1, 1024, 40, 128)), ("direct-p", (1, 1024, 12, 128)),
         ("direct-p", (1, 2048, 40, 128)), ("direct-p", (1, 1024, 40, 64)), ("direct-p", (2, 320, 4, 64)))
LONG = ((1, 32760, 12, 128), (1, 32760, 12, 64), (1, 75600, 40, 128))


def with_order(order, fn):
    def call():
        was = prepare.QUANT_ORDER
        prepare.QUANT_ORDER = order
        try:
            return fn()
        finally:
            prepare.QUANT_ORDER = was
    return call


def same_codes(a, b):
    return all(torch.equal(getattr(a, n).view(torch.uint8), getattr(b, n).view(torch.uint8)) for n in ("q8", "k8", "v8t")) \
        and all(torch.equal(getattr(a, n), getattr(b, n)) for n in ("q_scale", "k_scale", "v_scale", "k_mean"))


torch.manual_seed(0)
for mode, shape in CASES[:int(os.environ.get("CASES", len(CASES)))]:
    b, s, h, d = shape
    q, k, v, writer, cudnn = inputs(shape)
    calls = {n: with_order(r, lambda: host.run(q, k, v, mode, prebuilt=True)[0]) for n, r in VARIANTS.items()}
    prep = [with_order(r, lambda: prepare.prepare_fp8(q, k, v, **v_layout_args(mode)))() for r in VARIANTS.values()]
    calls["cuDNN BF16"] = cudnn
    rep, mod = alternated(calls, writer, ROUNDS)
    print(f"B{b} H{h} S{s} D{d} {mode} ({ROUNDS} rounds; replayed | inputs written; the codes and scales "
          f"{'bit for bit the same' if all(same_codes(prep[0], x) for x in prep[1:]) else 'DIFFER'}):", flush=True)
    for n in calls:
        print(row(n, rep[n], mod[n], 18), flush=True)
    del q, k, v, writer, cudnn, prep
    torch.cuda.empty_cache()
for shape in LONG:
    b, s, h, d = shape
    q, k, v, writer, _ = inputs(shape)
    calls = {n: with_order(r, lambda: prepare.prepare_fp8(q, k, v, **v_layout_args("direct-p")).q8)
             for n, r in VARIANTS.items()}
    rep, mod = alternated(calls, writer, ROUNDS)
    print(f"B{b} H{h} S{s} D{d} the pre-pass alone, direct-p's layout ({ROUNDS} rounds; replayed | inputs written):",
          flush=True)
    for n in calls:
        print(row(n, rep[n], mod[n], 18), flush=True)
    del q, k, v, writer
    torch.cuda.empty_cache()
