"""Runs with head_ready.diff applied (its last version; job.sh says which ran where). The sm90
kernel waiting on its head's ready count (option head_ready, the candidate default)
against the same kernel waiting for the whole quantise launch ({"head_ready": False}), both
prebuilt (the first two runs from .device/sm90_pair, PREBUILT_DIR; the third from the package). `check`: fresh inputs written in place before every call (so a
kernel reading codes before its head is done would read the last call's codes and differ), eager
and replayed from a CUDA graph, output and LSE bit for bit against the grid-wide wait. `cudnn`:
the default call beside cuDNN BF16's at 1,024 tokens, alternated, from CUDA graphs. `pairs`: the
whole call from CUDA graphs, three ways rotated per round: the grid-wide wait, the default (per
head where the query tiles fill at most host.HEAD_READY_WAVES waves) and per head everywhere.
The check runs with per head everywhere (ALL=1, the default), so that every shape exercises it."""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.eval.bench_attention import use_prebuilt_dir  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

use_prebuilt_dir(os.environ.get("PREBUILT_DIR"))  # None: the package's own (every kernel a launch may pick)
GRID = {"head_ready": False}
WAVES = host.HEAD_READY_WAVES
if os.environ.get("ALL", "1") == "1":
    host.HEAD_READY_WAVES = 10 ** 9
CHECK = (("direct-p", 1, 40, 1024, 1024, 128), ("fp8", 1, 40, 1024, 1024, 128), ("direct-p", 4, 40, 1024, 1024, 128),
         ("direct-p", 2, 3, 1000, 1000, 64), ("fp8", 2, 12, 2048, 2048, 128), ("fp8", 1, 5, 4097, 300, 64),
         ("direct-p", 1, 12, 32760, 512, 128), ("fp8", 1, 12, 32760, 32760, 128))


def call(q, k, v, mode, config=None):
    return host.run(q, k, v, mode, config=config, return_lse=True, prebuilt=True)


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def fresh(*ts):
    for t in ts:
        t.normal_()


if "check" in sys.argv[1:]:
    torch.manual_seed(0)
    for mode, b, h, sq, skv, d in CHECK:
        q = torch.empty(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.empty(b, skv, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        eager, moved, last = 0, 0, None
        n = 20 if sq * skv <= 4096 * 4096 else 4
        for _ in range(n):
            fresh(q, k, v)
            got = [t.clone() for t in call(q, k, v, mode)]
            eager += same(got, call(q, k, v, mode, GRID))
            moved += last is not None and not torch.equal(got[0], last)
            last = got[0]
        fresh(q, k, v)
        call(q, k, v, mode)
        torch.cuda.synchronize()
        box, g = {}, torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            box["out"] = call(q, k, v, mode)
        replays = 0
        for _ in range(n):
            fresh(q, k, v)
            g.replay()
            torch.cuda.synchronize()
            replays += same(box["out"], call(q, k, v, mode, GRID))
        finite = bool(torch.isfinite(last.float()).all())
        print(f"{mode} B{b} H{h} Sq{sq} Skv{skv} D{d}: head_ready's output and LSE equal to the grid-wide wait's in "
              f"{eager}/{n} eager calls and {replays}/{n} graph replays, fresh inputs each (outputs changed "
              f"between calls {moved}/{n - 1}; finite: {finite})", flush=True)
        del q, k, v, box, g
        torch.cuda.empty_cache()

if "cudnn" in sys.argv[1:]:
    for h in (40, 12):
        q, k, v = (torch.randn(1, 1024, h, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

        def cudnn_bf16():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(qt, kt, vt)

        t = [(_graph_ms(cudnn_bf16, 20) * 1e3, _graph_ms(lambda: host.run(q, k, v, "direct-p", prebuilt=True), 20) * 1e3)
             for _ in range(4)]
        print(f"H{h} S1024 torch SDPA cuDNN BF16 call " + " ".join(f"{a:.1f}" for a, _ in t)
              + " us; wan_fp4 direct-p call (head_ready) " + " ".join(f"{c:.1f}" for _, c in t) + " us, alternated",
              flush=True)

if "pairs" in sys.argv[1:]:
    PAIRS = (("direct-p", 40, 1024, 1024, 128), ("fp8", 40, 1024, 1024, 128), ("direct-p", 12, 1024, 1024, 128),
             ("direct-p", 40, 1024, 1024, 64), ("direct-p", 40, 2048, 2048, 128), ("direct-p", 40, 2048, 2048, 64),
             ("direct-p", 40, 4096, 4096, 128), ("direct-p", 12, 32760, 512, 128), ("direct-p", 40, 7680, 7680, 128),
             ("direct-p", 12, 32760, 32760, 128))
    ways = {"grid": (GRID, WAVES), "default": (None, WAVES), "all": (None, 10 ** 9)}
    for mode, h, sq, skv, d in PAIRS:
        q, k, v = (torch.randn(1, s, h, d, device="cuda", dtype=torch.bfloat16) for s in (sq, skv, skv))
        launches = 20 if sq * skv <= 4096 * 4096 else 3
        times = {w: [] for w in ways}
        order = list(ways)
        for r in range(int(os.environ.get("ROUNDS", 4))):
            for w in order[r % 3:] + order[:r % 3]:
                cfg, host.HEAD_READY_WAVES = ways[w]
                times[w].append(_graph_ms(lambda: host.run(q, k, v, mode, config=cfg, prebuilt=True), launches) * 1e3)
        g = times["grid"]
        print(f"{mode} B1 H{h} Sq{sq} Skv{skv} D{d}: " + "; ".join(
            f"{w} {min(t):.1f}-{max(t):.1f} us (/grid {' '.join(f'{x / y:.3f}' for x, y in zip(t, g))})"
            for w, t in times.items()), flush=True)
        del q, k, v
        torch.cuda.empty_cache()
