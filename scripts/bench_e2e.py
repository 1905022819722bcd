#!/usr/bin/env python3
"""Per-forward latency of a Wan2.1 transformer for each attention mode and control, at real shapes.

    python scripts/bench_e2e.py --model random:14b --height 720 --width 1280 --frames 81 \
        --modes bf16-sdpa,bf16-fa4,fp8,direct-p,direct-p-fp4,cudnn-fp8 --json $OUT/e2e_14b_720p.json

Same as `wan-fp4 bench e2e ...`; everything is in wan_fp4.eval.latency (see its docstring and
--help). Peers that do not import here are skipped with the reason; the table comes last.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wan_fp4.eval.latency import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
