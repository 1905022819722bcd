#!/usr/bin/env python3
"""The drift report: `wan-fp4 drift` (wan_fp4.eval.drift and wan_fp4.eval.report) under its old name.

    python scripts/drift_report.py --model random:1.3b --out $OUT/drift_1.3b
    python scripts/drift_report.py --model /models/Wan2.1-T2V-14B-Diffusers --out report/

is `wan-fp4 drift` with the same flags; `wan-fp4 drift --help` lists them.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wan_fp4 import cli  # noqa: E402


def main(argv=None) -> int:
    return cli.main(["drift", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
