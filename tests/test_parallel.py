"""Direct-P under diffusers' context parallelism, on 2 CPU processes (gloo): scripts/bench_parallel.py.

The GPU run (2 H200s) is in BENCHMARKS.md; here the same script runs a tiny transformer so the
plumbing (processor parallel config, the direct_p backend's context-parallel op, LSE for ring
attention) is checked on every CI run.
"""
import json
import socket
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, argv, codes):
    import os

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    # diffusers sizes its device mesh from the accelerator count, 0 on a CPU-only machine
    torch.accelerator.device_count = lambda: 1
    sys.path.insert(0, str(SCRIPTS))
    import bench_parallel

    codes[rank] = bench_parallel.main(argv)


def _run(tmp_path, extra):
    out = tmp_path / "parallel.json"
    argv = ["--model", "tiny", "--device", "cpu", "--height", "64", "--width", "64", "--frames", "5",
            "--modes", "bf16,direct-p,fp8,direct-p-fp4", "--reps", "1", "--json", str(out)] + extra
    codes = mp.Manager().dict()
    mp.spawn(_worker, args=(2, _free_port(), argv, codes), nprocs=2, join=True)
    assert dict(codes) == {0: 0, 1: 0}
    return json.loads(out.read_text())


@pytest.mark.parametrize("extra, kind", [([], "ulysses"), (["--ring"], "ring")])
def test_two_process_context_parallel_matches_one_process(tmp_path, extra, kind):
    result = _run(tmp_path, extra)
    assert result["world"] == 2 and result["parallelism"] == kind
    assert [r["mode"] for r in result["rows"]] == ["bf16", "direct-p", "fp8", "direct-p-fp4"]
    for row in result["rows"]:
        assert row["match"], row
    if kind == "ring":
        # ring splits the keys: fp8/direct-p quantise each chunk on its own, so they differ a
        # little from one process (and bf16 only by FP32 merge rounding)
        by_mode = {r["mode"]: r["rel_l2_vs_1_device"] for r in result["rows"]}
        assert by_mode["bf16"] < 1e-5 < by_mode["direct-p"]
