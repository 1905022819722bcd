"""The 1,024-token call as a model would make it: Q, K and V written by a launch just before it (as
the projections and RoPE leave them, in L2), against the same inputs replayed (issue 16's reading,
where the call's own traffic has evicted them). The package's direct-p call and torch SDPA's cuDNN
BF16 beside it, alternated in rounds; per condition one CUDA graph of CALLS chains replayed under
torch.profiler, each call's span (CUPTI, its first launch's start to its last launch's end, the
producer's launches excluded), medians over the chains after the first. A job script, not part of
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
ROUNDS = int(os.environ.get("ROUNDS", "4"))


def gpu_events(body):
    """The GPU events of one replay of a graph of CALLS runs of body, in start order."""
    body()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(CALLS):
            body()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        g.replay()
        torch.cuda.synchronize()
    return sorted((e for e in prof.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)


def call_spans(attn, producer=None, producer_names=()):
    """Median span (us) of attn's launches per chain, each chain [producer, attn]: a call starts at
    each launch named as its first."""
    def body():
        if producer is not None:
            producer()
        attn()
    evs = [e for e in gpu_events(body) if e.name not in producer_names]
    starts = [i for i, e in enumerate(evs) if e.name == evs[0].name] + [len(evs)]
    spans = [max(x.time_range.end for x in evs[a:b]) - evs[a].time_range.start for a, b in zip(starts, starts[1:])]
    return statistics.median(spans[1:])


if __name__ == "__main__":
    torch.manual_seed(0)
    for h, s in ((40, 1024), (12, 1024)):
        shape = (1, s, h, 128)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        src = [torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

        def producer():  # one elementwise launch per tensor, as a projection's epilogue or RoPE writes it
            for dst, x in zip((q, k, v), src):
                torch.mul(x, 1.0, out=dst)

        producer()
        torch.cuda.synchronize()
        names = {e.name for e in gpu_events(producer)}

        def ours():
            return host.run(q, k, v, "direct-p", prebuilt=True)

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(qt, kt, vt)

        rows = []
        for r in range(ROUNDS):
            cases = [("ours replayed", ours, None), ("cudnn replayed", cudnn, None),
                     ("ours after producer", ours, producer), ("cudnn after producer", cudnn, producer)]
            got = {n: call_spans(fn, p, names) for n, fn, p in (cases if r % 2 == 0 else cases[::-1])}
            rows.append(got)
        print(f"B1 H{h} S{s} D128 (us, a call's first launch start to last end, medians of {CALLS - 1} chains, "
              f"{ROUNDS} rounds):", flush=True)
        for n in rows[0]:
            print(f"  {n:22s} " + " ".join(f"{x[n]:.1f}" for x in rows), flush=True)
        for cond in ("replayed", "after producer"):
            print(f"  ours / cuDNN, {cond:15s} "
                  + " ".join(f"{x['ours ' + cond] / x['cudnn ' + cond]:.3f}" for x in rows), flush=True)
        del q, k, v, qt, kt, vt, src
        torch.cuda.empty_cache()
