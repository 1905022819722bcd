"""The pre-pass's launch shapes as module constants of prepare.py, paired in one process: the
quantise launch's warps and register limit (QUANT_WARPS, QUANT_MAXNREG: fewer registers, more
blocks resident) and the totals launch's register limit (TOTALS_MAXNREG: all of a step's loads
issued first). Bytes against the torch path for every variant, then the pre-pass (and at short
lengths the whole call, and cuDNN BF16's call beside it) from CUDA graphs, the variants' order
rotated per round. A job script, not part of the package."""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.eval.device_check import mismatch  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", 3))
BASE = dict(QUANT_WARPS=prepare.QUANT_WARPS, QUANT_MAXNREG=prepare.QUANT_MAXNREG, TOTALS_MAXNREG=prepare.TOTALS_MAXNREG,
            TOTALS_LOADS=prepare.TOTALS_LOADS, FOLD_READS=prepare.FOLD_READS)
VARIANTS = {"base": {}, "totals128": dict(TOTALS_MAXNREG=128), "q4r128": dict(QUANT_MAXNREG=128),
            "q8": dict(QUANT_WARPS=8), "q8r80": dict(QUANT_WARPS=8, QUANT_MAXNREG=80),
            "totals_off": dict(TOTALS_MAXNREG=None),  # after the change (base: the limit 128 taken)
            # the totals' loads per step, 32 (one step for 32 chunks), alone and with folding up to
            # 65,536 partial rows read
            "loads32": dict(TOTALS_LOADS=32), "loads32_fold": dict(TOTALS_LOADS=32, FOLD_READS=65536)}
pick = os.environ.get("VARIANTS")  # names to time beside "base", comma-separated (default: the first run's)
if not pick:
    for name in ("totals_off", "loads32", "loads32_fold"):
        VARIANTS.pop(name)
if pick:
    VARIANTS = {n: VARIANTS[n] for n in ["base", *pick.split(",")]}
SHAPES = ((40, 1024, 1024), (12, 1024, 1024), (40, 2048, 2048), (40, 4096, 4096), (12, 32760, 512),
          (12, 32760, 32760), (40, 32760, 32760), (40, 75600, 75600))
CALL_MAX = 4096 * 4096
layout = v_layout_args("direct-p")
names = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")


def use(name):
    for key, val in {**BASE, **VARIANTS[name]}.items():
        setattr(prepare, key, val)


SET = os.environ.get("SET", "short")
for h, sq, skv in SHAPES:
    if (sq * skv <= CALL_MAX or skv == 512) != (SET == "short"):
        continue
    q = torch.randn(1, sq, h, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, skv, h, 128, device="cuda", dtype=torch.bfloat16) + 2.0 * torch.randn(
        1, 1, h, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, skv, h, 128, device="cuda", dtype=torch.bfloat16)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    fold = h * -(-skv // 128) * -(-skv // prepare.stats_programs(skv, h, 132)[1]) <= prepare.FOLD_READS
    bad = {}
    for name in VARIANTS:
        use(name)
        got = prepare.prepare_fp8(q, k, v, **layout)
        bad[name] = [n for n in names if mismatch(getattr(got, n), getattr(want, n))]
    print(f"H{h} Sq{sq} Skv{skv} (totals {'folded' if fold else 'in their own launch'}): bytes == torch path: "
          + ", ".join(f"{n} {'yes' if not b else 'NO ' + ' '.join(b)}" for n, b in bad.items()), flush=True)
    calls = 20 if sq * skv <= CALL_MAX else 3
    parts = {"pre-pass": lambda: prepare.prepare_fp8(q, k, v, **layout)}
    if sq * skv <= CALL_MAX or skv == 512:
        parts["call"] = lambda: host.run(q, k, v, "direct-p", prebuilt=True)
    for part, fn in parts.items():
        times = {n: [] for n in VARIANTS}
        order = list(VARIANTS)
        for r in range(ROUNDS):
            for name in order[r % len(order):] + order[:r % len(order)]:
                use(name)
                times[name].append(_graph_ms(fn, calls) * 1e3)
        b = times["base"]
        for name, t in times.items():
            print(f"H{h} Sq{sq} Skv{skv} {part} {name:10s} {min(t):9.1f}-{max(t):9.1f} us  (/base per round "
                  + " ".join(f"{x / y:.3f}" for x, y in zip(t, b)) + ")", flush=True)
    if sq == skv and sq <= 2048:
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

        def cudnn_bf16():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(qt, kt, vt)

        use("base")
        t = [(_graph_ms(cudnn_bf16, calls) * 1e3, _graph_ms(parts["call"], calls) * 1e3) for _ in range(ROUNDS)]
        print(f"H{h} S{sq} torch SDPA cuDNN BF16 call " + " ".join(f"{a:.1f}" for a, _ in t)
              + " us; wan_fp4 direct-p call (base) " + " ".join(f"{c:.1f}" for _, c in t) + " us, alternated", flush=True)
    use("base")
    del q, k, v, want
    torch.cuda.empty_cache()
