#!/usr/bin/env python3
"""Attention speed of our kernels next to the peers: see wan_fp4/eval/bench_attention.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wan_fp4.eval.bench_attention import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
