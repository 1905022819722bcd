"""Two questions about the one-launch pre-pass. (1) Host time per prepare_fp8 call, one launch
against three, with the GPU kept busy by a sleep kernel so that no call waits for it: 100 calls
timed on the host clock, the two paths alternated three times. (2) Cross-attention shapes (Wan's
512 text keys under 32,760 or 75,600 queries), where S_kv alone would pick the one launch: the
pre-pass and the whole direct-p call from a CUDA graph of 10 calls, both paths, two rounds."""
import sys
import time
from functools import partial

import torch
import triton.testing as tt

sys.path.insert(0, ".")
from wan_fp4.eval.bench_attention import graphed, use_prebuilt_dir  # noqa: E402
from wan_fp4.eval.device_check import mismatch  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

NAMES = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
layout = v_layout_args("direct-p")
use_prebuilt_dir(sys.argv[1] if len(sys.argv) > 1 else None)
real = prepare._prepare_triton
prepare.SHORT_UNROLL = 4  # the one-launch heads at their measured best (unroll.txt)


def host_us(q, k, v, calls=100):
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000_000)  # about a second of GPU time: every launch below only queues
    t = time.perf_counter()
    for _ in range(calls):
        prepare.prepare_fp8(q, k, v, **layout)
    us = (time.perf_counter() - t) / calls * 1e6
    torch.cuda.synchronize()
    return us


for b, h, s, d in ((1, 40, 1024, 128), (1, 12, 1024, 128), (1, 12, 2048, 64)):
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for n in (1, 3, 1, 3):
        prepare._prepare_triton = partial(real, launches=n)
        prepare.prepare_fp8(q, k, v, **layout)
        print(f"B{b} H{h} S{s} D{d} {n} launch(es): host {host_us(q, k, v):.1f} us per prepare_fp8 call", flush=True)
    prepare._prepare_triton = real

for b, h, sq, skv in ((1, 12, 32760, 512), (1, 40, 32760, 512), (1, 40, 75600, 512)):
    d = 128
    q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, skv, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    for n in (1, 3):
        bad = [f for f in NAMES if mismatch(getattr(real(q, k, v, True, launches=n, **layout), f), getattr(want, f))]
        print(f"B{b} H{h} Sq{sq} Skv{skv} {n} launch(es): == torch path bitwise: {'yes' if not bad else 'NO ' + ', '.join(bad)}",
              flush=True)
    for rnd in range(2):
        line = []
        for n in (1, 3):
            prepare._prepare_triton = partial(real, launches=n)
            pre = tt.do_bench(graphed(lambda: prepare.prepare_fp8(q, k, v, **layout), 10), rep=300, return_mode="median") / 10 * 1e3
            call = tt.do_bench(graphed(lambda: host.run(q, k, v, "direct-p", prebuilt=True), 10), rep=300, return_mode="median") / 10 * 1e3
            line.append(f"{n} launch(es): pre-pass {pre:.1f}, call {call:.1f}")
        prepare._prepare_triton = real
        print(f"B{b} H{h} Sq{sq} Skv{skv} round {rnd}, us from a graph: " + "; ".join(line), flush=True)
    del q, k, v, want
    torch.cuda.empty_cache()
