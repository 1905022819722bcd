"""The pre-pass with the column totals folded into the quantise launch (new) against its own totals
launch (old): the package under test is the one first on PYTHONPATH. Per shape (D128): the pre-pass
bitwise against the torch path in 3 calls, the pre-pass and the whole call from a CUDA graph, and
the whole call eagerly (host work included)."""
import sys
import time

import torch
import torch.nn.functional as F
import triton.testing as tt

import wan_fp4
from wan_fp4.eval.bench_attention import graphed
from wan_fp4.eval.device_check import mismatch
from wan_fp4.kernels import prepare
from wan_fp4.kernels.sm90.layout import v_layout_args

tag = sys.argv[1]
print(tag, wan_fp4.__file__, flush=True)
layout = v_layout_args("direct-p")
names = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")


def graph_us(fn, calls=20):
    return 1e3 * tt.do_bench(graphed(fn, calls), warmup=5, rep=300, return_mode="median") / calls


def eager_us(fn, calls=200):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return 1e6 * (time.perf_counter() - t) / calls


for b, h, s in ((1, 40, 1024), (1, 40, 4096), (1, 40, 7680), (1, 12, 4096), (1, 40, 16384), (1, 12, 32760), (1, 40, 75600)):
    torch.manual_seed(s + h)
    q, k, v = (torch.randn(b, s, h, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    k = k + 2.0 * torch.randn(b, 1, h, 128, device="cuda", dtype=torch.bfloat16)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    bad = [f"{n}#{i}" for i in range(3) for n in names
           if mismatch(getattr(prepare.prepare_fp8(q, k, v, **layout), n), getattr(want, n))]
    del want
    n_chunks = -(-s // prepare.stats_chunk(s, b * h, prepare._sm_count(q.device)))
    pre = graph_us(lambda: prepare.prepare_fp8(q, k, v, **layout))
    call = lambda: wan_fp4.attention(q, k, v, "direct-p", kernel="sm90-cute")  # noqa: E731
    whole = graph_us(call)
    eager = eager_us(call, 200 if s <= 16384 else 20)
    print(f"{tag} B{b} H{h} S{s:6d} chunks {n_chunks:3d}: bitwise == torch: {'yes' if not bad else 'NO ' + ','.join(bad)}; "
          f"pre-pass {pre:8.1f} us, call {whole:9.1f} us from a graph; eager call {eager:9.1f} us", flush=True)
    if s == 1024:
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        sd = lambda: F.scaled_dot_product_attention(qt, kt, vt)  # noqa: E731
        print(f"{tag} B{b} H{h} S{s:6d} torch SDPA (cuDNN BF16): {graph_us(sd):.1f} us from a graph, "
              f"eager {eager_us(sd):.1f} us", flush=True)
    del q, k, v
    torch.cuda.empty_cache()
