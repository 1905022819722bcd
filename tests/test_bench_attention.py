"""The attention benchmark's table and shape selection (the timing itself needs a CUDA GPU)."""
import pytest

from wan_fp4.eval import bench_attention as B
from wan_fp4.eval.peers import PEER_LABELS


def test_table_states_ratios_against_fa4_and_the_cudnn_fp8_kernel():
    ours = "wan_fp4 direct-p [sm90-cute]"
    results = {"shapes": [
        {"shape": [1, 40, 7680, 128], "kernels": {ours: {"ms": 1.0, "tflops": 1000.0},
                                                   PEER_LABELS["fa4"]: {"ms": 1.5, "tflops": 666.0},
                                                   PEER_LABELS["cudnn-fp8-kernel"]: {"ms": 1.1, "tflops": 909.0}}},
        {"shape": [1, 40, 1024, 128], "kernels": {ours: {"ms": 0.2, "tflops": 42.0},
                                                   PEER_LABELS["fa4"]: {"error": "RuntimeError: boom"}}},
    ]}
    table = B.markdown_table(results).splitlines()
    assert table[0] == "| kernel | B1 H40 S7680 D128 | B1 H40 S1024 D128 |"
    row = next(line for line in table if line.startswith(f"| {ours} "))
    assert "1.00 ms, 1000 TFLOP/s, 1.50x FA4, 1.10x cuDNN FP8" in row
    assert "0.20 ms, 42 TFLOP/s |" in row  # no peer timed at that shape: no ratio
    assert any("n/a: RuntimeError: boom" in line for line in table)


def test_table_lists_a_kernel_that_ran_nowhere_once_under_it():
    ours, other = "wan_fp4 direct-p [sm90-cute]", "wan_fp4 direct-p [sm100-cute]"
    skip = {"skipped": "the sm100 FP4 kernel implements mode 'direct-p-fp4' only"}
    results = {"shapes": [{"shape": [1, 40, s, 128], "kernels": {ours: {"ms": 1.0, "tflops": 9.0}, other: skip}}
                          for s in (1024, 4096)]}
    table = B.markdown_table(results).splitlines()
    assert not any(line.startswith(f"| {other} ") for line in table)
    assert table.count(f"not run: {other}: {skip['skipped']}") == 1
    assert any(line.startswith(f"| {ours} ") for line in table)


def _spy_on_arguments(monkeypatch) -> dict:
    """main() stops right after parsing (no GPU); the returned dict gets the parsed arguments."""
    monkeypatch.setattr(B.torch.cuda, "is_available", lambda: False)
    seen = {}
    real = B.argparse.ArgumentParser.parse_args

    def spy(self, argv=None, namespace=None):
        seen["args"] = real(self, argv, namespace)
        return seen["args"]

    monkeypatch.setattr(B.argparse.ArgumentParser, "parse_args", spy)
    return seen


def test_length_sweep_replaces_the_shapes(monkeypatch, capsys):
    seen = _spy_on_arguments(monkeypatch)
    assert B.main(["--length-sweep"]) == 2
    assert seen["args"].shapes == [(1, 40, s, 128) for s in B.LENGTH_SWEEP]
    assert B.LENGTH_SWEEP[0] == 1024 and 7680 in B.LENGTH_SWEEP and B.LENGTH_SWEEP[-1] == 131072
    assert "needs a CUDA GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        B.main(["--shapes", "1x40x7680"])  # BxHxSxD


def test_sm90_configs_and_prebuilt_dir_are_parsed(monkeypatch, tmp_path):
    seen = _spy_on_arguments(monkeypatch)
    assert B.main(["--sm90-configs", '{"f16_bytes": true}', "--prebuilt-dir", str(tmp_path)]) == 2
    assert seen["args"].sm90_configs == [{"f16_bytes": True}] and seen["args"].prebuilt_dir == tmp_path
    with pytest.raises(SystemExit):
        B.main(["--sm90-configs", "[1]"])


