#!/usr/bin/env python3
"""torch.compile of the real Wan2.1 architectures with every wan_fp4 policy: graphs, graph breaks,
recompiles (dynamo's counters), on the GPU's own dispatch path.

    python scripts/check_compile_device.py --json $OUT/compile_check.json
    python scripts/check_compile_device.py --backend inductor --scopes blocks --json ...

Everything is in wan_fp4.eval.compile_check (see its docstring and --help).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wan_fp4.eval.compile_check import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
