"""The statistics launch inside the call at B1 H40 S1,024 D128 (direct-p): 13.3 us in the trace against
5.9 alone. Per choice of its programs (warps, keys a program; the package picks (1, 32): 1,280
one-warp programs), the whole call from a CUDA graph (alternated in rounds) and, from one replay under
torch.profiler, each launch's start and end in the call (medians over 9 calls). The statistics are
exact in any chunking, so the bytes are the same. A job script, not part of the package."""
import os
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
CHOICES = [(1, 32), (1, 64), (1, 128), (4, 64), (4, 128)]
default_rule = prepare.stats_programs
torch.manual_seed(0)
q, k, v = (torch.randn(1, 1024, 40, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))


def use(choice):
    prepare.stats_programs = lambda s, bh, sms, c=choice: c


def call():
    return host.run(q, k, v, "direct-p", prebuilt=True)


print("picked by the package:", default_rule(1024, 40, torch.cuda.get_device_properties(0).multi_processor_count))
ref = None
for choice in CHOICES:
    use(choice)
    o = call()
    o = o[0] if isinstance(o, tuple) else o
    torch.cuda.synchronize()
    ref = o.clone() if ref is None else ref
    print(f"{choice}: output == (1, 32)'s: {torch.equal(o, ref)}", flush=True)
for r in range(ROUNDS):
    order = CHOICES if r % 2 == 0 else CHOICES[::-1]
    got = {}
    for choice in order:
        use(choice)
        got[choice] = _graph_ms(call, 20) * 1e3
    print(f"round {r}: " + "; ".join(f"{c} {got[c]:.1f}" for c in CHOICES) + " us per call", flush=True)
for choice in CHOICES:
    use(choice)
    call()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(10):
            call()
    g.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        g.replay()
        torch.cuda.synchronize()
    evs = sorted((e for e in prof.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)
    per = len(evs) // 10
    segs = [evs[i * per:(i + 1) * per] for i in range(1, 10)]
    cols = []
    for j in range(per):
        st = statistics.median(s[j].time_range.start - s[0].time_range.start for s in segs)
        en = statistics.median(s[j].time_range.end - s[0].time_range.start for s in segs)
        cols.append(f"{segs[0][j].name[:14]} {st:.1f}-{en:.1f}")
    print(f"{choice}: " + ", ".join(cols), flush=True)
prepare.stats_programs = default_rule
