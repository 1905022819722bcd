"""Where a short call's DRAM traffic goes: run under ncu (job.sh l2_traffic), each launch's bytes
read from and written to DRAM and L2's hit rate, for the package's direct-p call or cuDNN BF16 at B1
H40 1,024 D128, on the same inputs call after call (the replayed reading) or each call after
launches writing Q, K and V (as a model leaves them). Each call is one replay of a CUDA graph, as
the benchmarks time it; the calls profiled are the last CALLS, each inside the NVTX range
"measured"; ncu leaves the caches as the calls before left them (--cache-control none). A job
script, not part of the package.

usage: l2_traffic.py package|cudnn replayed|written"""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import inputs  # noqa: E402
from wan_fp4.eval.graph_spans import graphed  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

WARM, CALLS = 4, 2
if len(sys.argv) != 3 or sys.argv[1] not in ("package", "cudnn") or sys.argv[2] not in ("replayed", "written"):
    sys.exit(__doc__.splitlines()[-1])
torch.manual_seed(0)
q, k, v, writer, cudnn = inputs((1, 1024, 40, 128))
call = graphed(cudnn if sys.argv[1] == "cudnn" else (lambda: host.run(q, k, v, "direct-p", prebuilt=True)[0]), 1)
for i in range(WARM + CALLS):
    if sys.argv[2] == "written":
        writer()
    if i >= WARM:
        torch.cuda.nvtx.range_push("measured")
    call()
    if i >= WARM:
        torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("done", sys.argv[1:])
