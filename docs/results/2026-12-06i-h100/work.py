"""The epilogue's output rows stored by TMA (sm90 option tma_store), alone and with the V scales
loaded under the last PV (sv_early), against the package's kernel (its threads' 16-byte loads from
shared memory and global stores). `check`: output and LSE bit for
bit between the two, fresh inputs written in place before every eager call and graph replay, at
short shapes (tail_rows splits), a Wan shape and S not a multiple of 64. `pairs`: the whole call
and the kernel alone from CUDA graphs, the two alternated per round, with cuDNN BF16's call
beside at 1,024 tokens. A job script, not part of the package."""
import dataclasses
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms, _operands  # noqa: E402
from wan_fp4.kernels import sm90  # noqa: E402
from wan_fp4.kernels.sm90 import aot, host  # noqa: E402

PACKAGE = aot.PREBUILT
TMA = dataclasses.replace(aot.PREBUILT, directory=os.path.abspath(".device/sm90_tma"))
SVE = dataclasses.replace(aot.PREBUILT, directory=os.path.abspath(".device/sm90_sve"))
# SET=tma (the first run): tma_store alone and with sv_early; SET=sve: sv_early alone
WAYS = {"plain": (PACKAGE, None), "tma": (TMA, {"tma_store": True}),
        "tma+sve": (TMA, {"tma_store": True, "sv_early": True})}
if os.environ.get("SET") == "sve":
    WAYS = {"plain": (PACKAGE, None), "sve": (SVE, {"sv_early": True})}
SHAPES = ((1, 40, 1024, 1024, 128, "direct-p"), (1, 40, 1024, 1024, 64, "direct-p"),
          (2, 4, 320, 320, 64, "direct-p"), (2, 3, 1000, 1000, 64, "direct-p"),
          (1, 40, 1024, 1024, 128, "fp8"), (1, 12, 32760, 32760, 128, "fp8"),
          (1, 12, 32760, 32760, 128, "direct-p"), (1, 12, 32760, 512, 128, "direct-p"),
          (1, 40, 1024, 1024, 64, "fp8"), (1, 12, 32760, 512, 128, "fp8"))


def call(q, k, v, mode, way, lse=True):
    host.PREBUILT, config = WAYS[way]
    try:
        return host.run(q, k, v, mode, return_lse=lse, config=config, prebuilt=True)
    finally:
        host.PREBUILT = PACKAGE


def kernel(ops, mode, d, out, lse, way):
    host.PREBUILT, config = WAYS[way]
    try:
        return sm90.launch(ops, mode, d, config=config, out=out, lse=lse, prebuilt=True)
    finally:
        host.PREBUILT = PACKAGE


def name(b, h, sq, skv, d, mode):
    return f"{mode} B{b} H{h} Sq{sq} Skv{skv} D{d}"


if "check" in sys.argv[1:]:
    torch.manual_seed(0)
    for b, h, sq, skv, d, mode in SHAPES[:6] + ((1, 3, 77, 300, 128, "direct-p"), (2, 5, 4097, 4097, 64, "fp8")):
        q = torch.empty(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.empty(b, skv, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        n = 4 if sq * skv > 4096 ** 2 else 8
        for way in list(WAYS)[1:]:
            eager = 0
            for _ in range(n):
                for t in (q, k, v):
                    t.normal_()
                got = [t.clone() for t in call(q, k, v, mode, way)]
                eager += all(torch.equal(x, y) for x, y in zip(got, call(q, k, v, mode, "plain")))
            call(q, k, v, mode, way)
            torch.cuda.synchronize()
            box, g = {}, torch.cuda.CUDAGraph()
            host.PREBUILT, config = WAYS[way]
            with torch.cuda.graph(g):
                box["out"] = host.run(q, k, v, mode, return_lse=True, config=config, prebuilt=True)
            host.PREBUILT = PACKAGE
            replays = 0
            for _ in range(n):
                for t in (q, k, v):
                    t.normal_()
                g.replay()
                torch.cuda.synchronize()
                replays += all(torch.equal(x, y) for x, y in zip(box["out"], call(q, k, v, mode, "plain")))
            print(f"{name(b, h, sq, skv, d, mode)}: {way}'s output and LSE equal to the package's in {eager}/{n} eager "
                  f"calls and {replays}/{n} graph replays, fresh inputs each", flush=True)
            del box, g
        del q, k, v
        torch.cuda.empty_cache()

if "pairs" in sys.argv[1:]:
    rounds = int(os.environ.get("ROUNDS", "4"))
    for b, h, sq, skv, d, mode in SHAPES:
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for s in (sq, skv, skv))
        launches = 20 if sq * skv <= 4096 * 4096 else (3 if sq * skv < 40000 ** 2 else 1)
        ops, out, lse = _operands(q, k, v, mode)
        times = {f"{part} {w}": [] for part in ("call", "kernel") for w in WAYS}
        cudnn = []
        for r in range(rounds):
            for w in (list(WAYS) if r % 2 == 0 else list(WAYS)[::-1]):
                times[f"call {w}"].append(_graph_ms(lambda: call(q, k, v, mode, w, False), launches) * 1e3)
                times[f"kernel {w}"].append(_graph_ms(lambda: kernel(ops, mode, d, out, lse, w), launches) * 1e3)
            if sq <= 1024 and d == 128:
                qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
                with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                    cudnn.append(_graph_ms(lambda: F.scaled_dot_product_attention(qt, kt, vt), launches) * 1e3)
        line = []
        for part in ("call", "kernel"):
            a = times[f"{part} plain"]
            line.append(f"{part}: plain {min(a):.2f}-{max(a):.2f} us")
            for w in list(WAYS)[1:]:
                b_ = times[f"{part} {w}"]
                line.append(f"{w} {min(b_):.2f}-{max(b_):.2f} us, {w}/plain " + " ".join(f"{x / y:.3f}" for x, y in zip(b_, a)))
        if cudnn:
            line.append(f"cuDNN BF16 {min(cudnn):.2f}-{max(cudnn):.2f} us")
        print(f"{name(b, h, sq, skv, d, mode)}: " + "; ".join(line), flush=True)
        del q, k, v, ops, out, lse
        torch.cuda.empty_cache()
