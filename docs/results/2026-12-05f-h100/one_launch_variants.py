"""Variants of the one-launch pre-pass (prepare._one_launch_kernel), timed beside it and beside the
partials-first pre-pass at B1 H40 D128, 1,024 and 2,048 tokens, each from a CUDA graph, each first
checked against the torch path's bytes. A job script, not part of the package: each variant is
prepare.py with a text change, written next to it as a module of its own.

relaxed   the range statistics' atomic maxima relaxed (the host reads them after the launch)
qfirst    relaxed, and each head's Q blocks taken first (K's and V's waits overlap Q's work)
kvfirst   relaxed, and every head's K and V blocks before any Q block
twophase  relaxed, as the interpreter runs it: two launches, no waiting (the wait's own cost)
"""
import importlib
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from wan_fp4.eval.device_check import mismatch  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

SRC = open(prepare.__file__).read()
body = SRC.index("def _one_launch_kernel(")


def edit(src, old, new, count=1):
    head, tail = src[:body], src[body:]
    assert tail.count(old) >= count, old
    return head + tail.replace(old, new)


relaxed = SRC
for old in ("tl.atomic_max(stats_ptr + 1, scale)", "tl.atomic_max(stats_ptr, scale)", "tl.atomic_max(stats_ptr + 2 + kind, bad)"):
    relaxed = edit(relaxed, old, old[:-1] + ', sem="relaxed")')
variants = {
    "relaxed": relaxed,
    "qfirst": edit(relaxed, "r = item % per_head", "r = (item % per_head + 2 * nk) % per_head"),
    "kvfirst": edit(relaxed, "bh = item // per_head\n        r = item % per_head",
                    "n_kv = (tl.num_programs(0) // per_head) * 2 * nk\n"
                    "        bh = tl.where(item < n_kv, item // (2 * nk), (item - n_kv) // tl.maximum(nq, 1))\n"
                    "        r = tl.where(item < n_kv, item % (2 * nk), 2 * nk + (item - n_kv) % tl.maximum(nq, 1))"),
}
mods = {}
for name, src in variants.items():
    path = os.path.join(os.path.dirname(prepare.__file__), f"_prep_{name}.py")
    open(path, "w").write(src)
    mods[name] = importlib.import_module(f"wan_fp4.kernels._prep_{name}")


def graph_us(fn, calls=20):
    import triton.testing as tt

    from wan_fp4.eval.bench_attention import graphed

    return tt.do_bench(graphed(fn, calls), warmup=5, rep=300, return_mode="median") / calls * 1e3


layout = v_layout_args("direct-p")
names = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
for s in (1024, 2048):
    b, h, d = 1, 40, 128
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    k = k + 2.0 * torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)

    def two_phase(m=mods["relaxed"]):
        real = m._interpreting
        m._interpreting = lambda: True
        try:
            return m._prepare_one_launch(q, k, v, True, **layout)
        finally:
            m._interpreting = real

    fns = {"partials first (package)": lambda: prepare._prepare_triton(q, k, v, True, **layout),
           "one launch (package)": lambda: prepare._prepare_one_launch(q, k, v, True, **layout),
           **{name: (lambda m=m: m._prepare_one_launch(q, k, v, True, **layout)) for name, m in mods.items()},
           "twophase": two_phase}
    for name, fn in fns.items():
        got = fn()
        bad = [n for n in names if mismatch(getattr(got, n), getattr(want, n))]
        print(f"B{b} H{h} S{s} {name:26s} {graph_us(fn):6.1f} us from a CUDA graph; bytes == torch path: "
              f"{'yes' if not bad else 'NO ' + ', '.join(bad)}", flush=True)
