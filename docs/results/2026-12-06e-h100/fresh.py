"""The short call with its inputs as a model's layer leaves them: q, k and v rewritten in place just
before each call (x.mul_(1.0) on each, so that their lines are in L2, as after the projection that
makes them), that rewrite's own time subtracted; against the call replayed on untouched inputs (the
benchmarks' method, where a call's own traffic can evict its inputs before the next replay). Ours
and cuDNN BF16 (torch SDPA) alike, alternated per round, from CUDA graphs of 20 calls. A job script,
not part of the package."""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", 3))
CALLS = 20
print(f"L2: {torch.cuda.get_device_properties(0).L2_cache_size / 2**20:.0f} MiB", flush=True)
for h, s in ((40, 1024), (12, 1024), (40, 2048)):
    q, k, v = (torch.randn(1, s, h, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def ours():
        host.run(q, k, v, "direct-p", prebuilt=True)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(qt, kt, vt)

    def rewrite():
        for x in (q, k, v):
            x.mul_(1.0)

    rows = {name: {"replayed": [], "inputs just written": []} for name in ("wan_fp4 direct-p", "cuDNN BF16")}
    for r in range(ROUNDS):
        alone = _graph_ms(rewrite, CALLS)
        for name, fn in (("wan_fp4 direct-p", ours), ("cuDNN BF16", cudnn))[:: 1 if r % 2 == 0 else -1]:
            rows[name]["replayed"].append(_graph_ms(fn, CALLS) * 1e3)
            rows[name]["inputs just written"].append((_graph_ms(lambda fn=fn: (rewrite(), fn()), CALLS) - alone) * 1e3)
    for name, by in rows.items():
        print(f"B1 H{h} S{s} D128 {name:17s} " + "; ".join(
            f"{how} {min(t):.1f}-{max(t):.1f} us" for how, t in by.items()), flush=True)
    del q, k, v
    torch.cuda.empty_cache()
