"""prepare.quant_launch as committed (eight warps at 80 registers for launches of at most
QUANT_SHORT_BLOCKS blocks per SM) against the four-warp shape everywhere (QUANT_SHORT_BLOCKS = 0):
the whole call from CUDA graphs, alternated in rounds, each output compared bit for bit. Head dim 64
keeps the four-warp shape in the package; to pair it, set QUANT_D64=1 (the rule then applies at
D64 too). A job
script, not part of the package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "4"))
rule = prepare.QUANT_SHORT_BLOCKS
if os.environ.get("QUANT_D64") == "1":
    short_at = prepare.quant_launch
    prepare.quant_launch = lambda blocks, sms, head_dim: short_at(blocks, sms, 128)
sms = torch.cuda.get_device_properties(0).multi_processor_count
torch.manual_seed(0)
for mode, (b, h, s, d) in (("direct-p", (1, 40, 1024, 128)), ("direct-p", (1, 12, 1024, 128)),
                           ("direct-p", (1, 40, 2048, 128)), ("direct-p", (2, 4, 320, 64)),
                           ("direct-p", (1, 40, 1024, 64)), ("fp8", (1, 40, 1024, 128)), ("fp8", (2, 4, 320, 64))):
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))

    def call():
        o = host.run(q, k, v, mode, prebuilt=True)
        return o[0] if isinstance(o, tuple) else o
    outs, rows = {}, {"package": [], "long": []}
    for name in rows:
        prepare.QUANT_SHORT_BLOCKS = rule if name == "package" else 0
        outs[name] = call().clone()
    for r in range(ROUNDS):
        for name in (("package", "long") if r % 2 == 0 else ("long", "package")):
            prepare.QUANT_SHORT_BLOCKS = rule if name == "package" else 0
            rows[name].append(_graph_ms(call, 20) * 1e3)
    prepare.QUANT_SHORT_BLOCKS = rule
    nq, nk = -(-s // 128), -(-s // 128)
    shape = prepare.quant_launch((nq + 2 * nk) * b * h, sms, d)
    print(f"{mode} B{b} H{h} S{s} D{d}: package {shape} "
          f"{' '.join(f'{t:.1f}' for t in rows['package'])} us, long {' '.join(f'{t:.1f}' for t in rows['long'])} us, "
          f"package/long {' '.join(f'{a / c:.3f}' for a, c in zip(rows['package'], rows['long']))}; bits "
          f"{'same' if torch.equal(outs['package'], outs['long']) else 'DIFFER'}", flush=True)
