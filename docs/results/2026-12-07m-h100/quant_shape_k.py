"""The quantise launch's shape now that it quantises K and V only (direct-p's Q codes are made in
the kernel, docs/SM90_GEN2.md item 60): at B1 H40 1,024 tokens D128 it has 640 blocks (4.8 an SM on
132 SMs), where eight warps at 80 registers (prepare.QUANT_SHORT) keep three an SM resident, so
the blocks run in two rounds. Variants of prepare.quant_launch's answer (warps, register limit),
set at run time, against the package's: the whole call alternated in rounds, each from a CUDA
graph, replayed and after launches writing Q, K and V (rounds.py), each variant's output compared
bit for bit with the package's first. A job script, not part of the package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, inputs, row  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "4"))
PACKAGE = prepare.quant_launch
VARIANTS = {"package": None, "8 warps, 64 reg": (8, 64), "4 warps, 96 reg": (4, 96), "4 warps": (4, None),
            "16 warps, 40 reg": (16, 40)}


def use(name):
    shape = VARIANTS[name]
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
        same = " ".join(f"{n}={torch.equal(o.view(torch.int16), outs['package'].view(torch.int16))}"
                        for n, o in outs.items())

        def variant(name):
            def call():
                use(name)
                return host.run(q, k, v, "direct-p", prebuilt=True)[0]
            return call
        calls = {n: variant(n) for n in VARIANTS}
        calls["cuDNN BF16"] = cudnn
        rep, mod = alternated(calls, writer, ROUNDS)
        use("package")
        blocks = 2 * b * h * -(-s // 128)
        print(f"B{b} H{h} S{s} D{d} direct-p, {blocks} K and V blocks, package {PACKAGE(blocks, 132, d)} "
              f"({ROUNDS} rounds; replayed | inputs written); same bits: {same}", flush=True)
        for n in calls:
            print(row(n, rep[n], mod[n], 18), flush=True)
        del q, k, v, writer, cudnn, calls
        torch.cuda.empty_cache()
