"""The package's pre-pass (prepare.PDL_PREPASS on) against the same call with it off, alternated in
rounds in one process: the whole call from a CUDA graph of 20 calls, and the pre-pass alone, per
shape and mode (B1), and each round's speed-up (off / on)."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import wan_fp4  # noqa: E402
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

CASES = (("direct-p", 40, 1024, 1024, 128), ("fp8", 40, 1024, 1024, 128), ("direct-p", 40, 2048, 2048, 128),
         ("direct-p", 40, 4096, 4096, 128), ("direct-p", 40, 7680, 7680, 128), ("direct-p", 12, 32760, 512, 128),
         ("direct-p", 12, 32760, 32760, 128), ("fp8", 12, 32760, 32760, 128), ("direct-p", 40, 2048, 2048, 64))
ROUNDS = 4

for mode, h, sq, skv, d in CASES:
    q = torch.randn(1, sq, h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, skv, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lay = v_layout_args(mode)
    launches = 20 if sq * skv <= 4096 * 4096 else 3
    out = {}
    for what, fn in (("call", lambda: wan_fp4.attention(q, k, v, mode, kernel="sm90-cute")),
                     ("pre-pass", lambda: prepare.prepare_fp8(q, k, v, **lay))):
        ratios, times = [], {True: [], False: []}
        for _ in range(ROUNDS):
            for on in (True, False):
                prepare.PDL_PREPASS = on
                times[on].append(_graph_ms(fn, launches) * 1e3)
            ratios.append(times[False][-1] / times[True][-1])
        prepare.PDL_PREPASS = True
        out[what] = (f"{what}: on {min(times[True]):.1f}-{max(times[True]):.1f} us, off {min(times[False]):.1f}-"
                     f"{max(times[False]):.1f} us, off/on {' '.join(f'{r:.3f}' for r in ratios)}")
    print(f"{mode} B1 H{h} Sq{sq} Skv{skv} D{d}: {out['call']}; {out['pre-pass']}", flush=True)
    del q, k, v
    torch.cuda.empty_cache()
