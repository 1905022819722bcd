"""wan_fp4.eval.power on the CPU: nvidia-smi's samples parsed and summarised, the table, and the
refusals (the sampling itself needs a GPU: BENCHMARKS.md has its runs)."""
import pytest

from wan_fp4.eval import power

SMI = """2026/12/01 05:40:00.000, 120.5, 1980, 0x0000000000000001
2026/12/01 05:40:00.050, 650.1, 1755, 0x0000000000000004
2026/12/01 05:40:00.100, [N/A], 1755, 0x0000000000000004
2026/12/01 05:40:00.150, 690.0, 1605, 0x0000000000000004
2026/12/01 05:40:00.200, 700.2, 1590, 0x000000000000000C
2026/12/01 05:40:00.250, 699.8
"""


def test_samples_parse_and_drop_what_nvidia_smi_could_not_fill():
    s = power.parse_samples(SMI)
    assert [x["power_w"] for x in s] == [120.5, 650.1, 690.0, 700.2]
    assert [round(x["t"] - s[0]["t"], 3) for x in s] == [0.0, 0.05, 0.15, 0.2]
    assert [x["sm_mhz"] for x in s] == [1980, 1755, 1605, 1590]
    assert [x["reasons"] for x in s] == [0x1, 0x4, 0x4, 0xC]


def test_summary_skips_the_ramp_and_takes_medians_and_every_reason_seen():
    s = power.parse_samples(SMI)
    got = power.summarise(s, skip=0.25)  # drops the idle first sample
    assert got["samples"] == 3
    assert got["power_w"] == 690.0 and got["sm_mhz"] == 1605
    assert got["reasons_mask"] == 0xC
    assert got["reasons"] == "power cap (software), hardware slowdown"
    assert power.summarise(s, skip=0.0)["reasons_mask"] == 0xD
    with pytest.raises(RuntimeError, match="no samples"):
        power.summarise([])


def test_reason_names():
    assert power.reasons_text(0) == "none"
    assert power.reasons_text(0x4) == "power cap (software)"
    assert power.reasons_text(0x40 | 0x20) == "thermal (software), thermal (hardware)"


def test_table_shows_rate_power_clock_and_work_per_joule():
    rows = {"a": {"tflops": 1100.0, "power_w": 690.0, "sm_mhz": 1605.0, "tflop_per_joule": 1100 / 690,
                  "reasons": "power cap (software)"},
            "b": {"error": "RuntimeError: boom"}}
    text = power.table({"name": "GPU", "power_limit_w": 700.0, "max_sm_mhz": 1980.0}, rows)
    assert "power limit 700 W" in text and "highest SM clock 1980 MHz" in text
    assert "| a | 1100 | 690 | 1605 | 1.59 | power cap (software) |" in text
    assert "| b | failed: RuntimeError: boom |" in text


def test_main_refuses_without_a_gpu_and_names_a_bad_argument(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert power.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        power.main(["--seconds", "0"])
    assert "--seconds must be positive" in capsys.readouterr().err


def test_one_sampler_serves_every_workload_by_its_time_window():
    """The sampler runs one process for the whole run; each workload takes the samples of its
    window (a stand-in for nvidia-smi prints the board at 20 ms intervals, power rising)."""
    import sys
    import time

    fake = ("import time, datetime\n"
            "for i in range(100):\n"
            "    t = datetime.datetime.now().strftime('%Y/%m/%d %H:%M:%S.%f')[:-3]\n"
            "    print(f'{t}, {100 + i}, 1500, 0x4', flush=True)\n"
            "    time.sleep(0.02)\n")
    sampler = power.Sampler()
    sampler.cmd = [sys.executable, "-c", fake]
    with sampler:
        time.sleep(0.5)
        t0 = time.time()
        time.sleep(0.6)
        t1 = time.time()
        time.sleep(0.3)
        first = sampler.between(t0, t1)
        later = sampler.between(t1, time.time())
    assert 15 <= len(first) <= 35 and later
    assert all(t0 <= s["t"] <= t1 for s in first)
    assert max(s["power_w"] for s in first) < min(s["power_w"] for s in later)
    assert power.summarise(first)["reasons"] == "power cap (software)"


def test_sm90_variants_are_taken_beside_the_defaults_and_a_bad_one_is_named(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert power.main(["--sm90-configs", '{"cluster": 2}', "--prebuilt-dir", "somewhere"]) == 2
    with pytest.raises(SystemExit):
        power.main(["--sm90-configs", "[1]"])
    assert "--sm90-configs takes JSON objects, got [1]" in capsys.readouterr().err


def _fake_board(mhz_of_i: str) -> list:
    """A stand-in for nvidia-smi's sampling: 150 lines at 20 ms intervals, the SM clock by line i."""
    import sys

    fake = ("import time, datetime\n"
            "for i in range(150):\n"
            "    t = datetime.datetime.now().strftime('%Y/%m/%d %H:%M:%S.%f')[:-3]\n"
            f"    print(f'{{t}}, 600, {{{mhz_of_i}}}, 0x4', flush=True)\n"
            "    time.sleep(0.02)\n")
    return [sys.executable, "-c", fake]


def test_a_timing_takes_the_clock_of_its_own_window():
    """clock_during: the median and lowest SM clock of the samples inside the window, which a
    clock falling later in the run does not reach; a window with no samples gives None."""
    import time

    sampler = power.Sampler()
    sampler.cmd = _fake_board("1980 if i < 40 else 1200")
    with sampler:
        deadline = time.time() + 30
        while not sampler.lines and time.time() < deadline:  # the stand-in's start (slow on a busy machine)
            time.sleep(0.01)
        t0 = time.time()
        time.sleep(0.3)
        t1 = time.time()
        steady = power.clock_during(sampler, t0, t1)
        sampler.proc.wait(timeout=60)  # all 150 lines out: the clock fell from line 40 on
        sampler.reader.join(timeout=30)
        slow = power.clock_during(sampler, t1, time.time())
        assert power.clock_during(sampler, t0 - 100, t0 - 99) is None
    assert steady["sm_mhz"] == steady["sm_mhz_min"] == 1980 and steady["power_w"] == 600
    assert slow["sm_mhz_min"] == 1200
    assert steady["reasons"] == "power cap (software)"
    text = power.clock_text(slow)
    assert "lowest 1200" in text and "power cap (software)" in text
    assert power.clock_text(None) == ""
    assert power.clock_during(None, t0, t1) is None


def test_no_sampler_without_nvidia_smi(monkeypatch):
    monkeypatch.setattr(power.shutil, "which", lambda name: None)
    assert power.board_sampler() is None
    monkeypatch.setattr(power.shutil, "which", lambda name: "/usr/bin/" + name)
    assert isinstance(power.board_sampler(), power.Sampler)
