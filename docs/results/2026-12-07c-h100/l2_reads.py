"""The L2 hints of a short call: the quantise launch's (the package stores the codes evict-last and
reads Q, K and V evict-first) against the inputs read with no hint (READ_INPUTS_FIRST off) and no
hints at all (KEEP_CODES_IN_L2 off), and direct-p's kernel loading the Q codes and storing O
evict-first (the once_first option) with either input hint; the package's length rule, the whole call replayed from a CUDA
graph and after launches writing Q, K and V (wan_fp4.eval.graph_spans), alternated in rounds beside
cuDNN BF16. Each call sets its hints itself, so that the graphs capture them. The once_first kernels
are prebuilt with the package's into L2_PREBUILT (job.sh says how). A job script, not part of the
package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, inputs, row  # noqa: E402
from wan_fp4.eval.bench_attention import use_prebuilt_dir  # noqa: E402
from wan_fp4.eval.metrics import rel_l2  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host, length_config  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
# name: (codes kept, inputs read evict-first, the kernel's once_first)
VARIANTS = {"package": (True, True, False), "inputs plain": (True, False, False), "no hints": (False, False, False),
            "once first": (True, True, True), "plain + once first": (True, False, True)}
use_prebuilt_dir(os.environ.get("L2_PREBUILT"))
torch.manual_seed(0)
CASES = (("direct-p", (1, 1024, 40, 128)), ("fp8", (1, 1024, 40, 128)), ("direct-p", (1, 1024, 40, 64)),
         ("direct-p", (2, 320, 4, 64)), ("direct-p", (1, 2048, 40, 128)), ("direct-p", (1, 1024, 12, 128)))
CASES = CASES[:int(os.environ.get("CASES", len(CASES)))]  # the first few, where a call's time is short


def once_config(mode, shape):
    """once_first over the options the package's call takes at this (B, S, H, D)."""
    return {**length_config(mode, shape[3], shape[1], shape[1]), "once_first": True}


def kernel_names():
    """The prebuilt kernels the cases run (the shims L2_PREBUILT must hold)."""
    from wan_fp4.kernels.sm90 import launch_configs
    from wan_fp4.kernels.sm90.aot import kernel_name
    names = set()
    for mode, shape in CASES:
        # once_first is prebuilt for direct-p alone
        for config in [length_config(mode, shape[3], shape[1], shape[1])] + [once_config(mode, shape)] * (mode == "direct-p"):
            names.update(kernel_name(mode, shape[3], c) for c in launch_configs(mode, shape[3], config))
    return sorted(names)


def hinted(q, k, v, mode, keep, first, once):
    config = once_config(mode, q.shape) if once else None

    def call():
        was = prepare.KEEP_CODES_IN_L2, prepare.READ_INPUTS_FIRST
        prepare.KEEP_CODES_IN_L2, prepare.READ_INPUTS_FIRST = keep, first
        try:
            return host.run(q, k, v, mode, config=config, prebuilt=True)[0]
        finally:
            prepare.KEEP_CODES_IN_L2, prepare.READ_INPUTS_FIRST = was
    return call


if "--names" in sys.argv:
    print("\n".join(kernel_names()))
    sys.exit(0)
for mode, shape in CASES:
    b, s, h, d = shape
    q, k, v, writer, cudnn = inputs(shape)
    variants = {n: hints for n, hints in VARIANTS.items() if mode == "direct-p" or not hints[2]}
    calls = {n: hinted(q, k, v, mode, *hints) for n, hints in variants.items()}
    calls["cuDNN BF16"] = cudnn
    first = {n: fn().float() for n, fn in calls.items()}
    same = all(torch.equal(first[n], first["package"]) for n in variants)
    rep, mod = alternated(calls, writer, ROUNDS)
    print(f"B{b} H{h} S{s} D{d} {mode} ({ROUNDS} rounds; replayed | inputs written; the variants' outputs "
          f"{'bit for bit the same' if same else 'DIFFER'}; package vs cuDNN BF16 "
          f"{rel_l2(first['package'], first['cuDNN BF16']):.2e}):", flush=True)
    for n in calls:
        print(row(n, rep[n], mod[n], 18), flush=True)
    del q, k, v, writer, cudnn
    torch.cuda.empty_cache()
