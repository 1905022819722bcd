"""The latency code path on CPU (wall-clock fallback) with the tiny-random model."""
import json

import pytest
import torch

from wan_fp4.eval import latency as L
from wan_fp4.eval import policies as P


def test_main_writes_json_and_table_with_skips(tmp_path, capsys):
    out = tmp_path / "lat.json"
    rc = L.main(["--model", "tiny-random", "--height", "32", "--width", "32", "--frames", "5", "--warmup", "0",
                 "--repeats", "1", "--modes", "bf16,direct-p,cudnn-fp8,bf16-fa4", "--policies",
                 "direct-p+bf16-first-last", "--steps", "10", "--json", str(out), "--no-progress"])
    assert rc == 0
    d = json.loads(out.read_text())
    assert d["smoke_test"] is True and "random weights" in d["label"]
    assert d["timing"].startswith("wall-clock")
    assert d["tokens"] == 8 and d["geometry"]["latent_shape"] == [1, 16, 2, 4, 4]
    assert set(d["variants"]) == {"bf16-sdpa", "direct-p", "policy:direct-p+bf16-first-last"}
    assert set(d["skipped"]) == {"cudnn-fp8", "bf16-fa4"}  # no CUDA here: skipped, with the reason
    assert all("CUDA" in why for why in d["skipped"].values())
    base = d["variants"]["bf16-sdpa"]
    assert base["speedup_vs_stock"] == 1.0
    per_kind = base["attention"]["per_kind"]
    assert per_kind["self"]["calls"] == 2 and per_kind["cross"]["calls"] == 2  # 2 blocks, one forward
    assert 0 < base["attention"]["share"] < 1
    assert any(k.startswith("direct-p /") for k in d["variants"]["direct-p"]["kernels"])
    (pol,) = d["policies"]
    assert pol["schedule_steps"] == 10 and pol["speedup_vs_stock"] > 0
    assert d["command"].startswith("python scripts/bench_e2e.py") and d["environment"]["device"] == "cpu"
    printed = capsys.readouterr().out
    assert printed.rstrip().splitlines()[-1].startswith("policy direct-p+bf16-first-last")  # table last
    assert "cudnn-fp8" in printed and "skipped" in printed


def test_budget_skips_slow_variants(tmp_path):
    out = tmp_path / "lat.json"
    L.main(["--model", "tiny-random", "--height", "32", "--width", "32", "--frames", "5", "--warmup", "0",
            "--repeats", "1", "--modes", "bf16-sdpa,direct-p", "--budget-s", "0", "--json", str(out),
            "--no-progress"])
    d = json.loads(out.read_text())
    assert "bf16-sdpa" in d["variants"]  # the baseline always runs
    assert "exceeds" in d["skipped"]["direct-p"]


@pytest.mark.parametrize("argv, message", [
    (["--modes", "bf16,nope"], "unknown variant"),
    (["--height", "30"], "multiple of 16"),
    (["--frames", "6"], "4k\\+1"),
    (["--policies", "nope"], "unknown policy"),
    (["--model", "/no/such/dir"], "--model"),
])
def test_bad_arguments_name_the_flag(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit):
        L.main(argv + ["--json", str(tmp_path / "x.json")])
    assert __import__("re").search(message, capsys.readouterr().err)


def test_policy_run_model():
    (pol,) = P.resolve(["direct-p+bf16-first2-last2"], 30)
    assert pol.bf16_step_count(50) == 4 and pol.bf16_step_count(3) == 3
    assert pol.run_ms(10, base_ms=100.0, policy_ms=50.0) == 2 * (4 * 100 + 6 * 50)
    (g,) = P.resolve(["direct-p-fp4+guard"], 40)
    assert g.enable_kwargs()["guard_layers"] == (33, 34, 38, 39) and g.enable_kwargs()["guard_margin"] == 112.0
    assert "bf16_steps" not in g.layer_kwargs()
    (g30,) = P.resolve(["direct-p-fp4+guard"], 30)
    assert g30.guard_layers == (27, 28, 29) and g30.guard_margin == 110.0
    with pytest.raises(ValueError, match="unknown policy"):
        P.resolve(["nope"], 30)


def test_cli_bench_e2e_runs_this_benchmark(monkeypatch, capsys):
    """`wan-fp4 bench e2e ARGS` hands ARGS to this module's parser (its own flags in the help)."""
    from wan_fp4 import cli

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the command refuses CPU-only hosts
    with pytest.raises(SystemExit) as done:
        cli.main(["bench", "e2e", "--help"])
    assert done.value.code == 0
    printed = capsys.readouterr().out
    assert "--budget-s" in printed and "--policies" in printed
