"""What direct-p's accuracy would be with statistics that need no pass over all keys (CPU is fine):

    python scripts/local_stats.py                     # synthetic inputs, 4 seeds
    python scripts/local_stats.py --captured          # the embedded trained model's own q, k, v

Per input family, the relative L2 error against exact attention of direct-p today (K's mean and
V's channel scales over all keys), with K smoothed by its first 128 keys' mean, and with V's scale
per 128-key block as well (one power of two for all channels, carried in the codes and the ones
row), and with V's scale per 128-key block and channel applied to each tile's PV partial:
wan_fp4/eval/local_stats.py, docs/SM90_GEN2.md items 27 and 69. Synthetic: the Q/K families of
issue 16's accuracy target with N(0,1) V, then V families (channel and token outliers, a large
mean, a scale drifting along the keys) with N(0,1) Q, K; each over --seeds draws, with the
per-seed ratio of each local variant's error to today's. --captured: every layer's self and cross
attention of the trained model at its first, middle and last step, per kind and step.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from wan_fp4.eval.capture import TRAINED_PROMPTS  # noqa: E402
from wan_fp4.eval.local_stats import VARIANTS, v_block_scales, v_families, variant_errors  # noqa: E402
from wan_fp4.eval.row_max_moves import input_families  # noqa: E402


def _line(label, errors):
    """errors: one dict of VARIANTS -> error per draw; prints each variant's mean error, then each
    variant's ratio to today's per draw (least-most, mean)."""
    mean = {v: sum(e[v] for e in errors) / len(errors) for v in VARIANTS}
    ratios = {v: [e[v] / e["today"] for e in errors] for v in VARIANTS[1:]}
    print(f"{label:34s} " + "  ".join(f"{mean[v]:.5f}" for v in VARIANTS) + "   "
          + "  ".join(f"{min(r):.3f}-{max(r):.3f} ({sum(r) / len(r):.3f})" for r in ratios.values()), flush=True)


def synthetic(args):
    print(f"B1 H{args.heads} S{args.seq} D{args.head_dim}, error over the first {args.rows} query rows, "
          f"{args.seeds} seeds; mean error: {', '.join(VARIANTS)}; then against today's, per draw "
          f"(least-most, mean): {', '.join(VARIANTS[1:])}")
    q_fams, v_fams = {}, {}
    for seed in range(args.seeds):
        g = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(1, args.seq, args.heads, args.head_dim, generator=g) for _ in range(3))
        for name, (qq, kk) in input_families(q, k, generator=g).items():
            q_fams.setdefault(name, []).append(variant_errors(qq, kk, v, rows=args.rows))
        for name, vv in v_families(v, generator=g).items():
            v_fams.setdefault(name, []).append(variant_errors(q, k, vv, rows=args.rows))
    for name, errors in q_fams.items():
        _line(f"Q, K: {name}", errors)
    for name, errors in v_fams.items():
        _line(f"V: {name}", errors)


def _block_mass(r):
    """Exact attention's probability mass per 128-key block, mean over heads and query rows."""
    s = torch.einsum("bqhd,bkhd->bhqk", r.q.float(), r.k.float()) / r.q.shape[-1] ** 0.5
    p = torch.nn.functional.pad(torch.softmax(s, dim=-1), (0, -s.shape[-1] % 128))
    return p.unflatten(-1, (-1, 128)).sum(dim=-1).mean(dim=(0, 1, 2))


def captured(args):
    from wan_fp4.eval.capture import trained_model_calls

    steps, records = trained_model_calls(args.prompts)
    print(f"the embedded trained model, bf16 on the CPU, prompts {args.prompts}, seed 0; every layer's call at "
          f"steps {', '.join(f'{w} ({i})' for w, i in steps.items())}, all query rows; mean error: {', '.join(VARIANTS)}; "
          f"then against today's, per call (least-most, mean): {', '.join(VARIANTS[1:])}")
    for kind in ("self", "cross"):
        of_kind = [r for r in records if r.kind == kind]
        q, k = of_kind[0].q, of_kind[0].k
        print(f"{kind}: B{q.shape[0]} H{q.shape[2]} S_q {q.shape[1]} S_kv {k.shape[1]} D{q.shape[3]}")
        for word, step in steps.items():
            errors = [variant_errors(r.q, r.k, r.v) for r in of_kind if r.step == step]
            _line(f"  step {word} ({step}), {len(errors)} calls", errors)
        # why a block scale can cost: blocks whose V scale is below block 0's, and the attention they carry
        shifts = torch.stack([v_block_scales(r.v.float())[2].float() for r in of_kind]).mean(dim=(0, 1, 2))
        mass = torch.stack([_block_mass(r) for r in of_kind]).mean(dim=0)
        print(f"  per 128-key block, mean over calls and heads: V scale against block 0's (binades) "
              f"{', '.join(f'{x:+.2f}' for x in shifts.tolist())}; exact attention's mass "
              f"{', '.join(f'{x:.3f}' for x in mass.tolist())}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--rows", type=int, default=1024, help="query rows the errors are measured on")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--captured", action="store_true", help="the trained model's q, k, v instead of synthetic inputs")
    ap.add_argument("--prompts", nargs="+", default=list(TRAINED_PROMPTS), help="prompts for --captured")
    args = ap.parse_args()
    captured(args) if args.captured else synthetic(args)


if __name__ == "__main__":
    main()
