#!/usr/bin/env python3
"""The one command a B200/GB200 owner runs on the sm100a kernel: its checks against
`wan_fp4.reference` (shiftless and guarded, awkward and Wan shapes, and bit for bit against the
debug build whose PV waits for the next QK, pv_qk_sync), i.e. `wan-fp4 check --kernels sm100-cute`.
Exit status 1 on any failure; off Blackwell every case is skipped and says why.

    python scripts/verify_sm100.py [--suite quick|full|large] [--json sm100.json]

Timing afterwards: python scripts/bench_sm100.py --json sm100_bench.json
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wan_fp4.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["check", "--kernels", "sm100-cute", *sys.argv[1:]]))
