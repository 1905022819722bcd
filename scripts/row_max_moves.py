"""How often direct-p's row reference would be refreshed, exactly and with slack (CPU is fine):

    python scripts/row_max_moves.py --seq 16384 --heads 1 --top 126
    python scripts/row_max_moves.py --seq 32760 --top --headroom 0.5 1 2 3 --error-rows 512
    python scripts/row_max_moves.py --seq 4096 --top --headroom 3 --families all
    python scripts/row_max_moves.py --captured

Prints, per input family, the share of (row, key tile) pairs whose reference moves and the share
of tiles in which any row of a warp (16 rows) or warp group (64 rows) does: the redo rate a
speculative row max would pay (wan_fp4/eval/row_max_moves.py, docs/SM90_GEN2.md item 4); with
--headroom, the same for direct-p's headroom rule with that many log2 units, and the error it
costs against exact attention (beside the running max's) over the first --error-rows query rows
(item 12). --families all adds channel outliers, a large mean on K and huge logits to the N(0,1)
and peaky inputs (wan_fp4.eval.row_max_moves.input_families). --captured counts the headroom rule
(--headroom, default direct-p's) on the q, k that the embedded trained model makes while it
denoises --prompts at its own defaults (wan_fp4.eval.capture), per kind and step, pooled over
layers and prompts, beside as many N(0,1) and peaky draws of the same shape.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from wan_fp4.eval.capture import TRAINED_PROMPTS  # noqa: E402
from wan_fp4.eval.row_max_moves import headroom_error, input_families, pooled_moves, row_max_moves  # noqa: E402
from wan_fp4.modes import DIRECT_P_HEADROOM, DIRECT_P_SLOPE  # noqa: E402
from wan_fp4.pipelines import trained  # noqa: E402

GUIDANCE = 5.0  # the command line's default


def _logit_std(calls):
    """Mean over rows of the std of the scaled scores q.k / sqrt(D): N(0,1) inputs give 1."""
    return sum(torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()).std(dim=-1).mean().item()
               / q.shape[-1] ** 0.5 for q, k, _ in calls) / len(calls)


def _print_pooled(label, calls, headroom):
    r = pooled_moves(calls, headroom=headroom)
    print(f"{label:26s} {r['calls']:5d} {_logit_std(calls):6.2f}   {r['row_rate']:.4f} {r['warp_rate']:.4f} "
          f"{r['warp_group_rate']:.4f}   {r['row_rate_after_first']:.4f} {r['warp_rate_after_first']:.4f} "
          f"{r['warp_group_rate_after_first']:.4f}", flush=True)


def captured(args):
    from wan_fp4.eval.capture import trained_model_calls

    d = trained.DEFAULTS
    n = d["steps"]
    steps, records = trained_model_calls(args.prompts, seed=args.seed, guidance=GUIDANCE)
    g = torch.Generator().manual_seed(args.seed)
    print(f"model {trained.NAME!r} (trained), bf16 on the CPU, {d['height']}x{d['width']}, {d['frames']} frames, "
          f"{n} steps, guidance {GUIDANCE:g}, seed {args.seed}; prompts {args.prompts}")
    print(f"steps {', '.join(f'{w} ({i})' for w, i in steps.items())} of {n}, each step's conditional call (the "
          "first of its two CFG calls); every layer, head and query row")
    for h in args.headroom or [DIRECT_P_HEADROOM / DIRECT_P_SLOPE]:
        print(f"\nheadroom {h:g} log2 units: share of (row, tile) / (warp, tile) / (warp group, tile) that move, "
              "over all key tiles (the first always does) and over the tiles after the first; logit: the mean "
              "row's std of q.k / sqrt(D)")
        print(f"{'':26s} {'calls':>5s} {'logit':>6s}   {'all tiles: rows warps groups':28s}   after the first")
        for kind in ("self", "cross"):
            of_kind = [r for r in records if r.kind == kind]
            q, k = of_kind[0].q, of_kind[0].k
            print(f"{kind}: B{q.shape[0]} H{q.shape[2]} S_q {q.shape[1]} S_kv {k.shape[1]} D{q.shape[3]}")
            for word, step in steps.items():
                _print_pooled(f"  step {word} ({step})", [(r.q, r.k, r.v) for r in of_kind if r.step == step], h)
            draws = [[torch.randn(t.shape, generator=g) for t in (q, k, k)] for _ in range(len(of_kind) // len(steps))]
            for family in ("N(0,1)", "logit std ~6"):
                scaled = [(*input_families(qq, kk, generator=g)[family], vv) for qq, kk, vv in draws]
                _print_pooled(f"  {family}, same shape", scaled, h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=16384)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--top", type=int, nargs="*", default=[126], help="slack rules to count beside the exact one")
    ap.add_argument("--headroom", type=float, nargs="*", default=[],
                    help="log2 units added to the refreshed reference (each counted with the exact rule)")
    ap.add_argument("--error-rows", type=int, default=512, help="query rows the headroom errors are measured on")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families", choices=["two", "all"], default="two",
                    help="two: N(0,1) and logits of std ~6; all: also outliers, a large K mean, huge logits")
    ap.add_argument("--captured", action="store_true",
                    help="count on the embedded trained model's q, k instead of synthetic inputs")
    ap.add_argument("--prompts", nargs="+", default=list(TRAINED_PROMPTS), help="prompts for --captured")
    args = ap.parse_args()
    if args.captured:
        captured(args)
        return
    g = torch.Generator().manual_seed(args.seed)
    q, k, v = (torch.randn(1, args.seq, args.heads, args.head_dim, generator=g) for _ in range(3))
    families = input_families(q, k, generator=g)
    if args.families == "two":
        families = {name: families[name] for name in ("N(0,1)", "logit std ~6")}
    print(f"B1 H{args.heads} S{args.seq} D{args.head_dim}: share of (row, tile) / (warp, tile) / (warp group, tile) that trigger")
    for name, (qq, kk) in families.items():
        for top in [None, *args.top]:
            r = row_max_moves(qq, kk, v, top=top)
            rule = "exact max" if top is None else f"slack, top byte {top}"
            print(f"{name:16s} {rule:20s} rows {r['row_rate']:.4f}  warps {r['warp_rate']:.4f}  "
                  f"warp groups {r['warp_group_rate']:.4f}  ({r['tiles']} tiles)", flush=True)
        for h in args.headroom:
            r = row_max_moves(qq, kk, v, headroom=h)
            e = headroom_error(qq, kk, v, h, rows=args.error_rows)
            print(f"{name:16s} {f'headroom {h:g}':20s} rows {r['row_rate']:.4f}  warps {r['warp_rate']:.4f}  "
                  f"warp groups {r['warp_group_rate']:.4f}  ({r['tiles']} tiles)  error vs exact "
                  f"{e['vs_exact']:.4f} (running max {e['running_max_vs_exact']:.4f}), vs the running max "
                  f"{e['vs_running_max']:.4f}",
                  flush=True)


if __name__ == "__main__":
    main()
