"""Direct-P under diffusers' context parallelism on CPU processes (gloo): wan_fp4.eval.parallel,
the code behind scripts/bench_parallel.py.

The GPU runs are in BENCHMARKS.md; here the same code runs a tiny transformer so the plumbing
(processor parallel config, the direct_p backend's context-parallel op, LSE merging for ring
attention, Ulysses x ring hybrid) is checked on every CI run: 2 processes for Ulysses (2x1) and
ring (1x2), 4 processes for the hybrid (2x2), each against the 1-process output.
"""
import json
import socket
from types import SimpleNamespace

import pytest
import torch
import torch.multiprocessing as mp

from wan_fp4.eval import parallel
from wan_fp4.eval.parallel import Layout, LayoutError

MODES = ["bf16", "direct-p", "fp8", "direct-p-fp4"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, argv):
    import os
    import sys

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    # diffusers sizes its device mesh from the accelerator count, 0 on a CPU-only machine
    torch.accelerator.device_count = lambda: 1
    sys.exit(parallel.main(argv))  # mp.spawn raises on a non-zero exit


def _run(tmp_path, world, extra):
    out = tmp_path / "parallel.json"
    argv = ["--model", "tiny-random", "--device", "cpu", "--height", "64", "--width", "64", "--frames", "5",
            "--modes", ",".join(MODES), "--warmup", "0", "--reps", "1", "--json", str(out)] + extra
    mp.spawn(_worker, args=(world, _free_port(), argv), nprocs=world, join=True)
    return json.loads(out.read_text())


def _check_rows(result, layout, kind):
    rows = [r for r in result["rows"] if r["layout"] == layout]
    assert [r["mode"] for r in rows] == MODES and {r["parallelism"] for r in rows} == {kind}
    for row in rows:
        assert row["match"], row
    by_mode = {r["mode"]: r["rel_l2_vs_1_device"] for r in rows}
    if kind == "ulysses":
        # whole heads over the whole sequence: the same math as one process
        assert max(by_mode.values()) <= parallel.ULYSSES_TOLERANCE
    else:
        # the keys are split: fp8/direct-p quantise each chunk on its own, so they differ a little
        # from one process (and bf16 only by FP32 merge rounding)
        assert by_mode["bf16"] < 1e-5 < by_mode["direct-p"]


def test_two_processes_ulysses_and_ring_match_one_process(tmp_path):
    result = _run(tmp_path, 2, ["--layouts", "2x1,1x2"])
    assert result["world"] == 2 and result["layouts"] == ["2x1", "1x2"]
    _check_rows(result, "2x1", "ulysses")
    _check_rows(result, "1x2", "ring")


def test_four_processes_hybrid_2x2_matches_one_process(tmp_path):
    result = _run(tmp_path, 4, ["--ulysses", "2", "--ring", "2"])
    assert result["world"] == 4 and result["layouts"] == ["2x2"]
    _check_rows(result, "2x2", "hybrid")


# --------------------------------------------------------------------------- layouts, no processes
def _args(ulysses=None, ring=None, layouts=None):
    return SimpleNamespace(ulysses=ulysses, ring=ring, layouts=layouts)


@pytest.mark.parametrize("given, world, expected", [
    (_args(), 4, [Layout(4, 1)]),
    (_args(ring=2), 4, [Layout(2, 2)]),
    (_args(ulysses=2), 8, [Layout(2, 4)]),
    (_args(ulysses=1, ring=8), 8, [Layout(1, 8)]),
    (_args(layouts="4x1, 2x2,1X4"), 4, [Layout(4, 1), Layout(2, 2), Layout(1, 4)]),
])
def test_resolve_layouts(given, world, expected):
    assert parallel.resolve_layouts(given, world) == expected


@pytest.mark.parametrize("given, world, match", [
    (_args(ring=3), 4, "--ring 3 does not divide the 4 ranks"),
    (_args(ulysses=0), 4, "--ulysses 0"),
    (_args(ulysses=2, ring=1), 4, "layout 2x1 needs 2 ranks, this launch has 4"),
    (_args(layouts="2x2,4"), 4, "'4' is not ULYSSESxRING"),
    (_args(layouts="2x2,2x2"), 4, "names a layout twice"),
    (_args(), 1, "layout 1x1 is not context parallelism"),
])
def test_resolve_layouts_refuses(given, world, match):
    with pytest.raises(LayoutError, match=match):
        parallel.resolve_layouts(given, world)


def test_check_layout_names_heads_and_tokens():
    parallel.check_layout(Layout(4, 2), heads=40, tokens=75600)
    with pytest.raises(LayoutError, match="Ulysses degree 8 does not divide the model's 12 heads"):
        parallel.check_layout(Layout(8, 1), heads=12, tokens=32760)
    with pytest.raises(LayoutError, match="the 30 tokens do not split over 4 ranks"):
        parallel.check_layout(Layout(2, 2), heads=4, tokens=30)


def test_tolerance_is_the_ring_bound_once_keys_are_split():
    assert Layout(8, 1).tolerance("direct-p") == parallel.ULYSSES_TOLERANCE
    for layout in (Layout(1, 2), Layout(2, 2)):
        assert layout.tolerance("direct-p-fp4") == parallel.RING_TOLERANCE["direct-p-fp4"]


def test_cli_refuses_layouts_with_degrees(capsys):
    with pytest.raises(SystemExit):
        parallel.parse_args(["--layouts", "2x2", "--ring", "2"])
    assert "give it or --ulysses/--ring, not both" in capsys.readouterr().err
