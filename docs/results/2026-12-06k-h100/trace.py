"""Where a short call's time goes now: one CUDA graph of 10 package calls (host.run, direct-p, no
LSE) replayed under torch.profiler; per call each launch's start and end (CUPTI timestamps, us from
the call's first launch), medians over the calls after the first. B1 D128 at H40 1,024, H12 1,024
and H40 2,048 tokens, and the one cuDNN BF16 call per shape beside it. A job script, not part of
the package."""
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.getcwd())
from wan_fp4.kernels.sm90 import host  # noqa: E402

CALLS = 10


def replay_events(fn):
    """The GPU events of one replay of a graph of CALLS calls of fn, split into calls at each
    launch named as the first one (the call's first launch)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(CALLS):
            fn()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        g.replay()
        torch.cuda.synchronize()
    evs = sorted((e for e in prof.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)
    starts = [i for i, e in enumerate(evs) if e.name == evs[0].name] + [len(evs)]
    return [evs[a:b] for a, b in zip(starts, starts[1:])]


torch.manual_seed(0)
for h, s in ((40, 1024), (12, 1024), (40, 2048)):
    q, k, v = (torch.randn(1, s, h, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    calls = replay_events(lambda: host.run(q, k, v, "direct-p", prebuilt=True))
    names = [e.name[:40] for e in calls[1]]
    rows = []
    for c in range(1, len(calls) - 1):
        seg = calls[c]
        if [e.name[:40] for e in seg] != names:
            continue
        t0 = seg[0].time_range.start
        rows.append([(e.time_range.start - t0, e.time_range.end - t0) for e in seg]
                    + [calls[c + 1][0].time_range.start - t0])
    print(f"B1 H{h} S{s} D128 direct-p call, {len(names)} launches a call (medians of {len(rows)} calls, us from "
          f"the call's first launch):", flush=True)
    for i, n in enumerate(names):
        st = statistics.median(r[i][0] for r in rows)
        en = statistics.median(r[i][1] for r in rows)
        print(f"  {n:40s} start {st:6.1f} end {en:6.1f} ({en - st:5.1f})", flush=True)
    print(f"  next call's first launch at {statistics.median(r[-1] for r in rows):.1f}", flush=True)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt)
    calls = replay_events(cudnn)
    d = [c[-1].time_range.end - c[0].time_range.start for c in calls[1:]]
    print(f"  cuDNN BF16: {len(calls[1])} launches a call, first start to last end {statistics.median(d):.1f} us",
          flush=True)
    del q, k, v, qt, kt, vt
    torch.cuda.empty_cache()
