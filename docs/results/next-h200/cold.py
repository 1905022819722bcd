"""What a cold L2 costs the kernel at B1 H40 S1,024 D128 (direct-p, the package's kernel), split
into its two suspects: the operands' codes and the kernel's own instructions. Each figure is the
kernel's own duration (CUPTI's start and end under torch.profiler) in a graph of chains:
  warm        the kernel alone (codes and code in L2 from the replay before);
  flushed     L2 flushed (a 4x-L2 fill), then the kernel;
  codes warm  flushed, the codes read back into L2 (sums over their bytes), then the kernel;
  both warm   as codes warm, then the same kernel on one head (8 CTAs on the same code path, its
              own operands) before it, which brings the kernel's instructions back into L2.
A job script, not part of the package."""
import os
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _operands  # noqa: E402
from wan_fp4.kernels import sm90  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
torch.manual_seed(0)
q, k, v = (torch.randn(1, 1024, 40, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
ops, out, lse = _operands(q, k, v, "direct-p")
q1, k1, v1 = (torch.randn(1, 1024, 1, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
ops1, out1, lse1 = _operands(q1, k1, v1, "direct-p")
junk = torch.empty(4 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
codes = [t.view(torch.uint8) for t in (ops.q8, ops.k8, ops.v8t)]
sink = torch.empty(3, dtype=torch.int64, device="cuda")


def kernel():
    sm90.launch(ops, "direct-p", 128, out=out, lse=lse, prebuilt=True)


def flush():
    junk.fill_(1)


def touch():
    for i, c in enumerate(codes):
        torch.sum(c.view(-1), 0, dtype=torch.int64, out=sink[i])


def small():
    sm90.launch(ops1, "direct-p", 128, out=out1, lse=lse1, prebuilt=True)


cases = {
    "warm": [kernel],
    "flushed": [flush, kernel],
    "codes warm": [flush, touch, kernel],
    "both warm": [flush, touch, small, kernel],
}


def kernel_us(chain, calls=10):
    """The attention kernel's own duration (CUPTI's start and end; the last sm90 launch of each
    chain), median over a graph of `calls` chains, the first left out."""
    g = torch.cuda.CUDAGraph()
    for f in chain:
        f()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        for _ in range(calls):
            for f in chain:
                f()
    g.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        g.replay()
        torch.cuda.synchronize()
    evs = sorted((e for e in prof.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)
    ours = [e for e in evs if "Sm90Attention" in e.name or "cutlass" in e.name]
    per = len(ours) // calls
    return statistics.median(e.time_range.end - e.time_range.start for e in ours[per - 1::per][1:])


print("B1 H40 S1024 D128 direct-p kernel, its own duration in us (CUPTI, from a CUDA graph of 10 chains); "
      f"{ROUNDS} rounds", flush=True)
for r in range(ROUNDS):
    print(f"round {r}: " + "; ".join(f"{name} {kernel_us(chain):.1f}" for name, chain in cases.items()), flush=True)
