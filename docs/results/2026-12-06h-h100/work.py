"""split_tail and tail_rows decoding each CTA's index with one function (split.cta_work, the
launch's multiply-shift divisors for the query tiles and heads) against the objects as committed
before (.device/sm90_old: HEAD~'s objects, their shims linked on the CPU). Only the CTA index
arithmetic changed, so every output bit must stay. `check`: output and LSE bit for bit between
the two, fresh inputs written in place before every eager call and graph replay, at shapes whose
plan splits (split_tail: fp8's defaults at H12 S32760; tail_rows: direct-p at short shapes).
`pairs`: the whole call and the kernel alone from CUDA graphs, the two alternated per round. A job
script, not part of the package."""
import dataclasses
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms, _operands  # noqa: E402
from wan_fp4.kernels import sm90  # noqa: E402
from wan_fp4.kernels.sm90 import aot, host  # noqa: E402
from wan_fp4.kernels.sm90.split import plan  # noqa: E402

NEW = aot.PREBUILT
OLD = dataclasses.replace(aot.PREBUILT, directory=os.path.abspath(".device/sm90_old"))
WAYS = {"old": OLD, "new": NEW}
SPLIT_SHAPES = ((1, 12, 32760, 32760, 128, "fp8"), (1, 12, 32760, 32760, 64, "fp8"),
                (1, 40, 1024, 1024, 128, "direct-p"), (1, 40, 1024, 1024, 64, "direct-p"),
                (2, 3, 1000, 1000, 64, "direct-p"), (2, 4, 320, 320, 64, "direct-p"))


def use(way):
    host.PREBUILT = WAYS[way]


def call(q, k, v, mode, lse=True):
    return host.run(q, k, v, mode, return_lse=lse, prebuilt=True)


def describe(b, h, sq, skv, d, mode):
    cfg = sm90.default_config(mode, d)
    p = plan(b, h, sq, skv, cfg["cluster"], rows=cfg["tail_rows"]) if (cfg["split_tail"] or cfg["tail_rows"]) else None
    how = "rows" if cfg["tail_rows"] else "keys"
    return f"{mode} B{b} H{h} Sq{sq} Skv{skv} D{d}" + (f" (splits {p.split} of {p.ctas} tiles by {how} into {p.segments})"
                                                    if p else "")


if "check" in sys.argv[1:]:
    torch.manual_seed(0)
    for b, h, sq, skv, d, mode in SPLIT_SHAPES:
        q = torch.empty(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.empty(b, skv, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        n = 6 if sq * skv > 4096 ** 2 else 10
        eager = 0
        for _ in range(n):
            for t in (q, k, v):
                t.normal_()
            use("new")
            got = [t.clone() for t in call(q, k, v, mode)]
            use("old")
            eager += all(torch.equal(x, y) for x, y in zip(got, call(q, k, v, mode)))
        use("new")
        call(q, k, v, mode)
        torch.cuda.synchronize()
        box, g = {}, torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            box["out"] = call(q, k, v, mode)
        replays = 0
        for _ in range(n):
            for t in (q, k, v):
                t.normal_()
            g.replay()
            torch.cuda.synchronize()
            use("old")
            replays += all(torch.equal(x, y) for x, y in zip(box["out"], call(q, k, v, mode)))
            use("new")
        print(f"{describe(b, h, sq, skv, d, mode)}: output and LSE equal to the old objects' in {eager}/{n} eager "
              f"calls and {replays}/{n} graph replays, fresh inputs each", flush=True)
        del q, k, v, box, g
        torch.cuda.empty_cache()

if "pairs" in sys.argv[1:]:
    rounds = int(os.environ.get("ROUNDS", "4"))
    for b, h, sq, skv, d, mode in SPLIT_SHAPES + ((1, 12, 32760, 512, 128, "direct-p"),):
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for s in (sq, skv, skv))
        launches = 20 if sq * skv <= 4096 * 4096 else (3 if sq * skv < 40000 ** 2 else 1)
        ops, out, lse = _operands(q, k, v, mode)
        times = {f"{part} {w}": [] for part in ("call", "kernel") for w in WAYS}
        for r in range(rounds):
            for w in (list(WAYS) if r % 2 == 0 else list(WAYS)[::-1]):
                use(w)
                times[f"call {w}"].append(_graph_ms(lambda: call(q, k, v, mode, False), launches) * 1e3)
                times[f"kernel {w}"].append(_graph_ms(lambda: sm90.launch(ops, mode, d, out=out, lse=lse, prebuilt=True),
                                                      launches) * 1e3)
        use("new")
        line = []
        for part in ("call", "kernel"):
            a, b_ = times[f"{part} old"], times[f"{part} new"]
            line.append(f"{part}: old {min(a):.1f}-{max(a):.1f} us, new {min(b_):.1f}-{max(b_):.1f} us, new/old "
                        + " ".join(f"{x / y:.3f}" for x, y in zip(b_, a)))
        print(f"{describe(b, h, sq, skv, d, mode)}: " + "; ".join(line), flush=True)
        del q, k, v, ops, out, lse
        torch.cuda.empty_cache()
