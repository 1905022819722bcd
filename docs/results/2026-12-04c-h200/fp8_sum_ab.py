"""fp8's row sum as a tree (5 dependent FADDs per row half and tile) against the committed chain
of 32, each prebuilt kernel bound from its own folder: `head` (.device/sm90, the committed source,
hash 3f2e383d829aafd4) and `tree` (.device/sm90_tree). Per shape: each variant's error against
exact attention (float64 on the GPU, a slice of query rows) and whether direct-p's output is bitwise
the same (its code did not change); then the kernel alone from a CUDA graph of 10 launches
(do_bench medians), in the order head, tree, cuDNN FP8 kernel, three rounds, so the spread of each
and of the ratio is measured in the one run."""
import sys
from pathlib import Path

import torch
import triton.testing as tt

sys.path.insert(0, ".")
from wan_fp4.eval.bench_attention import graphed  # noqa: E402
from wan_fp4.eval.peers import available_peers  # noqa: E402
from wan_fp4.kernels import aot as kaot  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import aot, default_config, host  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

NAMES = [aot.kernel_name(m, d, default_config(m)) for m in ("direct-p", "fp8") for d in (128, 64)]
FOLDERS = {"head": ".device/sm90", "tree": ".device/sm90_tree"}


def bound(folder):
    fns = {}
    for n in NAMES:
        shim = kaot.bind(Path(f"{folder}/lib{n}.so").resolve(), n)
        assert shim.load() == 0
        fns[n] = lambda *a, _r=shim.run: _r(*a)
    return fns


VARIANTS = {label: bound(folder) for label, folder in FOLDERS.items()}
peers, missing = available_peers(["cudnn-fp8-kernel"], device=torch.device("cuda"))
print("peers missing:", missing, flush=True)
SHAPES = [("fp8", 40, 1024, 128), ("fp8", 40, 4096, 128), ("fp8", 12, 32760, 128), ("fp8", 40, 32760, 128),
          ("fp8", 40, 75600, 128), ("fp8", 12, 32760, 64), ("direct-p", 12, 32760, 128)]


def exact_rel_l2(q, k, v, o, rows=128):
    sc = q.shape[-1] ** -0.5
    qs = q[:, :rows].double().transpose(1, 2)
    ref = torch.softmax(qs @ k.double().transpose(1, 2).transpose(-1, -2) * sc, -1) @ v.double().transpose(1, 2)
    got = o[:, :rows].double().transpose(1, 2)
    return float((got - ref).norm() / ref.norm())


for mode, h, s, d in SHAPES:
    g = torch.Generator(device="cuda").manual_seed(s * 7 + h + d)
    q, k, v = (torch.randn(1, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    ops = prepare.prepare_fp8(q, k, v, **v_layout_args(mode))
    flops = 4 * h * s * s * d
    rep = 300 if s < 32760 else 800
    outs = {}
    for label in FOLDERS:
        aot.PREBUILT._loaded.update(VARIANTS[label])
        o = torch.full((1, s, h, d), float("nan"), dtype=torch.bfloat16, device="cuda")
        lse = torch.full((1, h, s), float("nan"), dtype=torch.float32, device="cuda")
        host.launch(ops, mode, d, out=o, lse=lse, prebuilt=True)
        torch.cuda.synchronize()
        outs[label] = (o, lse)
        print(f"{mode} H{h} S{s} D{d} {label}: relL2 vs exact (first 128 rows) {exact_rel_l2(q, k, v, o):.5e}, "
              f"finite {bool(torch.isfinite(o).all())}", flush=True)
    same = torch.equal(outs["head"][0], outs["tree"][0]) and torch.equal(outs["head"][1], outs["tree"][1])
    print(f"{mode} H{h} S{s} D{d}: tree bitwise equal to head: {same}; O max |diff| "
          f"{(outs['head'][0].float() - outs['tree'][0].float()).abs().max().item():.3e}", flush=True)
    o, lse = outs["tree"]
    for rnd in range(3):
        line = []
        for label in FOLDERS:
            aot.PREBUILT._loaded.update(VARIANTS[label])
            kern = graphed(lambda: host.launch(ops, mode, d, out=o, lse=lse, prebuilt=True), 10)
            ms = tt.do_bench(kern, warmup=5, rep=rep, return_mode="median") / 10
            line.append(f"{label} {ms:.4f} ms ({flops / ms / 1e9:.0f})")
        if d == 128 and "cudnn-fp8-kernel" in peers and mode == "fp8":
            pf = lambda: peers["cudnn-fp8-kernel"](q, k, v)  # noqa: E731
            pf()
            ms = tt.do_bench(pf, warmup=5, rep=rep, return_mode="median")
            line.append(f"cudnn-fp8-kernel {ms:.4f} ms ({flops / ms / 1e9:.0f})")
        print(f"{mode} H{h} S{s} D{d} round {rnd}: " + ", ".join(line), flush=True)
    del q, k, v, ops, outs, o, lse
    torch.cuda.empty_cache()
