"""One launch of each thing worth profiling on the H200, for Nsight Compute to wrap:

    ncu --set full -k regex:'Sm90Attention|nvjet|gemm' -o prof python scripts/profile_sm90_device.py launch
    python scripts/profile_sm90_device.py prepass     # checks and times the quantisation pre-pass

launch: the sm90 kernel of --mode (default direct-p) at --shape (default B1 H12 S32760 D128; keys
  --s-kv, default S) on prepared operands (the default config, then each --configs JSON; prebuilt
  kernels, from --prebuilt-dir if given), then a cuBLAS FP8 GEMM 8192^3 (the tensor-core reference
  the kernel is read against: tensor-pipe activity, issue stalls, clocks).
prepass: the pre-pass's bytes against the torch path's (several calls), then triton.testing.do_bench
  medians of it with each key chunk (eagerly, and replayed from a CUDA graph: the GPU's share), and
  the rate of the bytes it must move, at H40 S1024, 4096 and 7680 and at the Wan shapes.
percall: where a short call's time goes, at B1 H40 S1024 (the fixed per-call cost dominates there):
  wall time per call of wan_fp4.attention (direct-p, sm90) eagerly and replayed from a CUDA graph
  (no host work; the score check is skipped under capture), beside torch SDPA's cuDNN BF16 the
  same two ways; then torch.profiler over 100 eager calls (each op's CPU and CUDA time, kernels
  per call); a Chrome trace goes to --trace if given.
floor: what a short call cannot go below, at B1 H40 D128, S 1,024 and 4,096, each from a CUDA graph:
  the whole call, the pre-pass, its column statistics' partials alone (which every code waits for:
  K's mean and V's channel amax span all keys), the kernel alone, then the statistics + the kernel,
  a one-launch E4M3 cast of Q, K and V (no scales: the bytes' floor of any pre-pass) alone and +
  the kernel, and the same cast of K and V only + the kernel (Q quantised in the kernel, at no
  cost), beside torch SDPA's cuDNN BF16; then the whole call, the pre-pass, the kernel and cuDNN
  BF16 again, each call starting from a flushed L2.
short: the kernel alone at B1 H40 D128, S --lengths (default 1,024-16,384), from a CUDA graph, for the default config
  and each --configs that applies to the mode (each one's output compared bit for bit with the default's).
rounds: what a partial last wave costs. At B1 H12 and H40, D128, 32,760 keys, the kernel alone
  from a CUDA graph over all 256 query tiles per head and over the fewest tiles per head that make
  whole waves (one CTA per SM), per round of CTAs; the difference is the last wave's share.
pairs: small differences between configs, paired. At each --shapes (default B1 H12 and H40, S32760,
  D128), the default config and each --configs that applies to --mode, alternated in --rounds
  rounds in one process, the kernel alone from a CUDA graph: each config's time per round and its
  speed against the default's of the same round (a run's drift cancels in the ratio), with each
  output's relative L2 from the default's.
waves: the kernel's fixed cost per CTA. One head, one and two full waves of query tiles (one CTA
  per SM; a tile is the config's 64 rows per consumer warp group) against key lengths 128-8,192, each launch timed replayed from a CUDA graph (no
  host work): two waves minus one is one CTA's whole time at that key length, fitted to
  T0 + n * t over its n key tiles; one wave minus that is the launch itself.
overlap: whether the pre-pass can hide under the kernel. At each --shapes, per mode, the whole call
  against the same work split into head groups, serial on one stream and overlapped (group i + 1's
  pre-pass on a second, high-priority stream while group i's kernel runs), eagerly (wall time, the
  median of three timings) and from a CUDA graph; each group writes its own output, so the split's output copy is not
  counted (an upper bound on what the overlap can gain).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU-only install: every mode here needs the GPU anyway
    triton = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from wan_fp4.kernels import prepare, sm90  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402
from wan_fp4.modes import TILE_M  # noqa: E402


def _rand(b, s, h, d):
    return torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)


def _operands(q, k, v, mode):
    """The pre-pass's operands for `mode` and the kernel's output buffers: (ops, out, lse)."""
    b, s, h, d = q.shape
    ops = prepare.prepare_fp8(q, k, v, **v_layout_args(mode))
    out = torch.empty(b, s, h, d, dtype=torch.bfloat16, device=q.device)
    lse = torch.empty(b, h, s, dtype=torch.float32, device=q.device)
    return ops, out, lse


def _graph_ms(fn, calls, rep=300, warmup=5):
    """Milliseconds per call of fn, replayed from a CUDA graph of `calls` calls (do_bench median)."""
    import triton.testing as tt

    from wan_fp4.eval.bench_attention import graphed

    return tt.do_bench(graphed(fn, calls), warmup=warmup, rep=rep, return_mode="median") / calls


def launch(configs, shape=(1, 12, 32760, 128), mode="direct-p", s_kv=None):
    b, h, s, d = shape
    s_kv = s if s_kv is None else s_kv
    q, k, v = _rand(b, s, h, d), _rand(b, s_kv, h, d), _rand(b, s_kv, h, d)
    ops, out, lse = _operands(q, k, v, mode)
    for config in configs:
        sm90.launch(ops, mode, d, config=config, out=out, lse=lse, prebuilt=True)
    from wan_fp4.eval.bench_attention import fp8_gemm

    fp8_gemm()[0]()
    torch.cuda.synchronize()


def prepass(repeats=5):
    """The pre-pass at H40 S1024, 4096 and 7680 and at the Wan shapes: its bytes against the
    torch path's on the GPU, in `repeats` calls (a sum whose order depended on scheduling would
    show as a call that differs), then its time with the default statistics programs and each of
    STATS_PROGRAMS' (warps, keys), eagerly and from a CUDA graph, and the rate of the bytes any pre-pass must move
    (Q, K, V read once, codes written; this one reads K and V twice)."""
    import triton.testing as tt

    from wan_fp4.eval.device_check import mismatch

    layout = v_layout_args("direct-p")
    names = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
    for b, h, s in ((1, 40, 1024), (1, 40, 4096), (1, 40, 7680), (1, 12, 32760), (1, 40, 32760), (1, 40, 75600)):
        d = 128
        q, k, v = _rand(b, s, h, d), _rand(b, s, h, d), _rand(b, s, h, d)
        k = k + 2.0 * torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)  # a mean worth smoothing
        want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
        differing = []
        for i in range(repeats):
            got = prepare.prepare_fp8(q, k, v, **layout)
            differing += [f"{name} (call {i})" for name in names if mismatch(getattr(got, name), getattr(want, name))]
        print(f"B{b} H{h} S{s}  pre-pass == torch path, bitwise, {repeats} calls: "
              f"{'yes' if not differing else 'NO: ' + ', '.join(differing)}", flush=True)
        moved = 3 * q.numel() * 2 + want.q8.numel() + want.k8.numel() + want.v8t.numel()
        default = prepare.stats_programs(s, b * h, prepare._sm_count(q.device))
        shapes = {f"default {default[0]}w x {default[1]}": None}
        shapes.update({f"{w}w x {c} keys": (w, c) for w, chunks in prepare.STATS_PROGRAMS for c in chunks})
        for name, programs in shapes.items():
            fn = lambda q=q, k=k, v=v, programs=programs: prepare._prepare_triton(  # noqa: E731
                q, k, v, True, programs=programs, **layout)
            eager = tt.do_bench(fn, warmup=25, rep=200, return_mode="median")
            ms = _graph_ms(fn, 10, rep=200)
            print(f"B{b} H{h} S{s}  whole pre-pass, {name:18s} {ms:.4f} ms from a CUDA graph, {eager:.4f} eager "
                  f"({moved / ms / 1e9:.2f} TB/s of the {moved / 1e6:.0f} MB it must move)", flush=True)
        del q, k, v, want
        torch.cuda.empty_cache()


def short(configs, modes=("direct-p", "fp8"), lengths=(1024, 4096, 7680, 16384), launches=20):
    """The kernel alone at B1 H40 D128 and short lengths, replayed from a CUDA graph of `launches`
    launches (no host work, pre-pass done before), for the default config and each of `configs`,
    each config's output compared bit for bit with the default's."""
    b, h, d = 1, 40, 128
    for mode in modes:
        for s in lengths:
            q, k, v = _rand(b, s, h, d), _rand(b, s, h, d), _rand(b, s, h, d)
            ops, out, lse = _operands(q, k, v, mode)
            times, first = [], None
            for config in (c for c in configs if sm90.applies(mode, c)):
                fn = lambda config=config, ops=ops: sm90.launch(ops, mode, d, config=config, out=out, lse=lse,  # noqa: E731
                                                                prebuilt=True)
                fn()
                torch.cuda.synchronize()
                if first is None:
                    first = out.clone()
                same = torch.equal(out, first)
                times.append(_graph_ms(fn, launches))
                print(f"{mode} B{b} H{h} S{s} D{d} {json.dumps(config)}: kernel alone from a CUDA graph "
                      f"{times[-1]:.4f} ms ({times[0] / times[-1]:.3f}x the default), output identical: {same}",
                      flush=True)
            del q, k, v, ops
            torch.cuda.empty_cache()


def _per_call_ms(fn, calls):
    import time

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e3


def percall(trace=None, calls=100):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    import wan_fp4
    from wan_fp4.eval.bench_attention import graphed

    q, k, v = (_rand(1, 1024, 40, 128) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def ours():
        return wan_fp4.attention(q, k, v, "direct-p", kernel="sm90-cute")

    def cudnn_bf16():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt)

    for name, fn in (("wan_fp4 direct-p (sm90)", ours), ("torch SDPA cuDNN BF16", cudnn_bf16)):
        for _ in range(20):
            fn()
        eager = _per_call_ms(fn, calls)
        replay = graphed(fn, calls)
        replay()
        replay_ms = _per_call_ms(replay, 5) / calls
        print(f"B1 H40 S1024 D128 {name:26s} per call: eager {eager:.3f} ms, CUDA graph {replay_ms:.3f} ms", flush=True)
    # the host's share, piece by piece: each runs ahead of a GPU that finishes it sooner
    ops = prepare.prepare_fp8(q, k, v, **v_layout_args("direct-p"))
    pieces = {
        "prepare_fp8 (its Triton launches)": lambda: prepare.prepare_fp8(q, k, v, **v_layout_args("direct-p")),
        "sm90.launch (the prebuilt kernel)": lambda: sm90.launch(ops, "direct-p", 128, prebuilt=True),
        "score check start + finish": lambda: ops.start_score_range_check("direct-p", 128 ** -0.5).finish(),
        "sm90.run (pre-pass, launch, check)": lambda: sm90.run(q, k, v, "direct-p"),
        "wan_fp4.attention (all of it)": ours,
    }
    for name, fn in pieces.items():
        for _ in range(20):
            fn()
        print(f"host per call, {name:38s} {_per_call_ms(fn, calls) * 1e3:7.1f} us", flush=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            ours()
        torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30)
    print(f"wan_fp4 direct-p, {calls} eager calls under torch.profiler:\n{table}", flush=True)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    print(f"GPU kernels per call: {len(kernels) / calls:.1f}", flush=True)
    if trace:
        prof.export_chrome_trace(trace)


def waves(mode="direct-p", d=128, configs=({},), launches=20):
    from wan_fp4.eval.bench_attention import graphed

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    lengths = (128, 256, 512, 1024, 2048, 4096, 8192)
    for config in configs:
        tile_m = TILE_M  # query rows per CTA
        per_cta = []
        for s_kv in lengths:
            k, v = _rand(1, s_kv, 1, d), _rand(1, s_kv, 1, d)
            wave_ms = []
            for n_waves in (1, 2):
                s_q = tile_m * sms * n_waves
                q = _rand(1, s_q, 1, d)
                ops, out, lse = _operands(q, k, v, mode)
                replay = graphed(lambda: sm90.launch(ops, mode, d, config=config, out=out, lse=lse, prebuilt=True),
                                 launches)
                replay()
                wave_ms.append(min(_per_call_ms(replay, 10) for _ in range(5)) / launches)
            cta_us = (wave_ms[1] - wave_ms[0]) * 1e3
            per_cta.append(cta_us)
            print(f"{mode} D{d} {json.dumps(config)} S_kv {s_kv:5d}: one wave {wave_ms[0] * 1e3:7.2f} us, two "
                  f"{wave_ms[1] * 1e3:7.2f} us; one CTA {cta_us:7.2f} us, the launch {(2 * wave_ms[0] - wave_ms[1]) * 1e3:6.2f} us",
                  flush=True)
        n = torch.tensor([s / 128 for s in lengths], dtype=torch.float64)
        a = torch.stack([torch.ones_like(n), n], 1)
        t0, t = torch.linalg.lstsq(a, torch.tensor(per_cta, dtype=torch.float64).unsqueeze(1)).solution.squeeze(1).tolist()
        print(f"{mode} D{d} {json.dumps(config)}: one CTA = {t0:.2f} us + {t:.3f} us per key tile "
              f"(the fixed part = {t0 / t:.1f} key tiles)", flush=True)


if triton is not None:
    @triton.jit
    def _cast3(a, b, c, a8, b8, c8, n, BLOCK: tl.constexpr):
        """Program (i, j): block i of tensor j cast to E4M3."""
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        which = tl.program_id(1)
        ok = offs < n
        if which == 0:
            tl.store(a8 + offs, tl.load(a + offs, mask=ok).to(tl.float8e4nv), mask=ok)
        elif which == 1:
            tl.store(b8 + offs, tl.load(b + offs, mask=ok).to(tl.float8e4nv), mask=ok)
        else:
            tl.store(c8 + offs, tl.load(c + offs, mask=ok).to(tl.float8e4nv), mask=ok)


def _cast_floor(tensors):
    """A callable casting two or three same-sized tensors to E4M3 in one launch, with no scale:
    the fewest bytes and launches any quantisation of them can take."""
    srcs = [t.contiguous() for t in tensors]
    dsts = [torch.empty_like(t, dtype=torch.float8_e4m3fn) for t in srcs]
    args = (srcs * 2)[:3] + (dsts * 2)[:3]  # a third pointer is never read with two tensors
    n, block = srcs[0].numel(), 4096
    return lambda: _cast3[(triton.cdiv(n, block), len(srcs))](*args, n, BLOCK=block, num_warps=8)


def floor(lengths=(1024, 4096), calls=20):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import wan_fp4

    b, h, d, mode = 1, 40, 128, "direct-p"
    layout = v_layout_args(mode)
    junk = torch.empty(4 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")

    def flush():
        junk.fill_(1)

    for s in lengths:
        q, k, v = _rand(b, s, h, d), _rand(b, s, h, d), _rand(b, s, h, d)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        ops, out, lse = _operands(q, k, v, mode)
        stats_words = torch.empty(prepare.UNIT_COUNTER + 1, dtype=torch.float32, device="cuda")

        def kernel():
            sm90.launch(ops, mode, d, out=out, lse=lse, prebuilt=True)

        def column_stats():  # the partials every code waits for (their totals may ride in the quantise launch)
            prepare._column_partials(k, v, stats_words)

        def cudnn_bf16():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(qt, kt, vt)

        cast_qkv, cast_kv = _cast_floor((q, k, v)), _cast_floor((k, v))
        parts = {
            "whole call (wan_fp4.attention)": lambda: wan_fp4.attention(q, k, v, mode, kernel="sm90-cute"),
            "pre-pass": lambda: prepare.prepare_fp8(q, k, v, **layout),
            "column statistics alone (their partials)": column_stats,
            "kernel alone": kernel,
            "column statistics + kernel": lambda: (column_stats(), kernel()),
            "E4M3 cast of Q, K, V (one launch)": cast_qkv,
            "E4M3 cast of Q, K, V + kernel": lambda: (cast_qkv(), kernel()),
            "E4M3 cast of K, V + kernel": lambda: (cast_kv(), kernel()),
            "torch SDPA cuDNN BF16": cudnn_bf16,
        }
        for name, fn in parts.items():
            ms = _graph_ms(fn, calls)
            print(f"B{b} H{h} S{s} D{d} {name:56s} {ms * 1e3:7.1f} us from a CUDA graph", flush=True)
        # Replayed on the same tensors, a launch finds what the one before left in L2; these rows
        # start each call from a flushed L2 instead (the flush's own time taken off)
        flushed = _graph_ms(flush, calls)
        for name in ("whole call (wan_fp4.attention)", "pre-pass", "kernel alone", "torch SDPA cuDNN BF16"):
            ms = _graph_ms(lambda fn=parts[name]: (flush(), fn()), calls) - flushed
            print(f"B{b} H{h} S{s} D{d} {name + ', L2 flushed first':56s} {ms * 1e3:7.1f} us from a CUDA graph",
                  flush=True)
        del q, k, v, qt, kt, vt, ops
        torch.cuda.empty_cache()


def rounds(modes=("direct-p", "fp8"), s_kv=32760, d=128, launches=5):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tiles = -(-s_kv // 128)
    for h in (12, 40):
        k, v = _rand(1, s_kv, h, d), _rand(1, s_kv, h, d)
        whole = max(t for t in range(1, tiles + 1) if (t * h) % sms == 0)  # tiles per head filling whole waves
        for mode in modes:
            for n_tiles in (tiles, whole):
                s_q = min(n_tiles * 128, s_kv)
                q = _rand(1, s_q, h, d)
                ops, out, lse = _operands(q, k, v, mode)
                ms = _graph_ms(lambda: sm90.launch(ops, mode, d, out=out, lse=lse, prebuilt=True), launches,
                               rep=1000, warmup=3)
                n_waves, n_rounds = n_tiles * h / sms, -(-n_tiles * h // sms)
                print(f"{mode} B1 H{h} S_q {s_q} S_kv {s_kv} D{d}: {n_tiles} query tiles per head, {n_waves:.2f} waves "
                      f"in {n_rounds} rounds: {ms:.3f} ms, {ms / n_rounds * 1e3:.1f} us per round, "
                      f"{ms / n_waves * 1e3:.1f} us per wave of work", flush=True)
                del q, ops
        del k, v
        torch.cuda.empty_cache()


def pairs(configs, mode="fp8", shapes=((1, 12, 32760, 128), (1, 40, 32760, 128)), n_rounds=6):
    configs = [c for c in configs if sm90.applies(mode, c)]
    for b, h, s, d in shapes:
        q, k, v = _rand(b, s, h, d), _rand(b, s, h, d), _rand(b, s, h, d)
        ops, out, lse = _operands(q, k, v, mode)
        calls = [lambda c=c: sm90.launch(ops, mode, d, config=c, out=out, lse=lse, prebuilt=True) for c in configs]
        first = None
        for config, call in zip(configs, calls):
            call()
            torch.cuda.synchronize()
            first = out.clone() if first is None else first
            rel = ((out.float() - first.float()).norm() / first.float().norm()).item()
            print(f"{mode} B{b} H{h} S{s} D{d} {json.dumps(config)}: output rel L2 from the default's {rel:.2e}",
                  flush=True)
        # graphs of about 2 ms of work or more (at ~1 PFLOP/s), at most 20 launches
        launches = max(1, min(20, int(-(-2e12 // (4 * b * h * s * s * d)))))
        times = [[] for _ in configs]
        for r in range(n_rounds):
            for t, call in zip(times, calls):
                t.append(_graph_ms(call, launches, rep=400, warmup=3))
            print(f"{mode} B{b} H{h} S{s} D{d} round {r}: "
                  + ", ".join(f"{json.dumps(c)} {t[-1]:.4f} ms" for c, t in zip(configs, times)), flush=True)
        for config, t in zip(configs, times):
            speed = [base / x for base, x in zip(times[0], t)]
            print(f"{mode} B{b} H{h} S{s} D{d} {json.dumps(config)}: median {sorted(t)[len(t) // 2]:.4f} ms, speed "
                  f"against the default per round {min(speed):.4f}-{max(speed):.4f} (mean "
                  f"{sum(speed) / len(speed):.4f})", flush=True)
        del q, k, v, ops, out, lse
        torch.cuda.empty_cache()


def _head_groups(q, k, v, mode, groups):
    """(serial, overlapped) callables running q, k, v's heads in `groups` groups (see `overlap`)."""
    h, d = q.shape[2], q.shape[3]
    step = -(-h // groups)
    parts = [tuple(t[:, :, i:i + step].contiguous() for t in (q, k, v)) for i in range(0, h, step)]
    layout = v_layout_args(mode)
    side = torch.cuda.Stream(priority=-1)

    def serial():
        for qg, kg, vg in parts:
            sm90.launch(prepare.prepare_fp8(qg, kg, vg, **layout), mode, d)

    def overlapped():
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        ready = []
        with torch.cuda.stream(side):
            for qg, kg, vg in parts:
                # freed blocks of the side stream's pool go to its own later allocations, which
                # the next call's wait_stream orders after these kernels: no record_stream needed
                ops = prepare.prepare_fp8(qg, kg, vg, **layout)
                event = torch.cuda.Event()
                event.record(side)
                ready.append((event, ops))
        for event, ops in ready:
            main.wait_event(event)
            sm90.launch(ops, mode, d)
        main.wait_stream(side)

    return serial, overlapped


def overlap(shapes):
    import wan_fp4

    for b, h, s, d in shapes:
        torch.manual_seed(s + h)
        q, k, v = _rand(b, s, h, d), _rand(b, s, h, d), _rand(b, s, h, d)
        flops = 4 * b * h * s * s * d
        calls = max(1, min(10, int(-(-1e13 // flops))))  # about 10 ms of work or more per timing
        for mode in ("fp8", "direct-p"):
            rows = [("whole call", lambda: wan_fp4.attention(q, k, v, mode, kernel="sm90-cute"))]
            for groups in sorted({g for g in (2, 3, 4, 5) if h % g == 0}):
                serial, overlapped = _head_groups(q, k, v, mode, groups)
                rows += [(f"{groups} groups, serial", serial), (f"{groups} groups, overlapped", overlapped)]
            base = None
            for name, fn in rows:
                fn()  # warm-up: Triton's first launch, the allocator's pools
                eager = sorted(_per_call_ms(fn, calls) for _ in range(3))[1]
                try:  # a second stream inside capture is what capture may refuse
                    graph = _graph_ms(fn, calls, rep=400, warmup=3)
                except RuntimeError as exc:
                    graph = float("nan")
                    print(f"{mode} B{b} H{h} S{s} D{d} {name}: no CUDA graph ({exc})", flush=True)
                base = base or (eager, graph)
                print(f"{mode} B{b} H{h} S{s} D{d} {name:22s}: eager {eager:8.4f} ms ({flops / eager / 1e9:5.0f} TFLOP/s, "
                      f"{base[0] / eager:.4f}x), graph {graph:8.4f} ms ({flops / graph / 1e9:5.0f} TFLOP/s, "
                      f"{base[1] / graph:.4f}x)", flush=True)
        del q, k, v
        torch.cuda.empty_cache()


def main():
    from wan_fp4.eval.bench_attention import parse_shape, use_prebuilt_dir

    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["launch", "prepass", "percall", "waves", "short", "floor", "rounds", "pairs", "overlap"])
    ap.add_argument("--configs", nargs="*", type=json.loads, default=[])
    ap.add_argument("--prebuilt-dir", default=None)
    ap.add_argument("--trace", default=None, help="percall: write a Chrome trace here")
    ap.add_argument("--shape", type=parse_shape, default=(1, 12, 32760, 128), help="launch: BxHxSxD")
    ap.add_argument("--s-kv", type=int, default=None, help="launch: the key length (default: the shape's S)")
    ap.add_argument("--mode", choices=("direct-p", "fp8"), default="direct-p", help="launch, waves, pairs: the kernel's mode")
    ap.add_argument("--lengths", type=int, nargs="*", default=[1024, 4096, 7680, 16384], help="short: sequence lengths")
    ap.add_argument("--shapes", type=parse_shape, nargs="*", default=[(1, 12, 32760, 128), (1, 40, 32760, 128)],
                    help="pairs, overlap: BxHxSxD shapes")
    ap.add_argument("--rounds", type=int, default=6, help="pairs: rounds of the alternation")
    args = ap.parse_args()

    use_prebuilt_dir(args.prebuilt_dir)
    if args.what == "launch":
        launch([{}] + args.configs, args.shape, args.mode, args.s_kv)
    elif args.what == "prepass":
        prepass()
    elif args.what == "waves":
        waves(args.mode, args.shape[3], [{}] + args.configs)
    elif args.what == "short":
        short([{}] + args.configs, lengths=args.lengths)
    elif args.what == "floor":
        floor()
    elif args.what == "rounds":
        rounds()
    elif args.what == "pairs":
        pairs([{}] + args.configs, args.mode, args.shapes, args.rounds)
    elif args.what == "overlap":
        overlap(args.shapes)
    else:
        percall(args.trace)


if __name__ == "__main__":
    main()
