"""The sm90 kernel as a programmatic dependent of the pre-pass's quantise launch (config "pdl", the
candidate default) against the same call without it ({"pdl": False}), both prebuilt, from
.device/sm90_pair: first the output and LSE bit for bit over repeated eager calls and CUDA-graph
replays (a read of codes still being written would show as a difference in some call), then the
whole call from a CUDA graph alternated in rounds in one process, and each round's off / on. (The
tenth run's files were printed as "pdl", "off" and "off/pdl"; LABEL names the variant since.)"""
import json
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.eval.bench_attention import use_prebuilt_dir  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

use_prebuilt_dir(".device/sm90_pair")
OFF = json.loads(os.environ.get("OFF", '{"pdl": false}'))  # OFF={}: an A/A control, the same kernel twice
# OFF='{"sv_smem": true}' LABEL=sv_smem: another variant against the default, the same way
LABEL = os.environ.get("LABEL", "off")
CHECK = (("direct-p", 1, 40, 1024, 1024, 128), ("fp8", 1, 40, 1024, 1024, 128), ("direct-p", 2, 3, 1000, 1000, 64),
         ("fp8", 1, 12, 32760, 32760, 128), ("direct-p", 1, 12, 32760, 512, 128), ("fp8", 1, 5, 4097, 300, 64))
PAIRS = tuple(c for c in (("direct-p", 40, 1024, 1024, 128), ("fp8", 40, 1024, 1024, 128), ("direct-p", 40, 2048, 2048, 128),
         ("direct-p", 40, 4096, 4096, 128), ("direct-p", 40, 7680, 7680, 128), ("direct-p", 12, 32760, 512, 128),
         ("direct-p", 12, 32760, 32760, 128), ("fp8", 12, 32760, 32760, 128), ("direct-p", 40, 2048, 2048, 64)) if int(os.environ.get("MIN_S", 0)) <= c[2] <= int(os.environ.get("MAX_S", 1 << 20)))
if os.environ.get("FP8_LONG") == "2":  # the split shapes with the order alternated, and direct-p beside them
    PAIRS = (("fp8", 12, 32760, 32760, 128), ("fp8", 12, 32760, 32760, 64), ("direct-p", 12, 32760, 32760, 128),
             ("direct-p", 40, 1024, 1024, 128), ("fp8", 40, 1024, 1024, 128))
if os.environ.get("FP8_LONG") == "3":  # the A/A control's shapes
    PAIRS = (("fp8", 12, 32760, 32760, 128), ("fp8", 12, 32760, 32760, 64))
if os.environ.get("FP8_LONG") == "1":  # which of fp8 D128's options (cluster 2, split_tail) the call's loss follows
    PAIRS = (("fp8", 12, 32760, 32760, 128), ("fp8", 40, 32760, 32760, 128), ("fp8", 12, 32760, 32760, 64),
             ("fp8", 40, 32760, 32760, 64))
ROUNDS = int(os.environ.get("ROUNDS", 4))


def rand(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)


LSE = os.environ.get("LSE", "1") == "1"  # pairs with LSE=0: the call as wan_fp4.attention makes it


def call(q, k, v, mode, config):
    return host.run(q, k, v, mode, config=config, return_lse=LSE, prebuilt=True)


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b) if x is not None)


if "check" in sys.argv[1:]:
    torch.manual_seed(0)
    for mode, b, h, sq, skv, d in CHECK:
        q, k, v = rand(b, sq, h, d), rand(b, skv, h, d), rand(b, skv, h, d)
        want = call(q, k, v, mode, OFF)
        eager = sum(same(call(q, k, v, mode, None), want) for _ in range(20))
        box, g = {}, torch.cuda.CUDAGraph()
        call(q, k, v, mode, None)
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            box["out"] = call(q, k, v, mode, None)
        replays = 0
        for _ in range(10):
            g.replay()
            torch.cuda.synchronize()
            replays += same(box["out"], want)
        finite = bool(torch.isfinite(want[0].float()).all())
        print(f"{mode} B{b} H{h} Sq{sq} Skv{skv} D{d}: the default's output and LSE equal to {LABEL}'s in {eager}/20 eager "
              f"calls and {replays}/10 graph replays (finite: {finite})", flush=True)
        del q, k, v, want, box, g
        torch.cuda.empty_cache()

if "pairs" in sys.argv[1:]:
    for mode, h, sq, skv, d in PAIRS:
        q, k, v = rand(1, sq, h, d), rand(1, skv, h, d), rand(1, skv, h, d)
        launches = 20 if sq * skv <= 4096 * 4096 else 3
        ratios, times = [], {None: [], "off": []}
        for r in range(ROUNDS):
            # ORDER=alternate: pdl first in even rounds, off first in odd ones (a bias of the first
            # timing in a round cancels); else pdl first in every round, as the first runs did
            order = ((None, None), ("off", OFF))
            if os.environ.get("ORDER") == "alternate" and r % 2:
                order = order[::-1]
            for label, cfg in order:
                times[label].append(_graph_ms(lambda: call(q, k, v, mode, cfg), launches) * 1e3)
            ratios.append(times["off"][-1] / times[None][-1])
        on, off = times[None], times["off"]
        print(f"{mode} B1 H{h} Sq{sq} Skv{skv} D{d}: call: default {min(on):.1f}-{max(on):.1f} us, {LABEL} {min(off):.1f}-"
              f"{max(off):.1f} us, {LABEL}/default {' '.join(f'{r:.3f}' for r in ratios)}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
