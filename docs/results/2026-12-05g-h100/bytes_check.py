"""prepare_fp8's Triton bytes against its torch path on the GPU (the variant of prepare.py in place)."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

torch.manual_seed(0)
for (b, s, h, d), mode in (((1, 1024, 40, 128), "direct-p"), ((2, 1000, 3, 64), "fp8"), ((1, 4097, 12, 128), "direct-p")):
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    got = prepare.prepare_fp8(q, k, v, backend="triton", **v_layout_args(mode))
    want = prepare.prepare_fp8(q, k, v, backend="torch", **v_layout_args(mode))
    same = all(torch.equal(getattr(got, f).view(torch.uint8) if getattr(got, f).dtype == torch.float8_e4m3fn
                           else getattr(got, f),
                           getattr(want, f).view(torch.uint8) if getattr(want, f).dtype == torch.float8_e4m3fn
                           else getattr(want, f))
               for f in ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean"))
    print(f"{sys.argv[1] if len(sys.argv) > 1 else ''} B{b} S{s} H{h} D{d} {mode}: bytes equal to the torch path: {same}",
          flush=True)
