"""K's and V's blocks per quantise program (prepare.QUANT_PER_PROGRAM, an experiment in the working
tree): with direct-p's Q codes made in the kernel, the quantise launch at B1 H40 1,024 D128 has 640
one-block programs (4.8 an SM, three resident), and its end came 9.9 us after the statistics' (the
2026-12-07 twelfth run's trace). Two or four blocks a program read their head's column totals once
and fit one round. The whole call alternated in rounds, each from a CUDA graph, replayed and after
launches writing Q, K and V (rounds.py); each variant's output first compared bit for bit with the
package's. A job script, not part of the package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, inputs, row  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
PACKAGE = prepare.quant_launch
VARIANTS = {"package (1 a program)": (1, None), "2 a program": (2, None), "2, 4 warps": (2, (4, None)),
            "4 a program": (4, None)}


def use(name):
    per, shape = VARIANTS[name]
    prepare.QUANT_PER_PROGRAM = per
    prepare.quant_launch = PACKAGE if shape is None else (lambda blocks, sms, head_dim: shape)


if __name__ == "__main__":
    torch.manual_seed(0)
    for shape in ((1, 1024, 40, 128), (1, 1024, 12, 128), (1, 1024, 40, 64), (1, 2048, 40, 128), (2, 320, 4, 64)):
        b, s, h, d = shape
        q, k, v, writer, cudnn = inputs(shape)
        outs = {}
        for name in VARIANTS:
            use(name)
            outs[name] = host.run(q, k, v, "direct-p", prebuilt=True)[0].clone()
        base = outs["package (1 a program)"]
        same = " ".join(f"{n.split(' (')[0]}={torch.equal(o.view(torch.int16), base.view(torch.int16))}"
                        for n, o in outs.items())

        def variant(name):
            def call():
                use(name)
                return host.run(q, k, v, "direct-p", prebuilt=True)[0]
            return call
        calls = {n: variant(n) for n in VARIANTS}
        calls["cuDNN BF16"] = cudnn
        rep, mod = alternated(calls, writer, ROUNDS)
        use("package (1 a program)")
        print(f"B{b} H{h} S{s} D{d} direct-p ({ROUNDS} rounds; replayed | inputs written); same bits: {same}",
              flush=True)
        for n in calls:
            print(row(n, rep[n], mod[n], 22), flush=True)
        del q, k, v, writer, cudnn, calls
        torch.cuda.empty_cache()
