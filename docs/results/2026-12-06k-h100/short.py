"""The package's direct-p call at short lengths beside torch SDPA's cuDNN BF16, alternated in rounds
from CUDA graphs (issue 16's 1,024-token target): B1 H40 and H12, D128, 1,024 and 2,048 tokens;
also the kernel alone on prepared operands. A job script, not part of the package."""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms, _operands  # noqa: E402
from wan_fp4.kernels import sm90  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "6"))
for h, s in ((40, 1024), (12, 1024), (40, 2048)):
    q, k, v = (torch.randn(1, s, h, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    ops, out, lse = _operands(q, k, v, "direct-p")

    def cudnn_bf16():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt)

    rows = []
    for r in range(ROUNDS):
        pair = [("cudnn", cudnn_bf16), ("call", lambda: host.run(q, k, v, "direct-p", prebuilt=True)),
                ("kernel", lambda: sm90.launch(ops, "direct-p", 128, out=out, lse=lse, prebuilt=True))]
        got = {name: _graph_ms(fn, 20) * 1e3 for name, fn in (pair if r % 2 == 0 else pair[::-1])}
        rows.append(got)
    fmt = lambda key: " ".join(f"{x[key]:.1f}" for x in rows)  # noqa: E731
    ratio = " ".join(f"{x['call'] / x['cudnn']:.3f}" for x in rows)
    print(f"B1 H{h} S{s} D128: cuDNN BF16 call {fmt('cudnn')} us; wan_fp4 direct-p call {fmt('call')} us "
          f"(call / cuDNN {ratio}); kernel alone {fmt('kernel')} us", flush=True)
    del q, k, v, qt, kt, vt, ops, out, lse
    torch.cuda.empty_cache()
