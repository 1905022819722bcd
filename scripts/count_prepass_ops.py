"""Per-call inventory of the FP8 pre-pass and the score-range check, counted on the CPU.

Runs prepare_fp8 (Triton kernels under the interpreter, the CUDA path's code; and the torch
path) and the score-range check on ordinary B1 H2 inputs, and prints what each ran: launches
(Triton kernels + torch ops that are kernels on a GPU), allocations, host reads (.item()).

    python scripts/count_prepass_ops.py [--seq 320] [--head-dim 128]
"""
import argparse
import json
import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch  # noqa: E402

from wan_fp4.eval.op_count import count_ops  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=320)
    ap.add_argument("--head-dim", type=int, default=128)
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, args.seq, 2, args.head_dim, generator=g).bfloat16() for _ in range(3))
    for backend in ("triton", "torch"):
        box = {}

        def prep():
            box["ops"] = prepare.prepare_fp8(q, k, v, backend=backend, **v_layout_args("direct-p"))

        made = count_ops(prep)
        checked = count_ops(lambda: box["ops"].check_score_range("direct-p", args.head_dim ** -0.5))
        print(json.dumps({"backend": backend, "prepare_fp8": made.summary(),
                          "check_score_range": checked.summary()}, indent=1))


if __name__ == "__main__":
    main()
