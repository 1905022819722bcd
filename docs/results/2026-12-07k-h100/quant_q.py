"""Q's codes made in the attention kernel (the sm90 kernel's `quant_q`, docs/SM90_GEN2.md item 59),
direct-p and fp8: first bit for bit against the package's path (the same kernel options without quant_q, on a full
pre-pass), then timed. The pre-pass runs without Q's blocks (prepare_fp8(quantise_q=False)); the
kernel loads its CTA's 128 BF16 rows of Q, takes their amax across both consumer warp groups, and
writes the E4M3 codes into shared memory itself; `quant_q` 1 reads Q after the pdl wait, 2 before it
(while the pre-pass drains). Timed as q_bound.py timed its bound: the whole call replayed from a CUDA
graph and after launches writing Q, K and V, alternated in rounds beside the package and cuDNN BF16.
Kernels from PREBUILT_DIR (build_prebuilt.py --out, the package's defaults beside the variants).
A job script, not part of the package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, inputs, row  # noqa: E402
from wan_fp4.eval.bench_attention import use_prebuilt_dir  # noqa: E402
from wan_fp4.kernels import prepare as P  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.config import length_config  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

use_prebuilt_dir(os.environ.get("PREBUILT_DIR"))


def variants(mode, d, s_q, s_kv):
    """{label: (the package's config at these lengths, the same with quant_q)}."""
    base = length_config(mode, d, s_q, s_kv)
    out = {f"quant_q {n}": (base, {**base, "quant_q": n}) for n in (1, 2)}
    if base.get("fold") != 1:  # only quant_q 2 is built at the default fold
        out.pop("quant_q 1")
    return out


def quant_call(q, k, v, mode, cfg):
    ops = P.prepare_fp8(q, k, v, quantise_q=False, **v_layout_args(mode))
    out, lse = host.launch(ops, mode, q.shape[-1], config=cfg, prebuilt=True, q=q)
    return ops, out, lse


def check(mode, shape, s_kv=None, poison=None):
    """Bitwise: output, LSE, q_scale and the range statistics against the package's kernel of the same
    options on a full pre-pass. poison: (value, where) written into q first: the flag must rise."""
    b, s, h, d = shape
    s_kv = s if s_kv is None else s_kv
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 3
    k = torch.randn((b, s_kv, h, d), device="cuda", dtype=torch.bfloat16)
    v = torch.randn((b, s_kv, h, d), device="cuda", dtype=torch.bfloat16)
    q[0, min(5, s - 1), 0, 3] = 40.0  # one block with a larger scale than the rest
    if poison is not None:
        q[0, min(poison[1], s - 1), h - 1, 7] = poison[0]
    lines = []
    for label, (base, cfg) in variants(mode, d, s, s_kv).items():
        full = P.prepare_fp8(q, k, v, **v_layout_args(mode))
        ref, ref_lse = host.launch(full, mode, d, config=base, prebuilt=True)
        ops, out, lse = quant_call(q, k, v, mode, cfg)
        torch.cuda.synchronize()
        stats, want = ops.range_stats.tolist(), full.range_stats.tolist()
        if poison is not None:
            ok = stats[2] == 1.0 and want[2] == 1.0
        else:
            ok = (torch.equal(out.view(torch.int16), ref.view(torch.int16))
                  and torch.equal(lse.view(torch.int32), ref_lse.view(torch.int32))
                  and torch.equal(ops.q_scale, full.q_scale) and stats == want)
        lines.append(f"{'ok  ' if ok else 'FAIL'} {mode} B{b} H{h} Sq{s} Skv{s_kv} D{d} {label}"
                     f"{' poison ' + str(poison[0]) if poison else ''}: stats {stats} (pre-pass {want})")
    return lines


if __name__ == "__main__":
    torch.manual_seed(0)
    fails = 0
    shapes = (((1, 1024, 40, 128),), ((1, 1000, 12, 128),), ((2, 77, 3, 64),), ((1, 1, 4, 128),),
              ((1, 200, 5, 128), 700), ((2, 320, 4, 64),), ((1, 2048, 8, 128),), ((1, 1100, 3, 64), 300),
              ((1, 1024, 4, 128), None, (float("nan"), 300)), ((1, 1024, 4, 64), None, (float("inf"), 900)))
    for mode, args in [("direct-p", a) for a in shapes] + [("fp8", a) for a in shapes[:6]]:
        for line in check(mode, *args):
            fails += line.startswith("FAIL")
            print(line, flush=True)
    print(f"CHECK {'PASSED' if fails == 0 else f'FAILED ({fails})'}", flush=True)
    if fails:
        sys.exit(1)
    rounds = int(os.environ.get("ROUNDS", "3"))
    cases = (("direct-p", (1, 1024, 40, 128)), ("fp8", (1, 1024, 40, 128)), ("direct-p", (1, 1024, 12, 128)),
             ("direct-p", (1, 1024, 40, 64)), ("direct-p", (2, 320, 4, 64)), ("direct-p", (1, 2048, 40, 128)),
             ("direct-p", (1, 32760, 12, 128)), ("fp8", (1, 32760, 12, 128)), ("direct-p", (1, 4096, 40, 128)))
    for mode, shape in cases[:int(os.environ.get("CASES", len(cases)))]:
        b, s, h, d = shape
        q, k, v, writer, cudnn = inputs(shape)
        calls = {"package": (lambda m: lambda: host.run(q, k, v, m, prebuilt=True)[0])(mode)}
        for label, (_, cfg) in variants(mode, d, s, s).items():
            calls[label] = (lambda m, c: lambda: quant_call(q, k, v, m, c)[1])(mode, cfg)
        calls["cuDNN BF16"] = cudnn
        rep, mod = alternated(calls, writer, rounds if s < 32760 else 2)
        print(f"B{b} H{h} S{s} D{d} {mode} ({rounds} rounds; replayed | inputs written):", flush=True)
        for n in calls:
            print(row(n, rep[n], mod[n], 12), flush=True)
        del q, k, v, writer, cudnn
        torch.cuda.empty_cache()
