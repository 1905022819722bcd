"""The pre-pass's loads issued earlier: the column statistics with each tile's loads issued before
the previous tile is added (prepare.STATS_AHEAD, "ahead") against the plain loop ("plain"), and
with that the quantise launch's K and V blocks reading their rows before they wait for the
statistics and read their totals (prepare.QUANT_ROWS_FIRST, "both"): bytes against the torch path,
the partials alone (L2 warm and flushed), the pre-pass and the whole call from CUDA graphs,
variants alternated per round, each against "plain" and "both" against "ahead". A job script, not
part of the package: the variants are prepare's module constants."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.eval.device_check import mismatch  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

ALL = {"plain": (False, False), "ahead": (True, False), "rows": (False, True), "both": (True, True)}
VARIANTS = {n: ALL[n] for n in os.environ.get("VARIANTS", "plain,ahead,both").split(",")}  # "plain" first
ROUNDS = int(os.environ.get("ROUNDS", 4))
SHAPES = ((40, 1024, 1024), (40, 2048, 2048), (40, 4096, 4096), (12, 32760, 512), (12, 32760, 32760),
          (40, 32760, 32760), (40, 75600, 75600))
CALL_MAX = 4096 * 4096  # whole calls timed up to this many scores per head (and the 1.3B cross attention)
layout = v_layout_args("direct-p")
names = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
junk = torch.empty(4 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")


def use(name):
    prepare.STATS_AHEAD, prepare.QUANT_ROWS_FIRST = VARIANTS[name]


def flush():
    junk.fill_(1)


# short: the shapes whose whole call is timed; long: the rest; min: the least that decides it
SET = os.environ.get("SET", "short")
for h, sq, skv in SHAPES:
    if SET == "min" and (h, sq) not in ((40, 1024), (40, 4096)):
        continue
    if SET != "min" and (sq * skv <= CALL_MAX or skv == 512) != (SET == "short"):
        continue
    q = torch.randn(1, sq, h, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, skv, h, 128, device="cuda", dtype=torch.bfloat16) + 2.0 * torch.randn(
        1, 1, h, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, skv, h, 128, device="cuda", dtype=torch.bfloat16)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    stats = torch.empty(prepare.RANGE_STATS, device="cuda")
    bad = {}
    for name in VARIANTS:
        use(name)
        got = prepare.prepare_fp8(q, k, v, **layout)
        bad[name] = [n for n in names if mismatch(getattr(got, n), getattr(want, n))]
    print(f"H{h} Sq{sq} Skv{skv}: bytes == torch path: "
          + ", ".join(f"{n} {'yes' if not b else 'NO ' + ' '.join(b)}" for n, b in bad.items()), flush=True)
    calls = 20 if sq * skv <= 4096 * 4096 else 3
    parts = {"partials": lambda: prepare._column_partials(k, v, stats),
             "pre-pass": lambda: prepare.prepare_fp8(q, k, v, **layout)}
    if sq * skv <= CALL_MAX or skv == 512:
        parts["call"] = lambda: host.run(q, k, v, "direct-p", prebuilt=True)
    if SET == "min":
        parts.pop("pre-pass")
    flushed = _graph_ms(flush, calls) if sq * skv <= CALL_MAX else None
    for part, fn in parts.items():
        for cold in ((False, True) if flushed is not None and part != "pre-pass" else (False,)):
            times = {n: [] for n in VARIANTS}
            for r in range(ROUNDS):
                order = list(VARIANTS)[::(1 if r % 2 == 0 else -1)]
                for name in order:
                    use(name)
                    if cold:
                        ms = _graph_ms(lambda: (flush(), fn()), calls) - flushed
                    else:
                        ms = _graph_ms(fn, calls)
                    times[name].append(ms * 1e3)
            base = times["plain"]
            print(f"H{h} Sq{sq} Skv{skv} {part}{' (L2 flushed first)' if cold else ''}: "
                  + "; ".join(f"{n} {min(t):.1f}-{max(t):.1f} us"
                              + ("" if n == "plain" else " (/plain " + " ".join(f"{a / b:.3f}" for a, b in zip(t, base)) + ")")
                              for n, t in times.items())
                  + ("; both/ahead " + " ".join(f"{a / b:.3f}" for a, b in zip(times["both"], times["ahead"]))
                     if {"both", "ahead"} <= set(times) else ""),
                  flush=True)
    use(list(VARIANTS)[-1])
    del q, k, v, want
    torch.cuda.empty_cache()
