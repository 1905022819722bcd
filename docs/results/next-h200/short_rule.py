"""config.length_config as committed (direct-p D128 with fold 1 where both lengths are at most
SHORT_TOKENS) against fold 4 everywhere (config={"fold": 4}), the package's own prebuilt kernels:
the whole call replayed from a CUDA graph and after launches writing Q, K and V
(wan_fp4.eval.graph_spans), alternated in rounds, beside cuDNN BF16 (SDPA) timed the same two ways in
the same rounds. A job script, not part of the package."""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.eval import graph_spans  # noqa: E402
from wan_fp4.eval.metrics import rel_l2  # noqa: E402
from wan_fp4.kernels.sm90 import host, length_config  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
torch.manual_seed(0)
for h, s in ((40, 1024), (12, 1024), (40, 2048)):
    shape = (1, s, h, 128)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    writer = graph_spans.input_writer(q, k, v)
    cases = {"package": None, "fold 4": {"fold": 4}}
    calls = {n: (lambda c=c: host.run(q, k, v, "direct-p", config=c, prebuilt=True)[0]) for n, c in cases.items()}
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt)

    cases["cuDNN BF16"] = None
    calls["cuDNN BF16"] = cudnn
    first = {n: fn().clone() for n, fn in calls.items()}
    exact = F.scaled_dot_product_attention(qt.float(), kt.float(), vt.float()).transpose(1, 2)
    rep, mod = {n: [] for n in cases}, {n: [] for n in cases}
    for r in range(ROUNDS):
        for n in (list(cases) if r % 2 == 0 else list(cases)[::-1]):
            rep[n].append(_graph_ms(calls[n], 20) * 1e3)
            mod[n].append(graph_spans.median_span_us(calls[n], writer))
    print(f"B1 H{h} S{s} D128 direct-p, the package's short options {length_config('direct-p', 128, s, s)} "
          f"({ROUNDS} rounds; replayed | inputs written; package vs fold 4 output {rel_l2(first['package'], first['fold 4']):.2e}; vs exact: "
          + ", ".join(f"{n} {rel_l2(first[n].float() if n != 'cuDNN BF16' else first[n].transpose(1, 2).float(), exact):.2e}" for n in cases)
          + "):",
          flush=True)
    for n in cases:
        print(f"  {n:10s}: " + " ".join(f"{t:.1f}" for t in rep[n]) + " us | " + " ".join(f"{t:.1f}" for t in mod[n])
              + " us", flush=True)
    del q, k, v, qt, kt, vt, writer
    torch.cuda.empty_cache()
