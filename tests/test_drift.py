"""`wan-fp4 drift`: the metrics, the settings, the run protocol and the report files."""
import json
import math

import numpy as np
import pytest
import torch

from wan_fp4 import cli
from wan_fp4.eval import report as R
from wan_fp4.eval.drift import DriftConfig, accuracy_prompts
from wan_fp4.eval.metrics import compare
from wan_fp4.modes import MODES


def test_compare_against_float64_numpy():
    g = torch.Generator().manual_seed(np.random.SeedSequence().entropy % 2**32)
    ref = torch.randn(1, 16, 3, 4, 6, generator=g)
    x = ref + 0.1 * torch.randn(ref.shape, generator=g)
    m = compare(x.to(torch.bfloat16), ref)
    a, b = x.to(torch.bfloat16).double().numpy().ravel(), ref.double().numpy().ravel()
    assert m["cosine"] == pytest.approx(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)), rel=1e-12)
    assert m["rel_l2"] == pytest.approx(np.linalg.norm(a - b) / np.linalg.norm(b), rel=1e-12)
    assert m["max_abs"] == pytest.approx(np.abs(a - b).max(), rel=1e-12)


def test_compare_closed_forms():
    ref = torch.randn(2, 5, 7, dtype=torch.float64)  # float64 so 3 * ref is exact to an ulp
    assert compare(ref, ref) == {"cosine": 1.0, "rel_l2": 0.0, "max_abs": 0.0, "finite": True}
    scaled = compare(3 * ref, ref)  # same direction, twice the reference away
    assert scaled["cosine"] == pytest.approx(1.0, abs=1e-12) and scaled["rel_l2"] == pytest.approx(2.0, rel=1e-12)
    flipped = compare(-ref, ref)
    assert flipped["cosine"] == pytest.approx(-1.0, abs=1e-12) and flipped["rel_l2"] == pytest.approx(2.0, rel=1e-12)
    e0, e1 = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    assert compare(e0, e1)["cosine"] == 0.0 and compare(e0, e1)["rel_l2"] == pytest.approx(2 ** 0.5)
    with pytest.raises(ValueError, match="shapes differ"):
        compare(ref, ref[0])
    with pytest.raises(ValueError, match="all zeros"):
        compare(ref, torch.zeros_like(ref))


@pytest.mark.parametrize("kwargs,message", [
    ({"modes": ("bf16", "int4")}, "mode must be one of"),
    ({"modes": ()}, "at least one mode"),
    ({"modes": ("fp8", "fp8")}, "duplicates"),
    ({"steps": (1, 0)}, "positive integers"),
    ({"height": 100}, "height must be a positive multiple of 16"),
    ({"frames": 16}, r"frames must be 4k\+1"),
    ({"steps": (4, 4)}, "steps has duplicates"),
    ({"policies": ("direct-p", "fastest")}, "unknown \\['fastest'\\]"),
    ({"policy_steps": 0}, "policy_steps must be positive"),
    ({"time_repeats": -1}, "time_repeats must be >= 0"),
    ({"steps": (1, 4), "capture_steps": ("first", 4)}, "capture_steps: 4 is neither"),
    ({"capture_kinds": ("joint",)}, "capture_kinds must be drawn from"),
    ({"capture_rows": 0}, "capture_rows and capture_gib must be positive"),
    ({"steps": (1, 4), "decode_steps": (2,)}, r"decode_steps \[2\] must be among steps \[1, 4\]"),
    ({"accuracy_prompts": 0}, "accuracy_prompts must be positive"),
    ({"accuracy_seeds": ()}, "accuracy_seeds must name at least one seed"),
    ({"peers": ("cudnn-fp8", "fa5")}, r"peers: unknown \['fa5'\]"),
    ({"peers": ("cudnn-fp8-kernel",)}, "peers: unknown"),  # returns FP8 codes: timing only
    ({"peers": ("cudnn-fp8", "cudnn-fp8")}, "peers has duplicates"),
])
def test_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DriftConfig(**kwargs)


def test_config_capture_steps_resolve_against_the_longest_run():
    cfg = DriftConfig(steps=(1, 4, 20), capture_steps=("first", "last", 5, -2))
    assert cfg.capture_step_indices() == [0, 5, 18, 19]
    assert cfg.decode == {20} and cfg.policy_step_count == 20
    assert DriftConfig(decode_steps=(), policy_steps=3).decode == set()


