"""The full drift report end to end on the tiny-random model (CPU, 1-2 steps), through scripts/drift_report.py,
the thin entry point over `wan-fp4 drift`."""
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "drift_report.py"


def _load():
    spec = importlib.util.spec_from_file_location("drift_report", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_tiny_report_has_every_part_and_the_label(tmp_path):
    out = tmp_path / "rep"
    rc = _load().main(["--model", "tiny-random", "--height", "32", "--width", "32", "--frames", "5", "--steps", "1,2",
                       "--modes", "bf16,direct-p", "--policies", "direct-p+bf16-first-last", "--policy-steps", "3",
                       "--time-repeats", "1", "--capture-rows", "4", "--out", str(out)])
    assert rc == 0
    for f in ("drift.md", "drift.json", "drift.png", "trajectory.png", "layers.png", "frames.png", "policies.png"):
        assert (out / f).stat().st_size > 0, f
    d = json.loads((out / "drift.json").read_text())
    md = (out / "drift.md").read_text()
    assert d["smoke_test"] is True and "SMOKE TEST" in d["label"] and "SMOKE TEST" in md
    assert d["command"].startswith("wan-fp4 drift --model tiny-random") and d["environment"]["device"] == "cpu"
    runs = {(r["steps"], r["mode"]): r for r in d["runs"]}
    assert set(runs) == {(1, "bf16"), (1, "direct-p"), (2, "bf16"), (2, "direct-p")}
    assert runs[(2, "bf16")]["rel_l2"] == 0.0  # our bf16 processor reproduces stock exactly
    assert runs[(2, "direct-p")]["rel_l2"] > 0
    assert len(runs[(2, "direct-p")]["trajectory"]) == 2
    assert {(e["mode"], e["step"]) for e in d["layer_errors"]} == {(m, s) for m in ("bf16", "direct-p") for s in (0, 1)}
    (fr,) = [f for f in d["frames"] if f["mode"] == "direct-p"]
    assert fr["steps"] == 2 and 0 < fr["ssim"] < 1 and len(fr["ssim_per_frame"]) == 5
    (pol,) = d["policies"]
    assert pol["policy"] == "direct-p+bf16-first-last" and pol["speedup_vs_stock"] > 0 and pol["rel_l2"] > 0
    assert "mode:direct-p" in d["speed"]["policies"]
    # CPU timings are measured (the code path runs) but marked and not shown as speed figures
    assert d["timings_meaningful"] is False and "Times are left out" in md
    assert f"| {pol['policy']} | n/a | n/a |" in md
    for section in ("## Per-step trajectory", "## Per-layer attention-output error", "## Decoded frames",
                    "## Speed and drift per policy"):
        assert section in md, section
    assert d["accuracy"] is None and "## Prompt accuracy" not in md  # off by default on a random model


def test_bad_arguments_name_the_flag(tmp_path, capsys):
    mod = _load()
    with pytest.raises(SystemExit):
        mod.main(["--model", "tiny-random", "--steps", "0", "--out", str(tmp_path)])
    assert "--steps" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mod.main(["--model", "tiny-random", "--modes", "fp16", "--out", str(tmp_path)])
    assert "--modes" in capsys.readouterr().err
