"""The quantise launch's shape in the whole call at short lengths: 4 warps a block with ptxas's own
registers (the package) against 8 warps at register limits 80 and 96 (prepare.QUANT_WARPS,
QUANT_MAXNREG, set at run time), the call from CUDA graphs alternated in rounds, each variant's
output compared bit for bit with the package's. A job script, not part of the package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "4"))
VARIANTS = {"q4": (4, None), "q8r80": (8, 80), "q8r96": (8, 96)}
torch.manual_seed(0)
for h, s in ((40, 1024), (12, 1024), (40, 2048), (40, 4096)):
    q, k, v = (torch.randn(1, s, h, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))

    def use(name):
        prepare.QUANT_WARPS, prepare.QUANT_MAXNREG = VARIANTS[name]

    def call():
        o = host.run(q, k, v, "direct-p", prebuilt=True)
        return o[0] if isinstance(o, tuple) else o
    outs = {}
    for name in VARIANTS:
        use(name)
        outs[name] = call().clone()
    same = {n: torch.equal(o, outs["q4"]) for n, o in outs.items()}
    rows = {n: [] for n in VARIANTS}
    for r in range(ROUNDS):
        for name in (VARIANTS if r % 2 == 0 else list(VARIANTS)[::-1]):
            use(name)
            rows[name].append(_graph_ms(call, 20) * 1e3)
    base = rows["q4"]
    print(f"B1 H{h} S{s} D128 call, us: " + "; ".join(
        f"{n} {' '.join(f'{t:.1f}' for t in ts)} (/q4 {' '.join(f'{t / b:.3f}' for t, b in zip(ts, base))}, "
        f"bits {'same' if same[n] else 'DIFFER'})" for n, ts in rows.items()), flush=True)
    use("q4")
