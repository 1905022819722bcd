"""The 1,024-token call's pieces as a model would meet them (B1 H40 D128): each chain is a launch per
tensor writing Q, K and V, then the piece. Per piece the median span of its launches
(wan_fp4.eval.graph_spans), alternated over rounds; then each launch's start and end inside the
package's call after the writer, as trace.py reads them for the replayed call. A job script, not
part of the package."""
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _cast_floor, _operands  # noqa: E402
from wan_fp4.eval import graph_spans  # noqa: E402
from wan_fp4.kernels import prepare, sm90  # noqa: E402
from wan_fp4.kernels.sm90 import host, layout  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
torch.manual_seed(0)
h, s, d, mode = 40, 1024, 128, "direct-p"
shape = (1, s, h, d)
q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
writer = graph_spans.input_writer(q, k, v)
ops, out, lse = _operands(q, k, v, mode)
range_stats = torch.empty(prepare.RANGE_STATS, dtype=torch.float32, device="cuda")
cast_qkv, cast_kv = _cast_floor((q, k, v)), _cast_floor((k, v))


def kernel():
    sm90.launch(ops, mode, d, out=out, lse=lse, prebuilt=True)


def stats():
    prepare._column_partials(k, v, range_stats)


def cudnn():
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(qt, kt, vt)


pieces = {
    "whole call": lambda: host.run(q, k, v, mode, prebuilt=True),
    "pre-pass": lambda: prepare.prepare_fp8(q, k, v, **layout.v_layout_args(mode)),
    "column statistics alone": stats,
    "kernel alone": kernel,
    "column statistics + kernel": lambda: (stats(), kernel()),
    "E4M3 cast of Q, K, V": cast_qkv,
    "E4M3 cast of Q, K, V + kernel": lambda: (cast_qkv(), kernel()),
    "E4M3 cast of K, V + kernel": lambda: (cast_kv(), kernel()),
    "cuDNN BF16": cudnn,
}
rows = {n: [] for n in pieces}
for r in range(ROUNDS):
    order = list(pieces) if r % 2 == 0 else list(pieces)[::-1]
    for n in order:
        rows[n].append(graph_spans.median_span_us(pieces[n], writer))
print(f"B1 H{h} S{s} D{d}, after launches writing Q, K and V (us, span of the piece's launches, "
      f"{ROUNDS} rounds):", flush=True)
for n, t in rows.items():
    print(f"  {n:32s} " + " ".join(f"{x:.1f}" for x in t), flush=True)


def body():
    writer()
    host.run(q, k, v, mode, prebuilt=True)


before = len(graph_spans._replayed_events(writer, 1))
evs = graph_spans._replayed_events(body, graph_spans.CALLS)
n = len(evs) // graph_spans.CALLS
calls = [evs[i + before:i + n] for i in range(n, len(evs), n)]  # the first call dropped
launches = [e.name[:40] for e in calls[0]]
print(f"the call after the writer, each launch (medians of {len(calls)} calls, us from the call's first launch):",
      flush=True)
for i, name in enumerate(launches):
    st = statistics.median(c[i].time_range.start - c[0].time_range.start for c in calls)
    en = statistics.median(c[i].time_range.end - c[0].time_range.start for c in calls)
    print(f"  {name:40s} start {st:6.1f} end {en:6.1f} ({en - st:5.1f})", flush=True)