def test_drift_cli_on_tiny_writes_consistent_report(tmp_path, capsys):
    out = tmp_path / "report"
    # only the latent part: each other part is switched off by its flag
    argv = ["drift", "--model", "tiny-random", "--modes", ",".join(MODES), "--steps", "1,3", "--height", "32",
            "--width", "32", "--frames", "5", "--policies", "none", "--capture-steps", "none",
            "--decode-steps", "none", "--time-repeats", "0", "--out", str(out)]
    assert cli.main(argv) == 0
    assert "SMOKE TEST" in capsys.readouterr().out
    data = json.loads((out / "drift.json").read_text())
    md = (out / "drift.md").read_text()
    png = (out / "drift.png").read_bytes()

    assert data["smoke_test"] is True and "NOT A QUALITY FIGURE" in data["label"]
    assert data["label"] in md
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    assert data["command"] == "wan-fp4 " + " ".join(argv)
    env = data["environment"]
    assert env["device"] == "cpu" and env["torch_build"] == torch.__version__
    # CPU run times are noise (the reference emulation, the machine's load): marked and left out
    assert data["timings_meaningful"] is False
    assert "time (s)" not in md and "Times are left out" in md
    assert data["policies"] == [] and data["layer_errors"] == [] and data["frames"] == []
    assert data["speed"] is None and data["accuracy"] is None
    for section in ("Per-layer", "Decoded frames", "Speed and drift", "Prompt accuracy"):
        assert section not in md
    assert sorted(p.name for p in out.iterdir()) == ["drift.json", "drift.md", "drift.png", "trajectory.png"]
    # the default peer cannot run on a CPU: skipped, and the report says why
    assert data["peers"] == {"run": {}, "skipped": {"cudnn-fp8": "needs a CUDA GPU; this run is on cpu"},
                             "kinds": ["self"]}
    assert "- peers skipped: cudnn-fp8 (needs a CUDA GPU; this run is on cpu)" in md
    assert not any(r["mode"].startswith("peer:") for r in data["runs"])
    assert env["diffusers"].startswith("0.42")
    s = data["settings"]
    assert (s["height"], s["width"], s["frames"], s["seed"]) == (32, 32, 5, 20260805)
    assert s["tokens"] == 2 * 2 * 2  # latent (2, 4, 4) frames x rows x cols, patch (1, 2, 2)

    runs = {(r["steps"], r["mode"]): r for r in data["runs"]}
    assert set(runs) == {(n, m) for n in (1, 3) for m in MODES}
    for (steps, mode), r in runs.items():
        assert len(r["trajectory"]) == steps
        assert r["trajectory"][-1]["rel_l2"] == pytest.approx(r["rel_l2"], rel=1e-12)
        assert f"| {steps} | {mode} |" in md
        if mode == "bf16":  # our processor in bf16 is the stock one: exactly the control
            assert r["cosine"] == 1.0 and r["rel_l2"] == 0.0 and r["max_abs"] == 0.0
            assert all(k.startswith("bf16 / ") for k in r["kernels"])
        else:  # a low-precision mode really ran, moved the latent a little, and stayed finite
            assert 0.0 < r["rel_l2"] < 1.0 and 0.0 < r["cosine"] < 1.0
            assert r["kernels"].get(f"{mode} / reference", 0) > 0
            # Geometry: the angle to the control has sin <= rel_l2, so 1 - cos <= rel_l2^2.
            assert 1 - r["cosine"] <= r["rel_l2"] ** 2


