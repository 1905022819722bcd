"""How often direct-p's row reference would be refreshed, exactly and with slack (CPU is fine):

    python scripts/row_max_moves.py --seq 16384 --heads 1 --top 126
    python scripts/row_max_moves.py --seq 32760 --top --headroom 0.5 1 2 3 --error-rows 512
    python scripts/row_max_moves.py --seq 4096 --top --headroom 3 --families all

Prints, per input family, the share of (row, key tile) pairs whose reference moves and the share
of tiles in which any row of a warp (16 rows) or warp group (64 rows) does: the redo rate a
speculative row max would pay (wan_fp4/eval/row_max_moves.py, docs/SM90_GEN2.md item 4); with
--headroom, the same for direct-p's headroom rule with that many log2 units, and the error it
costs against exact attention (beside the running max's) over the first --error-rows query rows
(item 12). --families all adds channel outliers, a large mean on K and huge logits to the N(0,1)
and peaky inputs (wan_fp4.eval.row_max_moves.input_families).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from wan_fp4.eval.row_max_moves import headroom_error, input_families, row_max_moves  # noqa: E402


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
    args = ap.parse_args()
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
