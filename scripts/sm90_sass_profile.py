"""Static profile of the sm90 kernel, on the CPU (no GPU): registers, spills, shared memory, and
the consumer main loop's instructions per warp per 128-key tile, by class, from SASS.

    python scripts/sm90_sass_profile.py                         # direct-p D128, D64 and fp8 D128
    python scripts/sm90_sass_profile.py --mode direct-p --head-dim 128 --config '{"fold": 1}'

Needs nvidia-cutlass-dsl and cuobjdump (CUDA toolkit, or the copy bundled with triton).
Library: wan_fp4/eval/sass_profile.py.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from wan_fp4.eval.sass_profile import profile, table  # noqa: E402

DEFAULT_CASES = (("direct-p", 128), ("direct-p", 64), ("fp8", 128))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("direct-p", "fp8"), help="one mode (default: the three default cases)")
    p.add_argument("--head-dim", type=int, choices=(64, 128), default=128)
    p.add_argument("--config", default="{}", help="JSON kernel options over the mode's default config")
    args = p.parse_args(argv)
    config = json.loads(args.config)
    if not isinstance(config, dict):
        p.error("--config must be a JSON object")
    cases = ((args.mode, args.head_dim),) if args.mode else DEFAULT_CASES
    for mode, head_dim in cases:
        print(table(profile(mode, head_dim, **config)))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