def test_drift_cli_rejects_bad_lists(tmp_path, capsys):
    # each error names the flag and the offending text, not a tuple repr
    for argv, message in ((["--modes", "bf16,int4"], "argument --modes: unknown mode 'int4'"),
                          (["--modes", "fp8,fp8"], "argument --modes: mode 'fp8' is listed twice"),
                          (["--steps", "1,x"], "argument --steps: expected comma-separated positive integers, got '1,x'"),
                          (["--steps", "4,0"], "argument --steps: expected comma-separated positive integers, got '4,0'"),
                          (["--steps", ","], "argument --steps: expected a comma-separated list")):
        with pytest.raises(SystemExit) as exc:
            cli.main(["drift", *argv, "--out", str(tmp_path / "r")])
        assert exc.value.code == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_report_writes_nonfinite_as_null(tmp_path):
    run = {"steps": 1, "mode": "direct-p-fp4", "cosine": float("nan"), "rel_l2": float("inf"),
           "max_abs": float("nan"), "seconds": 0.1, "kernels": {}, "trajectory": []}
    report = {"smoke_test": False, "label": "", "model": {"name": "m", "description": "d", "synthetic": False},
              "reference": "control", "runs": [run], "command": "wan-fp4 drift", "created": R.timestamp(),
              "environment": R.environment("cpu"),
              "settings": {"prompt": "p", "negative_prompt": "", "seed": 0, "guidance": 5.0, "height": 16,
                           "width": 16, "frames": 1, "tokens": 1, "sampler": "s", "dtype": "bfloat16",
                           "cross_attention": False}}
    paths = R.write_drift_report(report, tmp_path)
    data = json.loads(paths["json"].read_text())
    assert data["runs"][0]["cosine"] is None and data["runs"][0]["rel_l2"] is None
    md = paths["md"].read_text()
    assert "**nan**" in md and "SMOKE" not in md  # a real model gets no smoke banner
    report["environment"] = {**report["environment"], "device": "cuda:0"}  # GPU times are kept
    assert "| time (s) |" in R.drift_markdown(report) and "| 0.10 |" in R.drift_markdown(report)


def test_prompt_accuracy_section_on_tiny(tmp_path, capsys):
    # Plumbing only: tiny-random has random weights, so the accuracies themselves are noise.
    out = tmp_path / "acc"
    argv = ["drift", "--model", "tiny-random", "--steps", "1", "--height", "32", "--width", "32", "--frames", "5",
            "--policies", "none", "--capture-steps", "none", "--decode-steps", "none", "--time-repeats", "0",
            "--accuracy", "on", "--accuracy-prompts", "2", "--accuracy-seeds", "0", "--out", str(out)]
    assert cli.main(argv) == 0
    said = capsys.readouterr().out
    # the plan and the accuracy estimate come before the runs and the videos, not after
    assert "drift plan: the control and 4 arm(s)" in said and "prompt accuracy: 8 videos of 1 steps" in said
    assert said.index("drift plan") < said.index("at the drift runs' pace here") < said.index("wrote ")
    acc = json.loads((out / "drift.json").read_text())["accuracy"]
    md = (out / "drift.md").read_text()
    assert (acc["prompts"], acc["seeds"], acc["steps"]) == (2, [0], 1)
    assert list(acc["modes"]) == list(MODES)
    for mode in MODES:
        assert set(acc["modes"][mode]) == {"colour", "shape", "direction", "all"}
        assert all(0.0 <= v <= 1.0 for v in acc["modes"][mode].values())
        assert [r["prompt"] for r in acc["videos"][mode]] == accuracy_prompts(2)
        assert f"| {mode} |" in md.split("## Prompt accuracy")[1]
    assert "only meaningful on the embedded trained model" in md and "noise" in acc["note"]
    # every other arm's videos are compared with bf16's of the same prompt and seed
    assert set(acc["frames_vs_bf16"]) == set(MODES) - {"bf16"}
    for mode, spread in acc["frames_vs_bf16"].items():
        per_video = sorted(r["psnr_vs_bf16"] for r in acc["videos"][mode])
        assert spread["videos"] == 2 and spread["min_db"] == per_video[0]
        assert spread["p25_db"] <= spread["median_db"] <= spread["p75_db"]
    assert "Frames vs bf16" in md


def test_psnr_spread_orders_identical_videos_last():
    from wan_fp4.eval.drift import psnr_spread

    assert psnr_spread([]) is None
    s = psnr_spread([math.inf, 20.0, math.inf, 30.0, 25.0])
    assert (s["videos"], s["identical"], s["min_db"]) == (5, 2, 20.0)
    assert (s["p25_db"], s["median_db"], s["p75_db"]) == (25.0, 30.0, math.inf)


def test_accuracy_prompts_spread_over_the_world():
    from wan_fp4.pipelines import world

    everything = world.prompt_set()
    assert accuracy_prompts() == everything and accuracy_prompts(100) == everything
    four = accuracy_prompts(4)
    assert len(four) == 4 and len({world.parse_prompt(p)["colour"] for p in four}) == 4


