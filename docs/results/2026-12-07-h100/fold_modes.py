"""fold 1 (a two-tile loop body) against each (mode, D)'s own fold where the package does not take
it yet: fp8 at D128 and both modes at D64, at 1,024 tokens and at the trained model's self
attention (B2 H4 S320 D64). The whole call replayed from a CUDA graph and after launches writing Q,
K and V (wan_fp4.eval.graph_spans), alternated in rounds. Objects from scripts/build_prebuilt.py
--only sm90 --out .device/sm90_fold_modes --sm90-config '{"fold": 1}' --sm90-head-dims 128 64.
A job script, not part of the package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, row  # noqa: E402
from wan_fp4.eval import graph_spans  # noqa: E402
from wan_fp4.eval.bench_attention import use_prebuilt_dir  # noqa: E402
from wan_fp4.eval.metrics import rel_l2  # noqa: E402
from wan_fp4.kernels.sm90 import default_config, host  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
use_prebuilt_dir(os.environ.get("FOLD_DIR", ".device/sm90_fold_modes"))
CASES = (("fp8", (1, 1024, 40, 128)), ("fp8", (1, 1024, 12, 128)), ("direct-p", (1, 1024, 40, 64)),
         ("direct-p", (2, 320, 4, 64)), ("fp8", (1, 1024, 40, 64)), ("fp8", (2, 320, 4, 64)))
torch.manual_seed(0)
for mode, shape in CASES:
    b, s, h, d = shape
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    writer = graph_spans.input_writer(q, k, v)
    own = default_config(mode, d)["fold"]
    configs = {f"fold {own} (default)": None, "fold 1": {"fold": 1}}
    calls = {n: (lambda c=c: host.run(q, k, v, mode, config=c, prebuilt=True)[0]) for n, c in configs.items()}
    first = {n: fn().clone() for n, fn in calls.items()}
    rep, mod = alternated(calls, writer, ROUNDS)
    base = first[f"fold {own} (default)"]
    print(f"B{b} H{h} S{s} D{d} {mode}, the whole call ({ROUNDS} rounds; replayed from a graph | after launches "
          f"writing Q, K, V):", flush=True)
    for n in configs:
        print(row(n, rep[n], mod[n], 18, f"; output vs the default {rel_l2(first[n], base):.2e}"), flush=True)
    del q, k, v, writer
    torch.cuda.empty_cache()
