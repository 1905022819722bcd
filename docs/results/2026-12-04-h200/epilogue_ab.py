"""Epilogue variants of the sm90 kernel in one process, each prebuilt kernel bound from its own
folder: `head` (commit 561b7b6, .device/sm90_old), `staged` (O through shared memory, whole rows in
16-byte stores; .device/sm90_staged), `sv_q` (staged, and V's channel scales brought into shared
memory on Q's barrier; .device/sm90_sv_q) and `new` (the package's own: staged, V's channel scales
on a barrier of their own that only the epilogue waits for). AB_VARIANTS (default
"head,staged,new") picks them; AB_SKIP leaves shapes out ("mode:HxSxD,..."). Timed in
that order, then again. Each output and LSE bitwise against the first variant's on the same
prepared operands; the kernel
alone and the whole call, each replayed from a CUDA graph of 10 calls (do_bench medians); the
cuDNN FP8 kernel alone (inputs quantised beforehand, eager as the bench times it) and cuDNN BF16
(SDPA) in the same process. `epilogue_ab.py waves`: a CTA's fixed cost (profile_sm90_device.waves)
of both instead; `epilogue_ab.py ncu`: one launch of each at B1 H40 S4096 D128 (direct-p, then
fp8), in the variants' order, for Nsight Compute to wrap."""
import os
import sys
from pathlib import Path

import torch
import triton.testing as tt

sys.path.insert(0, "scripts")
from profile_sm90_device import waves  # noqa: E402
from wan_fp4.eval.bench_attention import graphed  # noqa: E402
from wan_fp4.eval.peers import available_peers  # noqa: E402
from wan_fp4.kernels import aot as kaot  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import aot, default_config, host  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

NAMES = [aot.kernel_name(m, d, default_config(m)) for m in ("direct-p", "fp8") for d in (128, 64)]
FOLDERS = {"head": ".device/sm90_old", "staged": ".device/sm90_staged", "sv_q": ".device/sm90_sv_q", "new": None}
LABELS = os.environ.get("AB_VARIANTS", "head,staged,new").split(",")


def bound(folder):
    if folder is None:  # the package's own prebuilt kernels
        fns = {n: aot.PREBUILT.launcher(n) for n in NAMES}
        assert all(fns.values()), fns
        return fns
    fns = {}
    for n in NAMES:
        shim = kaot.bind(Path(f"{folder}/lib{n}.so").resolve(), n)
        assert shim.load() == 0
        fns[n] = lambda *a, _r=shim.run: _r(*a)
    return fns


VARIANTS = {label: bound(FOLDERS[label]) for label in LABELS}


def use(label):
    aot.PREBUILT._loaded.update(VARIANTS[label])


PEERS = ["cudnn-fp8-kernel", "sdpa-cudnn"]
peers, missing = available_peers(PEERS, device=torch.device("cuda"))
print("peers missing:", missing, flush=True)
SHAPES = [("direct-p", 40, 1024, 128), ("direct-p", 40, 4096, 128), ("direct-p", 40, 7680, 128),
          ("direct-p", 40, 16384, 128), ("direct-p", 12, 32760, 128), ("direct-p", 40, 32760, 128),
          ("direct-p", 40, 75600, 128), ("direct-p", 12, 32760, 64), ("direct-p", 40, 4096, 64),
          ("fp8", 40, 4096, 128), ("fp8", 12, 32760, 128), ("fp8", 40, 32760, 128), ("fp8", 40, 75600, 128)]
SHAPES = [sh for sh in SHAPES if f"{sh[0]}:{sh[1]}x{sh[2]}x{sh[3]}" not in os.environ.get("AB_SKIP", "").split(",")]


def med(fn, rep):
    return tt.do_bench(fn, warmup=5, rep=rep, return_mode="median")


def ab():
    for mode, h, s, d in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(s * 7 + h + d)
        q, k, v = (torch.randn(1, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
        ops = prepare.prepare_fp8(q, k, v, **v_layout_args(mode))
        flops = 4 * h * s * s * d
        rep = 300 if s < 32760 else 800
        outs = {}
        for label in LABELS:
            use(label)
            o = torch.full((1, s, h, d), float("nan"), dtype=torch.bfloat16, device="cuda")
            lse = torch.full((1, h, s), float("nan"), dtype=torch.float32, device="cuda")
            host.launch(ops, mode, d, out=o, lse=lse, prebuilt=True)
            torch.cuda.synchronize()
            outs[label] = (o, lse)
        first = LABELS[0]
        for label in LABELS[1:]:
            same = torch.equal(outs[first][0], outs[label][0]) and torch.equal(outs[first][1], outs[label][1])
            finite = bool(torch.isfinite(outs[label][0]).all())
            print(f"{mode} H{h} S{s} D{d}: {label}'s O and LSE bitwise equal to {first}'s: {same}; O finite: {finite}",
                  flush=True)
        o, lse = outs[LABELS[-1]]
        for label in LABELS * 2:
            use(label)
            kern = graphed(lambda: host.launch(ops, mode, d, out=o, lse=lse, prebuilt=True), 10)
            call = graphed(lambda: host.run(q, k, v, mode, prebuilt=True), 10)
            ms_k = med(kern, rep) / 10
            ms_c = med(call, rep) / 10
            print(f"{mode} H{h} S{s} D{d} {label}: kernel alone {ms_k:.4f} ms ({flops / ms_k / 1e9:.0f} TFLOP/s), "
                  f"whole call from a graph {ms_c:.4f} ms ({flops / ms_c / 1e9:.0f} TFLOP/s)", flush=True)
        if d == 128 and "cudnn-fp8-kernel" in peers and (mode == "fp8" or h == 40 or s == 32760):
            pf = lambda: peers["cudnn-fp8-kernel"](q, k, v)
            pf()
            ms = med(pf, rep)
            print(f"{mode} H{h} S{s} D{d} cudnn-fp8-kernel (eager): {ms:.4f} ms ({flops / ms / 1e9:.0f} TFLOP/s)", flush=True)
        if s <= 4096 and d == 128 and mode == "direct-p" and "sdpa-cudnn" in peers:
            pb = lambda: peers["sdpa-cudnn"](q, k, v)
            pb()
            ms_e = med(pb, rep)
            ms_g = med(graphed(pb, 10), rep) / 10
            print(f"{mode} H{h} S{s} D{d} sdpa-cudnn BF16: eager {ms_e:.4f} ms, from a graph {ms_g:.4f} ms", flush=True)
        del q, k, v, ops, outs, o, lse
        torch.cuda.empty_cache()


def fixed_cost():
    for mode, d in (("direct-p", 128), ("fp8", 128)):
        for label in LABELS:
            use(label)
            print(f"waves, {label} kernel:", flush=True)
            waves(mode, d)


def profiled():
    for mode in ("direct-p", "fp8"):
        q, k, v = (torch.randn(1, 4096, 40, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        ops = prepare.prepare_fp8(q, k, v, **v_layout_args(mode))
        for label in LABELS:
            use(label)
            host.launch(ops, mode, 128, prebuilt=True)
        torch.cuda.synchronize()


if __name__ == "__main__":
    {"waves": fixed_cost, "ncu": profiled}.get((sys.argv[1:] or ["ab"])[0], ab)()