def test_accuracy_defaults_on_only_for_the_trained_model(tmp_path, monkeypatch):
    from wan_fp4.pipelines import trained

    weights = tmp_path / "weights"
    monkeypatch.setattr(trained, "WEIGHTS_DIR", weights)
    # weights not shipped: no error, just off
    assert trained.is_trained_model(str(weights)) is False and trained.is_trained_model("tiny") is False
    weights.mkdir()
    (weights / "model_index.json").write_text("{}")
    assert trained.is_trained_model(str(weights)) is True and trained.is_trained_model("tiny") is True
    assert trained.is_trained_model(str(tmp_path)) is False and trained.is_trained_model("tiny-random") is False


def test_stacks_run_as_arms_and_leave_the_weights_as_they_were(tmp_path, monkeypatch):
    # float8 linears need an sm89+ GPU; a stand-in stack that scales the block linears' weights
    # stands for it, so this checks the plumbing: every part runs the stack, and undoes it.
    from wan_fp4.eval import stacks as S

    entered = []

    class Scaled:
        def __init__(self, transformer, linears):
            self.targets = [m for _, m in S.float8_targets(transformer)] or [
                m for m in transformer.blocks.modules() if isinstance(m, torch.nn.Linear)]

        def __enter__(self):
            entered.append(len(self.targets))
            self.saved = [m.weight for m in self.targets]
            for m in self.targets:
                m.weight = torch.nn.Parameter(m.weight.detach() * 1.05)

        def __exit__(self, *exc):
            for m, w in zip(self.targets, self.saved):
                m.weight = w
            return False

    monkeypatch.setattr(S, "Linears", Scaled)
    monkeypatch.setattr(S, "check_available", lambda linears, device: None)
    out = tmp_path / "stacks"
    argv = ["drift", "--model", "tiny-random", "--steps", "1,2", "--height", "32", "--width", "32", "--frames", "5",
            "--modes", "bf16,direct-p", "--stacks", "float8-linears,direct-p+float8-linears", "--peers", "none",
            "--policies", "none", "--capture-steps", "none", "--time-repeats", "0",
            "--accuracy", "on", "--accuracy-prompts", "2", "--accuracy-seeds", "0", "--out", str(out)]
    assert cli.main(argv) == 0
    data = json.loads((out / "drift.json").read_text())
    runs = {(r["mode"], r["steps"]): r for r in data["runs"]}
    for stack in ("float8-linears", "direct-p+float8-linears"):
        assert runs[(stack, 2)]["rel_l2"] > 0  # the scaled weights moved the latent
        assert stack in data["accuracy"]["modes"] and stack in data["accuracy"]["frames_vs_bf16"]
    # stock attention under the stack, direct-p under the other
    assert "direct-p" not in json.dumps(runs[("float8-linears", 2)]["kernels"])
    assert "direct-p" in json.dumps(runs[("direct-p+float8-linears", 2)]["kernels"])
    assert len(entered) == 2 * 2 + 2  # two step counts and the accuracy videos, per stack
    # the arms after the stacks and the controls saw the original weights: bf16 is still exact
    assert runs[("bf16", 2)]["rel_l2"] == 0


def test_stacks_must_be_known_and_run_here():
    with pytest.raises(ValueError, match="stacks: unknown"):
        DriftConfig(stacks=("int4-linears",))
    with pytest.raises(ValueError, match="stacks has duplicates"):
        DriftConfig(stacks=("float8-linears", "float8-linears"))
    from wan_fp4.eval.drift import StackUnavailable, check_stacks

    with pytest.raises(StackUnavailable, match="CUDA GPU"):
        check_stacks(("direct-p+float8-linears",), "cpu")


def test_plan_is_said_up_front_and_counts_denoising_steps():
    from wan_fp4.eval.drift import describe_plan, drift_work

    # the bar counts steps: 3 step counts x (control + 4 arms), then 4 policies at 20 steps
    assert drift_work(DriftConfig(), 4, 4) == (19, (1 + 4 + 20) * 5 + 4 * 20)
    # policies at a step count no mode ran get a control run of their own
    assert drift_work(DriftConfig(steps=(1, 4), policy_steps=8), 2, 1) == (2 * 3 + 2, 5 * 3 + 2 * 8)
    cfg = DriftConfig(steps=(4,), accuracy=True, accuracy_prompts=4)
    text = describe_plan(cfg, ["bf16", "fp8"], ["direct-p+bf16-first-last"], ([0, 3], [0, 1]))
    assert "bf16, fp8" in text and "4 runs, 16 denoising steps" in text
    assert "captured at steps [0, 3] of layers [0, 1]" in text and "timing" in text
    assert "prompt accuracy: 16 videos of 4 steps (2 arms x 4 prompts x 2 seeds)" in text
    quiet = describe_plan(DriftConfig(modes=("bf16",), steps=(2,), time_repeats=0), ["bf16"], [])
    assert quiet.count("\n") == 0 and "policies" not in quiet


