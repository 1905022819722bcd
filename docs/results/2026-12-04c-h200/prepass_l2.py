"""L2 reuse of K and V between the pre-pass's statistics launch and its quantise launch: the
quantise launch walking the heads in reverse (the statistics' last-read heads first, while they
may still be in the 50 MB L2), Q's loads marked evict-first, the statistics' loads evict-last.
Module constants of wan_fp4/kernels/prepare.py set in one process; each variant's outputs compared
bitwise with the torch path in two calls, then the whole pre-pass from a CUDA graph of 10 calls
(do_bench median), variants interleaved, two rounds; then the whole direct-p call the same way."""
import sys

import torch
import triton.testing as tt

sys.path.insert(0, ".")
from wan_fp4.eval.bench_attention import graphed, use_prebuilt_dir  # noqa: E402
from wan_fp4.eval.device_check import mismatch  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

VARIANTS = {"base": (False, False, False), "rev": (True, False, False), "rev+q_first": (True, True, False),
            "rev+q_first+stats_last": (True, True, True), "q_first+stats_last": (False, True, True)}
NAMES = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
layout = v_layout_args("direct-p")
use_prebuilt_dir(sys.argv[1] if len(sys.argv) > 1 else None)


def use(label):
    prepare.QUANT_REVERSED, prepare.Q_EVICT_FIRST, prepare.STATS_EVICT_LAST = VARIANTS[label]


for b, h, s in ((1, 40, 1024), (1, 40, 4096), (1, 40, 7680), (1, 12, 32760), (1, 40, 32760)):
    d = 128
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    k = k + 2.0 * torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    for label in VARIANTS:
        use(label)
        bad = [f"{n} (call {i})" for i in range(2) for n in NAMES
               if mismatch(getattr(prepare.prepare_fp8(q, k, v, **layout), n), getattr(want, n))]
        print(f"B{b} H{h} S{s} {label}: == torch path bitwise: {'yes' if not bad else 'NO ' + ', '.join(bad)}", flush=True)
    rep = 200 if s < 32760 else 500
    for rnd in range(2):
        line = []
        for label in VARIANTS:
            use(label)
            fn = graphed(lambda: prepare.prepare_fp8(q, k, v, **layout), 10)
            line.append(f"{label} {tt.do_bench(fn, warmup=5, rep=rep, return_mode='median') / 10 * 1e3:.1f}")
        print(f"B{b} H{h} S{s} pre-pass us from a graph, round {rnd}: " + ", ".join(line), flush=True)
    for rnd in range(2):
        line = []
        for label in ("base", "rev+q_first+stats_last"):
            use(label)
            fn = graphed(lambda: host.run(q, k, v, "direct-p", prebuilt=True), 10)
            line.append(f"{label} {tt.do_bench(fn, warmup=5, rep=rep, return_mode='median') / 10 * 1e3:.1f}")
        print(f"B{b} H{h} S{s} direct-p whole call us from a graph, round {rnd}: " + ", ".join(line), flush=True)
    del q, k, v, want
    torch.cuda.empty_cache()