def test_qk_gain_is_checked_and_named_in_the_table(monkeypatch):
    seen = _spy_on_arguments(monkeypatch)
    assert B.main(["--qk-gain", "2.449"]) == 2
    assert seen["args"].qk_gain == pytest.approx(2.449)
    for bad in ("0", "-1", "nan", "inf"):
        with pytest.raises(SystemExit):
            B.main(["--qk-gain", bad])
    results = {"shapes": [{"shape": [1, 12, 32760, 128], "qk_gain": 2.449,
                           "kernels": {"k": {"ms": 1.0, "tflops": 9.0}}},
                          {"shape": [1, 12, 32760, 128], "kernels": {"k": {"ms": 1.0, "tflops": 9.0}}}]}
    head = B.markdown_table(results).splitlines()[0]
    assert head == "| kernel | B1 H12 S32760 D128 (q, k x2.45) | B1 H12 S32760 D128 |"


def test_kernels_narrows_ours_to_the_named_ones(monkeypatch):
    seen = _spy_on_arguments(monkeypatch)
    assert B.main(["--kernels", "sm90-cute"]) == 2
    assert seen["args"].kernels == ["sm90-cute"]
    assert B.main([]) == 2
    assert seen["args"].kernels == B.OUR_KERNELS
    with pytest.raises(SystemExit):
        B.main(["--kernels", "no-such-kernel"])


def test_table_shows_a_calls_graph_spans_where_they_were_timed():
    ours = "wan_fp4 direct-p [sm90-cute]"
    results = {"shapes": [{"shape": [1, 40, 1024, 128], "kernels": {
        ours: {"ms": 0.3, "tflops": 70.0, "graph_us": {"replayed": 56.6, "inputs written": 52.9}},
        PEER_LABELS["sdpa-cudnn"]: {"ms": 0.05, "tflops": 460.0, "graph_us": {"error": "RuntimeError: no"}}}}]}
    table = B.markdown_table(results)
    assert "from a graph 56.6 us, 52.9 us with inputs written" in table
    assert table.count("from a graph") == 1  # a failed capture adds nothing to its cell


def test_graph_spans_is_parsed(monkeypatch):
    seen = _spy_on_arguments(monkeypatch)
    assert B.main(["--length-sweep", "--graph-spans"]) == 2
    assert seen["args"].graph_spans
    assert B.main(["--length-sweep"]) == 2
    assert not seen["args"].graph_spans


def test_each_timing_records_the_board_during_its_own_window():
    """timed: do_bench's median and power.clock_during over the host time do_bench took (a stand-in
    sampler holds samples before, inside and after it); no sampler, no clock."""
    import time as _time

    from wan_fp4.eval import bench_attention as B

    class Board:
        def between(self, t0, t1):
            return [s for s in self.samples if t0 <= s["t"] <= t1]

    board = Board()

    def do_bench(fn, warmup, rep, return_mode):
        now = _time.time()
        board.samples = [{"t": now - 5, "power_w": 100.0, "sm_mhz": 1980.0, "reasons": 0x1},
                         {"t": now, "power_w": 690.0, "sm_mhz": 1755.0, "reasons": 0x4},
                         {"t": now + 0.001, "power_w": 700.0, "sm_mhz": 1500.0, "reasons": 0x4},
                         {"t": now + 50, "power_w": 100.0, "sm_mhz": 345.0, "reasons": 0x1}]
        _time.sleep(0.01)
        assert (warmup, rep, return_mode) == (300, 123, "median")
        return 2.5

    ms, clock = B.timed(lambda: None, 123, do_bench, board)
    assert ms == 2.5
    assert clock["samples"] == 2 and clock["sm_mhz_min"] == 1500.0 and clock["reasons"] == "power cap (software)"
    assert B.timed(lambda: None, 123, do_bench, None) == (2.5, None)
