#!/usr/bin/env python3
"""Direct-P under diffusers' context parallelism, 1 GPU vs N GPUs (Ulysses x ring layouts).

    torchrun --nproc_per_node=4 scripts/bench_parallel.py --model 14b --height 720 --width 1280 \
        --frames 81 --modes bf16,direct-p --layouts 4x1,2x2,1x4 --json $OUT/parallel.json
    torchrun --nproc_per_node=2 scripts/bench_parallel.py --model 1.3b --ulysses 1 --ring 2 ...

Everything is in wan_fp4.eval.parallel (see its docstring and --help): each layout ULYSSESxRING
is diffusers' ContextParallelConfig(ulysses_degree, ring_degree); rank 0 reports speed-up,
efficiency and the relative L2 difference from its own 1-device output, and exits non-zero when
a difference exceeds its bound.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wan_fp4.eval.parallel import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
