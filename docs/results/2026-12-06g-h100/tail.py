"""The last partial wave's query tiles split by rows (sm90 option tail_rows: each consumer warp
group's 64 rows a CTA of their own, the other group idle) against the plain kernel, both prebuilt
from .device/sm90_pair (PACKAGE=1: the package's own, where tail_rows is direct-p's default). `check`: output and LSE bit for bit, fresh inputs written in place before
every eager call and graph replay, at shapes whose plan splits. `pairs`: the whole call from CUDA
graphs alternated per round (without the LSE, as the model's attention calls it; the first run,
`rows/`, timed it with the LSE and its correction), and the kernel alone, at short and Wan shapes. `cudnn`: the call
beside cuDNN BF16's at 1,024 tokens. A job script, not part of the package."""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms, _operands  # noqa: E402
from wan_fp4.eval.bench_attention import use_prebuilt_dir  # noqa: E402
from wan_fp4.kernels import sm90  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.split import plan  # noqa: E402

ROWS, PLAIN = {"tail_rows": True}, None
if os.environ.get("PACKAGE") == "1":  # the package as committed: tail_rows direct-p's default
    ROWS, PLAIN = None, {"tail_rows": False}
else:
    use_prebuilt_dir(".device/sm90_pair")


def call(q, k, v, config=None, lse=True):
    return host.run(q, k, v, "direct-p", config=config, return_lse=lse, prebuilt=True)


if "check" in sys.argv[1:]:
    torch.manual_seed(0)
    for b, h, sq, skv, d in ((1, 40, 1024, 1024, 128), (1, 40, 1024, 1024, 64), (2, 3, 1000, 1000, 64),
                             (1, 5, 4097, 300, 64), (1, 12, 32760, 512, 128), (1, 40, 7680, 7680, 128)):
        p = plan(b, h, sq, skv, rows=True)
        q = torch.empty(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.empty(b, skv, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        n = 10
        eager = 0
        for _ in range(n):
            for t in (q, k, v):
                t.normal_()
            got = [t.clone() for t in call(q, k, v, ROWS)]
            eager += all(torch.equal(x, y) for x, y in zip(got, call(q, k, v, PLAIN)))
        call(q, k, v, ROWS)
        torch.cuda.synchronize()
        box, g = {}, torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            box["out"] = call(q, k, v, ROWS)
        replays = 0
        for _ in range(n):
            for t in (q, k, v):
                t.normal_()
            g.replay()
            torch.cuda.synchronize()
            replays += all(torch.equal(x, y) for x, y in zip(box["out"], call(q, k, v, PLAIN)))
        print(f"B{b} H{h} Sq{sq} Skv{skv} D{d}: plan splits {p.split} of {p.ctas} tiles by rows; output and LSE equal "
              f"to the plain kernel's in {eager}/{n} eager calls and {replays}/{n} graph replays, fresh inputs each",
              flush=True)
        del q, k, v, box, g
        torch.cuda.empty_cache()

if "pairs" in sys.argv[1:]:
    shapes = ((1, 40, 1024, 1024, 128), (1, 40, 1024, 1024, 64), (2, 3, 1000, 1000, 64),
              (1, 12, 1024, 1024, 128), (1, 40, 7680, 7680, 128), (1, 12, 32760, 512, 128),
              (1, 12, 32760, 32760, 128), (1, 12, 32760, 32760, 64), (1, 40, 75600, 75600, 128))
    if os.environ.get("PACKAGE") == "1":  # the split shapes, the trained model's, and one the rule leaves plain
        shapes = ((1, 40, 1024, 1024, 128), (1, 40, 1024, 1024, 64), (2, 3, 1000, 1000, 64), (2, 4, 320, 320, 64),
                  (1, 12, 32760, 512, 128))
    for b, h, sq, skv, d in shapes:
        p = plan(b, h, sq, skv, rows=True)
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for s in (sq, skv, skv))
        launches = 20 if sq * skv <= 4096 * 4096 else (3 if sq * skv < 40000 ** 2 else 1)
        ops, out, lse = _operands(q, k, v, "direct-p")
        ways = {"plain": PLAIN, "rows": ROWS}
        times = {f"{part} {w}": [] for part in ("call", "kernel") for w in ways}
        for r in range(4):
            order = list(ways) if r % 2 == 0 else list(ways)[::-1]
            for w in order:
                times[f"call {w}"].append(_graph_ms(lambda: call(q, k, v, ways[w], False), launches) * 1e3)
                times[f"kernel {w}"].append(_graph_ms(lambda: sm90.launch(ops, "direct-p", d, config=ways[w], out=out,
                                                                           lse=lse, prebuilt=True), launches) * 1e3)
        line = []
        for part in ("call", "kernel"):
            a, b_ = times[f"{part} plain"], times[f"{part} rows"]
            line.append(f"{part}: plain {min(a):.1f}-{max(a):.1f} us, rows {min(b_):.1f}-{max(b_):.1f} us, rows/plain "
                        + " ".join(f"{x / y:.3f}" for x, y in zip(b_, a)))
        print(f"B{b} H{h} Sq{sq} Skv{skv} D{d} (splits {p.split} of {p.ctas}): " + "; ".join(line), flush=True)
        del q, k, v, ops, out, lse
        torch.cuda.empty_cache()

if "cudnn" in sys.argv[1:]:
    for h in (40, 12):
        q, k, v = (torch.randn(1, 1024, h, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

        def cudnn_bf16():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(qt, kt, vt)

        t = [(_graph_ms(cudnn_bf16, 20) * 1e3, _graph_ms(lambda: call(q, k, v, ROWS, False), 20) * 1e3) for _ in range(4)]
        print(f"H{h} S1024 torch SDPA cuDNN BF16 call " + " ".join(f"{a:.1f}" for a, _ in t)
              + " us; wan_fp4 direct-p call (tail_rows) " + " ".join(f"{c:.1f}" for _, c in t) + " us, alternated",
              flush=True)
