"""The statistics programs as committed (one warp where they fill the SMs, STATS_MAXNREG, FOLD_READS
16,384) against the package before the change ("before": prepare.py of abc6aa6, put in
wan_fp4/kernels/_prepare_before.py as job.sh says, its _prepare_triton swapped in). Bytes against the
torch path, then the statistics launch alone, the pre-pass and the whole call from CUDA graphs,
alternated per round. A job script, not part of the package."""
import importlib
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

before = importlib.import_module("wan_fp4.kernels._prepare_before")
after_prepare = prepare._prepare_triton
ROUNDS = int(os.environ.get("ROUNDS", 3))
SHAPES = ((40, 1024, 1024), (12, 1024, 1024), (40, 2048, 2048), (40, 4096, 4096), (12, 32760, 512),
          (12, 32760, 32760), (40, 32760, 32760), (40, 75600, 75600))
CALL_MAX = 4096 * 4096
layout = v_layout_args("direct-p")
names = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
junk = torch.empty(4 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
sms = torch.cuda.get_device_properties(0).multi_processor_count


def use(name):
    prepare._prepare_triton = before._prepare_triton if name == "before" else after_prepare


def flush():
    junk.fill_(1)


SET = os.environ.get("SET", "short")
for h, sq, skv in SHAPES:
    if (sq * skv <= CALL_MAX or skv == 512) != (SET == "short"):
        continue
    q = torch.randn(1, sq, h, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, skv, h, 128, device="cuda", dtype=torch.bfloat16) + 2.0 * torch.randn(
        1, 1, h, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, skv, h, 128, device="cuda", dtype=torch.bfloat16)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    stats = torch.empty(prepare.RANGE_STATS, device="cuda")
    bad = {}
    for name in ("before", "after"):
        use(name)
        got = prepare.prepare_fp8(q, k, v, **layout)
        bad[name] = [n for n in names if mismatch(getattr(got, n), getattr(want, n))]
    warps, keys = prepare.stats_programs(skv, h, sms)
    print(f"H{h} Sq{skv if sq == skv else sq} Skv{skv}: after = {warps}-warp programs of {keys} keys "
          f"({-(-skv // keys) * h} programs); bytes == torch path: "
          + ", ".join(f"{n} {'yes' if not b else 'NO ' + ' '.join(b)}" for n, b in bad.items()), flush=True)
    calls = 20 if sq * skv <= 4096 * 4096 else 3
    parts = {"statistics": {"before": lambda: before._column_partials(k, v, stats),
                            "after": lambda: prepare._column_partials(k, v, stats)},
             "pre-pass": {n: (lambda: prepare.prepare_fp8(q, k, v, **layout)) for n in ("before", "after")}}
    if sq * skv <= CALL_MAX or skv == 512:
        parts["call"] = {n: (lambda: host.run(q, k, v, "direct-p", prebuilt=True)) for n in ("before", "after")}
    flushed = _graph_ms(flush, calls) if sq * skv <= CALL_MAX else None
    for part, fns in parts.items():
        for cold in ((False, True) if flushed is not None and part == "call" else (False,)):
            times = {"before": [], "after": []}
            for r in range(ROUNDS):
                for name in (("before", "after") if r % 2 == 0 else ("after", "before")):
                    use(name)
                    fn = fns[name]
                    ms = _graph_ms(lambda: (flush(), fn()), calls) - flushed if cold else _graph_ms(fn, calls)
                    times[name].append(ms * 1e3)
            b, a = times["before"], times["after"]
            print(f"H{h} Sq{sq} Skv{skv} {part}{' (L2 flushed first)' if cold else ''}: before {min(b):.1f}-{max(b):.1f} us, "
                  f"after {min(a):.1f}-{max(a):.1f} us (after/before " + " ".join(f"{x / y:.3f}" for x, y in zip(a, b)) + ")",
                  flush=True)
    use("after")
    del q, k, v, want
    torch.cuda.empty_cache()
