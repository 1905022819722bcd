"""A smaller kernel at short lengths: direct-p with fold 2 or 1 (a two-tile loop body: 73 KB of
object against the default's 114 KB) against the default (fold 4) inside the whole call at B1 H40
and H12 1,024 tokens D128, replayed from a CUDA graph and after launches writing Q, K and V
(wan_fp4.eval.graph_spans), alternated in rounds. Inside a call the kernel runs after other
launches, with its instructions cold (an inference from its own time: 29.2 us after itself, 33 after
the writer's launches); earlier fold pairs timed the kernel alone, after itself. Objects from
scripts/build_prebuilt.py --only sm90 --out .device/sm90_fold --sm90-config '{"fold": 2}'
--sm90-config '{"fold": 1}'. A job script, not part of the package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.eval import graph_spans  # noqa: E402
from wan_fp4.eval.bench_attention import use_prebuilt_dir  # noqa: E402
from wan_fp4.eval.metrics import rel_l2  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
use_prebuilt_dir(".device/sm90_fold")
CONFIGS = {"fold 4 (default)": None, "fold 2": {"fold": 2}, "fold 1": {"fold": 1}}
torch.manual_seed(0)
SHAPES = [tuple(int(x) for x in t.split("x")) for t in os.environ.get("SHAPES", "40x1024 12x1024").split()]
for h, s in SHAPES:
    shape = (1, s, h, 128)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    writer = graph_spans.input_writer(q, k, v)
    calls = {n: (lambda c=c: host.run(q, k, v, "direct-p", config=c, prebuilt=True)) for n, c in CONFIGS.items()}
    first = {n: (o[0] if isinstance(o := fn(), tuple) else o).clone() for n, fn in calls.items()}
    rep, mod = {n: [] for n in CONFIGS}, {n: [] for n in CONFIGS}
    for r in range(ROUNDS):
        for n in (list(CONFIGS) if r % 2 == 0 else list(CONFIGS)[::-1]):
            rep[n].append(_graph_ms(calls[n], 20) * 1e3)
            mod[n].append(graph_spans.median_span_us(calls[n], writer))
    print(f"B1 H{h} S{s} D128 direct-p, the whole call ({ROUNDS} rounds; replayed from a graph | after launches "
          f"writing Q, K, V):", flush=True)
    base = first["fold 4 (default)"]
    for n in CONFIGS:
        print(f"  {n:18s}: " + " ".join(f"{t:.1f}" for t in rep[n]) + " us | "
              + " ".join(f"{t:.1f}" for t in mod[n]) + f" us; output vs the default {rel_l2(first[n], base):.2e}",
              flush=True)
    del q, k, v, writer
    torch.cuda.empty_cache()
