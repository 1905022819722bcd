"""Whether the kernel's slower start inside a call (the trace: about 2.7 us over its time alone at
B1 H40 S1,024 D128) goes when its own code ran just before: per chain, the attention kernel's own
duration and the span from the chain's first launch to its end (CUPTI, torch.profiler), medians
over a graph of 10 chains:
  call          the package's call alone;
  small, call   the same kernel on one head first (8 CTAs, its own operands), then the call;
  fill, call    a small fill first (a launch that is not ours: the control);
  flush, call / flush, small, call   the same after L2 is flushed (a 4x-L2 fill).
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
from wan_fp4.kernels.sm90 import host  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
torch.manual_seed(0)
q, k, v = (torch.randn(1, 1024, 40, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
q1, k1, v1 = (torch.randn(1, 1024, 1, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
ops1, out1, lse1 = _operands(q1, k1, v1, "direct-p")
junk = torch.empty(4 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
tiny = torch.empty(1 << 16, dtype=torch.uint8, device="cuda")


def call():
    host.run(q, k, v, "direct-p", prebuilt=True)


def small():
    sm90.launch(ops1, "direct-p", 128, out=out1, lse=lse1, prebuilt=True)


def fill():
    tiny.fill_(1)


def flush():
    junk.fill_(1)


cases = {"call": [call], "small, call": [small, call], "fill, call": [fill, call],
         "flush, call": [flush, call], "flush, small, call": [flush, small, call]}


def measure(chain, calls=10):
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
    per = len(evs) // calls
    segs = [evs[i * per:(i + 1) * per] for i in range(1, calls)]
    stats_at = [next(i for i, e in enumerate(s) if "column_stats" in e.name) for s in segs]
    kern = [s[-1] for s in segs]  # the call's kernel is the chain's last launch
    return (statistics.median(e.time_range.end - e.time_range.start for e in kern),
            statistics.median(s[-1].time_range.end - s[i].time_range.start for s, i in zip(segs, stats_at)))


print("B1 H40 S1024 D128 direct-p: the call's kernel (its own duration) / the call (its first launch to its "
      f"kernel's end), us, CUPTI over a graph of 10 chains; {ROUNDS} rounds", flush=True)
for r in range(ROUNDS):
    print(f"round {r}: " + "; ".join(f"{name} {'%.1f / %.1f' % measure(chain)}" for name, chain in cases.items()),
          flush=True)
