"""What the heads' ready counts cost the pre-pass: prepare_fp8 as committed (each quantise block
ends with a barrier and a release add; the statistics launch zeroes the counts) against the package
before them (prepare.py of d0c5ceb, copied to wan_fp4/kernels/_prepare_before.py by job.sh), and the
committed one against itself (a second capture: the spread two captures of one launch show), each
from CUDA graphs, rotated per round. COUNT=1 (once counting became prepare_fp8's count_heads): the
package before, prepare_fp8 as the long launches call it and with count_heads. A job script, not part of the package."""
import importlib
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

before = importlib.import_module("wan_fp4.kernels._prepare_before")
layout = v_layout_args("direct-p")
SHAPES = ((40, 1024, 1024), (12, 1024, 1024), (40, 2048, 2048), (40, 4096, 4096), (12, 32760, 512),
          (12, 32760, 32760), (40, 32760, 32760), (40, 75600, 75600))
ways = {"before": before.prepare_fp8, "after": prepare.prepare_fp8, "after2": prepare.prepare_fp8}
if os.environ.get("COUNT") == "1":  # after the counts became a request (count_heads): both ways
    ways = {"before": before.prepare_fp8, "after": prepare.prepare_fp8,
            "counted": lambda *a, **kw: prepare.prepare_fp8(*a, count_heads=True, **kw)}
for h, sq, skv in SHAPES:
    q = torch.randn(1, sq, h, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, skv, h, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    calls = 20 if sq * skv <= 4096 * 4096 else 3
    times = {w: [] for w in ways}
    order = list(ways)
    for r in range(4):
        for w in order[r % len(order):] + order[:r % len(order)]:
            times[w].append(_graph_ms(lambda: ways[w](q, k, v, **layout), calls) * 1e3)
    b = times["before"]
    print(f"H{h} Sq{sq} Skv{skv} pre-pass: " + "; ".join(
        f"{w} {min(t):.1f}-{max(t):.1f} us (/before {' '.join(f'{x / y:.3f}' for x, y in zip(t, b))})"
        for w, t in times.items()), flush=True)
    del q, k, v
    torch.cuda.empty_cache()