def _policy_report(device):
    report = {"smoke_test": False, "label": "", "model": {"name": "m", "description": "d", "synthetic": False},
              "reference": "control", "command": "wan-fp4 drift", "created": R.timestamp(),
              "environment": {**R.environment("cpu"), "device": device},
              "settings": {"prompt": "p", "negative_prompt": "", "seed": 0, "guidance": 5.0, "height": 16,
                           "width": 16, "frames": 2, "tokens": 1, "sampler": "s", "dtype": "bfloat16",
                           "cross_attention": False, "steps": [4], "policy_steps": 4},
              "runs": [{"steps": 4, "mode": m, "cosine": 1.0 - e, "rel_l2": e, "max_abs": e, "seconds": 1.0,
                        "kernels": {}, "trajectory": [{"step": i + 1, "rel_l2": e * i} for i in range(4)]}
                       for m, e in (("bf16", 0.0), ("fp8", 0.01))],
              "frames": [{"steps": 4, "mode": m, "psnr_db": p, "ssim": 1.0, "psnr_db_per_frame": [p, p],
                          "ssim_per_frame": [1.0, 0.9]} for m, p in (("bf16", math.inf), ("fp8", 31.0))],
              "speed": {"timing": "wall", "stock_forward_ms": 2.0, "stock_attention_share": 0.5, "policies": {}},
              "mode_speed": [{"policy": "mode:fp8", "steps": 4, "rel_l2": 0.01, "cosine": 0.99,
                              "forward_ms": 1.0, "speedup_vs_stock": 1.5}],
              "policies": [{"policy": "direct-p+bf16-first2-last2", "description": "direct-p; first 2 and last 2 "
                            "steps in BF16", "mode": "direct-p", "steps": 4, "cosine": 1.0, "rel_l2": 0.0,
                            "kernels": {"bf16 / diffusers:native": 96}, "trajectory": [],
                            "forward_ms": 1.0, "speedup_vs_stock": 1.0}]}
    return report


def test_policy_names_are_explained_and_cpu_plot_has_no_speed_axis(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(R, "_drift_bars", lambda plt, rows, path, **kw: drawn.append(path) or path)
    paths = R.write_drift_report(_policy_report("cpu"), tmp_path / "cpu")
    md = paths["md"].read_text()
    # the name alone does not say what runs; an all-BF16 policy's drift 0 says why
    assert ("- `direct-p+bf16-first2-last2`: direct-p; first 2 and last 2 steps in BF16 (at 4 steps every step "
            "is BF16)") in md
    # on a CPU the times are the emulation's: the plot shows drift alone, as the table does
    assert drawn == [paths["policies.png"]] and "![drift per policy](policies.png)" in md
    drawn.clear()
    paths = R.write_drift_report(_policy_report("cuda:0"), tmp_path / "gpu")
    assert drawn == [] and paths["policies.png"].stat().st_size > 0
    assert "![speed vs drift](policies.png)" in paths["md"].read_text()


def test_plots_keep_zeros_and_identical_frames_on_a_readable_axis(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    R._zero_based_log(ax, [0.0, 3e-4, 0.02, float("nan"), None])
    # linear only below the smallest nonzero value's decade: zeros sit at 0, not at a made-up 1e-12
    assert ax.get_yscale() == "symlog" and ax.yaxis.get_transform().linthresh == 1e-4 and ax.get_ylim()[0] == 0
    plt.close(fig)
    report = _policy_report("cpu")
    report["frames"].append({**report["frames"][1], "mode": "direct-p"})
    assert R.trajectory_plot(report, tmp_path / "t.png").stat().st_size > 0
    assert R.frames_plot(report, tmp_path / "f.png").stat().st_size > 0  # inf PSNR drawn, not a crash
    assert R.drift_plot(report, tmp_path / "d.png").stat().st_size > 0
