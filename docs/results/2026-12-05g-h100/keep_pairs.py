"""The package's rule (prepare.KEEP_CODES_IN_L2: codes kept in L2 where all fit) against the same
call with it off, alternated in rounds in one process: the whole call from a CUDA graph of 20 calls,
per shape and mode (B1), and each round's speed-up (off / on). Optional: --prebuilt-dir DIR (the
sm90 kernels from DIR instead of the package's linked shims)."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import wan_fp4  # noqa: E402
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.eval.bench_attention import use_prebuilt_dir  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402

if sys.argv[1:2] == ["--prebuilt-dir"]:
    use_prebuilt_dir(sys.argv[2])

CASES = (("direct-p", 40, 1024, 1024, 128), ("direct-p", 40, 2048, 2048, 128), ("fp8", 40, 1024, 1024, 128),
         ("fp8", 40, 2048, 2048, 128), ("direct-p", 40, 2048, 2048, 64), ("direct-p", 12, 32760, 512, 128),
         ("fp8", 12, 32760, 512, 128), ("direct-p", 40, 4096, 4096, 128))
ROUNDS = 4

for mode, h, sq, skv, d in CASES:
    q = torch.randn(1, sq, h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, skv, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    codes = h * d * (-(-sq // 128) * 128 + 2 * (-(-skv // 128) * 128))  # Q's, K's and V's codes (V's extra rows aside)
    keep = prepare.keep_codes(codes, q.device)
    ratios, times = [], {True: [], False: []}
    for _ in range(ROUNDS):
        for on in (True, False):
            prepare.KEEP_CODES_IN_L2 = on
            times[on].append(_graph_ms(lambda: wan_fp4.attention(q, k, v, mode, kernel="sm90-cute"), 20) * 1e3)
        ratios.append(times[False][-1] / times[True][-1])
    prepare.KEEP_CODES_IN_L2 = True
    print(f"{mode} B1 H{h} Sq{sq} Skv{skv} D{d} (codes about {codes / 2**20:.1f} MiB, kept: {keep}): "
          f"on {min(times[True]):.2f}-{max(times[True]):.2f} us, off {min(times[False]):.2f}-{max(times[False]):.2f} us, "
          f"off/on per round {' '.join(f'{r:.3f}' for r in ratios)}", flush=True)
    del q, k, v
    torch.cuda.empty_cache()
