"""`wan-fp4` command line: generate writes a readable mp4, bad arguments give clear errors."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from wan_fp4 import cli
from wan_fp4.pipelines import DEFAULTS_FILE, build_tiny_pipeline, read_video, write_defaults

SMALL = ["--height", "32", "--width", "48", "--frames", "9", "--steps", "2"]
RANDOM = ["--model", "tiny-random"]  # random weights: built in a second, no shipped weights needed


def _usage_error(capsys, argv):
    """Run the CLI expecting an argparse usage error; return its stderr."""
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("mode", ["bf16", "direct-p"])
def test_generate_writes_mp4_in_process(tmp_path, capsys, mode):
    out = tmp_path / "video.mp4"
    assert cli.main(["generate", "--prompt", "a cat dances", "--attention", mode, "--out", str(out), *RANDOM,
                     *SMALL]) == 0
    frames = read_video(out)
    assert frames.shape == (9, 32, 48, 3)
    assert frames.std() > 0  # not a blank video
    captured = capsys.readouterr()
    printed = captured.out
    assert f"mode {mode} ran on kernel" in printed
    assert "smoke model, not a video model" in printed
    assert "resolved: 32x48, 9 frames, 2 steps; height, width, frames, steps from flags" in printed
    assert "VAE decode" in captured.err  # the decode has its own progress bar
    # cross-attention stays bf16 by default: its calls say so
    assert "cross-attention in mode bf16 ran on kernel diffusers:native" in printed
    if mode == "direct-p":  # CPU: low-precision self-attention runs the reference
        assert "self-attention in mode direct-p ran on kernel reference" in printed


def test_generate_on_the_trained_model_reads_its_video_back(tmp_path, capsys):
    # the README's first command, in process: the default model and mode, the model's geometry
    assert cli.main(["generate", "--prompt", "a red ball moving right", "--out", str(tmp_path / "v.mp4")]) == 0
    printed = capsys.readouterr().out
    assert "read back: red ball moving right (matches the prompt)" in printed
    assert "smoke model" not in printed
    assert cli.main(["generate", "--prompt", "a red car at sunset", "--out", str(tmp_path / "w.mp4"), *SMALL]) == 0
    printed = capsys.readouterr().out
    assert "names no shape" in printed and "knows only the prompts of the world" in printed
    assert "read back" not in printed


def test_generate_console_script(tmp_path):
    exe = shutil.which("wan-fp4")
    if exe is None:
        pytest.skip("the wan-fp4 console script is not installed (pip install -e .)")
    out = tmp_path / "script.mp4"
    # this checkout's package, whichever tree the script was installed from
    path = [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join(filter(None, path)))
    proc = subprocess.run([exe, "generate", *RANDOM, "--prompt", "a red car", "--attention", "direct-p",
                           "--out", str(out), "--height", "48", "--width", "32", "--frames", "5", "--steps", "2",
                           "--fps", "4"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_video(out).shape == (5, 48, 32, 3)
    assert "wrote" in proc.stdout and "smoke model" in proc.stdout
    assert "it/s" in proc.stderr or "s/it" in proc.stderr  # the progress bar


def test_generate_from_local_directory(tmp_path, capsys):
    model = tmp_path / "model"
    build_tiny_pipeline(dtype=torch.bfloat16).save_pretrained(model)
    out = tmp_path / "local.mp4"
    assert cli.main(["generate", "--prompt", "a dog", "--model", str(model), "--attention", "bf16",
                     "--out", str(out), *SMALL]) == 0
    assert read_video(out).shape == (9, 32, 48, 3)
    printed = capsys.readouterr().out
    assert "local diffusers Wan pipeline" in printed and "smoke model" not in printed


def test_local_directory_defaults_come_from_the_model_or_are_named(tmp_path, capsys, monkeypatch):
    # A saved tiny pipeline used to get 480x832, 81 frames and 50 steps without a word.
    model = tmp_path / "model"
    build_tiny_pipeline(dtype=torch.bfloat16).save_pretrained(model)
    monkeypatch.setattr(cli, "_device", lambda *a: pytest.skip("stop before loading"))
    with pytest.raises(pytest.skip.Exception):
        cli.main(["generate", "--prompt", "a dog", "--model", str(model), "--out", str(tmp_path / "v.mp4")])
    printed = capsys.readouterr().out
    assert "resolved: 480x832, 81 frames, 50 steps; height, width, frames, steps from real Wan2.1 defaults" in printed
    assert f"has no {DEFAULTS_FILE}" in printed
    write_defaults(model, height=32, width=48, frames=5, steps=2)
    with pytest.raises(pytest.skip.Exception):
        cli.main(["generate", "--prompt", "a dog", "--model", str(model), "--steps", "3", "--out", str(tmp_path / "v.mp4")])
    printed = capsys.readouterr().out
    assert f"resolved: 32x48, 5 frames, 3 steps; height, width, frames from {model / DEFAULTS_FILE}; steps from flags" \
        in printed
    (model / DEFAULTS_FILE).write_text('{"height": 40}')
    err = _usage_error(capsys, ["generate", "--prompt", "x", "--model", str(model), "--out", str(tmp_path / "v.mp4")])
    assert "--model" in err and DEFAULTS_FILE in err and "height must be a positive multiple of 16" in err


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_generate_rejects_bad_guidance(tmp_path, capsys, value):
    err = _usage_error(capsys, ["generate", "--prompt", "x", "--guidance", value, "--out", str(tmp_path / "v.mp4")])
    assert "--guidance" in err and value in err


NO_HEAVY_IMPORTS = r"""
import sys
from wan_fp4 import cli
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
print("heavy:", sorted(m for m in ("torch", "diffusers", "transformers") if m in sys.modules))
"""


@pytest.mark.parametrize("argv", [["--help"], ["generate", "--help"], ["drift", "--steps", "0", "--out", "d"],
                                  ["generate", "--prompt", "x", "--guidance", "-1", "--out", "v.mp4"],
                                  ["generate", "--prompt", "x", "--height", "40", "--out", "v.mp4"],
                                  ["generate", "--prompt", "x", "--attention", "int4", "--out", "v.mp4"],
                                  ["check", "--help"], ["check", "--kernels", "sm90-cute,nope"]])
def test_help_and_argument_errors_import_nothing_heavy(argv):
    # They took 5-10 s, all of it importing torch and diffusers.
    proc = subprocess.run([sys.executable, "-c", NO_HEAVY_IMPORTS, *argv], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[1])
    assert proc.stdout.strip().endswith("heavy: []"), proc.stdout + proc.stderr


def test_generate_bad_model_path(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    err = _usage_error(capsys, ["generate", "--prompt", "x", "--model", str(missing), "--out",
                                str(tmp_path / "v.mp4")])
    assert "--model" in err and str(missing) in err and "never downloads" in err
    assert not (tmp_path / "v.mp4").exists()


def test_generate_unknown_mode(tmp_path, capsys):
    err = _usage_error(capsys, ["generate", "--prompt", "x", "--attention", "int4", "--out", str(tmp_path / "v.mp4")])
    assert "--attention" in err and "int4" in err and "direct-p-fp4" in err


@pytest.mark.parametrize("flag,value,message", [
    ("--height", "40", "height must be a positive multiple of 16"),
    ("--width", "20", "width must be a positive multiple of 16"),
    ("--frames", "6", "frames must be 4k+1 (1, 5, 9"),
    ("--steps", "0", "positive integer"),
    ("--fps", "-1", "positive integer"),
])
def test_generate_bad_geometry(tmp_path, capsys, flag, value, message):
    err = _usage_error(capsys, ["generate", "--prompt", "x", flag, value, "--out", str(tmp_path / "v.mp4")])
    assert message in err


def test_generate_needs_prompt_and_out(tmp_path, capsys):
    assert "--out" in _usage_error(capsys, ["generate", "--prompt", "x"])
    assert "--prompt" in _usage_error(capsys, ["generate", "--out", str(tmp_path / "v.mp4")])


def test_bad_device(tmp_path, capsys):
    err = _usage_error(capsys, ["generate", "--prompt", "x", "--device", "gpu7", "--out", str(tmp_path / "v.mp4")])
    assert "--device" in err and "gpu7" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown when there is no GPU")
def test_bench_says_it_needs_a_gpu(capsys):
    assert cli.main(["bench", "attention", "--shape", "1.3b"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_help_lists_subcommands(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert all(word in text for word in ("generate", "drift", "bench"))


def test_module_entry_point_matches_console_script():
    # `python -m wan_fp4.cli` is the same program as the console script.
    proc = subprocess.run([sys.executable, "-m", "wan_fp4.cli", "generate", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "--attention" in proc.stdout


def test_bench_hands_arguments_to_the_benchmark_modules(monkeypatch):
    # Pretend a GPU is there; each bench subcommand hands its arguments to its module's main().
    import types

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    seen = []
    for kind, code in (("attention", 0), ("e2e", 3)):
        fake = types.ModuleType(cli.BENCH_ENTRY[kind])
        fake.main = lambda argv, kind=kind, code=code: seen.append((kind, argv)) or code
        monkeypatch.setitem(sys.modules, cli.BENCH_ENTRY[kind], fake)
    assert cli.main(["bench", "attention", "--shape", "14b", "--help"]) == 0
    assert cli.main(["bench", "e2e"]) == 3
    assert seen == [("attention", ["--shape", "14b", "--help"]), ("e2e", [])]


def test_bench_modules_exist():
    import importlib

    for module in cli.BENCH_ENTRY.values():
        assert callable(importlib.import_module(module).main)


def test_generate_checks_the_output_path_before_running(tmp_path, capsys, monkeypatch):
    # a path imageio cannot write is refused up front, not after a whole (GPU) generation
    monkeypatch.setattr(cli, "_load", lambda *a, **k: pytest.fail("the model was loaded"), raising=False)
    err = _usage_error(capsys, ["generate", "--prompt", "a cat", "--out", str(tmp_path / "video"), *SMALL])
    assert "--out must be a video file" in err


def test_default_model_is_the_trained_one_and_says_when_its_weights_are_missing(tmp_path, capsys, monkeypatch):
    from wan_fp4.pipelines import trained

    weights = tmp_path / "site-packages" / "weights"
    monkeypatch.setattr(trained, "WEIGHTS_DIR", weights)
    with pytest.raises(SystemExit) as exc:
        cli.main(["generate", "--prompt", "a red ball moving right", "--device", "cpu",
                  "--out", str(tmp_path / "v.mp4")])
    assert exc.value.code == 2
    printed, err = capsys.readouterr()
    assert "--model: model 'tiny'" in err and str(weights) in err and "reinstall" in err
    assert "model: tiny (embedded small Wan2.1-architecture model" in printed
    d = trained.DEFAULTS
    assert f"resolved: {d['height']}x{d['width']}, {d['frames']} frames, {d['steps']} steps" in printed
    assert not (tmp_path / "v.mp4").exists()


def _drift_plan(tmp_path, monkeypatch, field):
    """A function of drift's command-line arguments returning the DriftConfig's `field`, as the
    command would plan it (the model is never loaded, the report never built)."""
    from wan_fp4.eval import drift as D

    class Planned(Exception):
        pass

    def capture(pipe, cfg, **kwargs):
        raise Planned(getattr(cfg, field))

    monkeypatch.setattr(cli, "_resolve", lambda args, parser, defaults: None)
    monkeypatch.setattr(cli, "_load", lambda *a: object())
    monkeypatch.setattr(D, "build_report", capture)

    def planned(*argv):
        with pytest.raises(Planned) as plan:
            cli.main(["drift", "--device", "cpu", "--out", str(tmp_path / "r"), *argv])
        return plan.value.args[0]
    return planned


def test_drift_accuracy_auto_is_on_for_the_trained_model_only(tmp_path, monkeypatch):
    from wan_fp4.pipelines import trained

    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "model_index.json").write_text("{}")  # never loaded: _load is replaced
    monkeypatch.setattr(trained, "WEIGHTS_DIR", weights)
    accuracy = _drift_plan(tmp_path, monkeypatch, "accuracy")
    assert accuracy() is True and accuracy("--model", "tiny") is True
    assert accuracy("--model", str(weights)) is True
    assert accuracy("--model", "tiny-random") is False and accuracy("--model", str(tmp_path)) is False
    assert accuracy("--accuracy", "off") is False and accuracy("--model", "tiny-random", "--accuracy", "on") is True


def test_drift_default_prompt_is_one_the_model_knows(tmp_path, monkeypatch):
    from wan_fp4.eval import drift as D
    from wan_fp4.pipelines import trained

    prompt = _drift_plan(tmp_path, monkeypatch, "prompt")
    assert prompt("--model", "tiny") == trained.DEFAULT_PROMPT == "a red ball moving right"
    assert prompt("--model", "tiny-random") == D.DEFAULT_PROMPT
    assert prompt("--model", "tiny", "--prompt", "a blue square moving up") == "a blue square moving up"


def _no_load(monkeypatch):
    """Fail the test if the model is loaded: these errors must come before any work."""
    monkeypatch.setattr(cli, "_load", lambda *a, **k: pytest.fail("the model was loaded"))


def test_unwritable_output_paths_are_refused_before_running(tmp_path, capsys, monkeypatch):
    # They failed with a traceback after the whole generation or drift run (check: after a case).
    _no_load(monkeypatch)
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    (tmp_path / "dir.mp4").mkdir()
    for argv, message in (
            (["generate", "--prompt", "x", "--out", str(a_file / "v.mp4")], f"{str(a_file)!r} is a file, not a"),
            (["generate", "--prompt", "x", "--out", str(tmp_path / "dir.mp4")], "is a directory; expected a file"),
            (["drift", "--out", str(a_file)], "--out " + repr(str(a_file)) + " is a file; expected a directory"),
            (["drift", "--out", str(a_file / "sub")], f"{str(a_file)!r} is a file, not a"),
            (["check", "--json", str(tmp_path)], "--json " + repr(str(tmp_path)) + " is a directory"),
            (["check", "--json", str(a_file / "c.json")], f"{str(a_file)!r} is a file, not a")):
        err = _usage_error(capsys, argv)
        assert message in err, (argv, err)


@pytest.mark.parametrize("argv,message", [
    # torch maps a negative seed s to 2**64+s (-1 is silently seed 18446744073709551615) and
    # raised a traceback past 2**64, after the model had loaded
    (["generate", "--prompt", "x", "--seed", "-1", "--out", "v.mp4"], "argument --seed: expected a seed"),
    (["generate", "--prompt", "x", "--seed", str(2 ** 64), "--out", "v.mp4"], "argument --seed: expected a seed"),
    (["drift", "--seed", str(2 ** 70), "--out", "d"], "argument --seed: expected a seed"),
    (["drift", "--accuracy", "on", "--accuracy-seeds", "0,-1", "--out", "d"], "argument --accuracy-seeds: expected a seed"),
    # the same videos twice would weigh double in the accuracy
    (["drift", "--accuracy", "on", "--accuracy-seeds", "0,0", "--out", "d"], "seed 0 is listed twice"),
    # "1,,4" ran 1 and 4, "1,1" ran 1: a typo, silently
    (["drift", "--steps", "1,,4", "--out", "d"], "argument --steps: expected a comma-separated list of step counts, "
                                                 "got '1,,4' (an empty item)"),
    (["drift", "--steps", "1,1", "--out", "d"], "argument --steps: step count 1 is listed twice"),
    (["drift", "--modes", "bf16,,fp8", "--out", "d"], "argument --modes: expected a comma-separated list"),
    # --affine nan ran every sm100 case with a NaN map; a missing --prebuilt-dir was ignored
    (["check", "--affine", "nan", "1", "--suite", "quick"], "argument --affine: expected a finite number, got nan"),
    (["check", "--prebuilt-dir", "/does/not/exist"], "'/does/not/exist' is not an existing directory"),
])
def test_argument_values_that_ran_silently_wrong_or_late_are_refused(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    _no_load(monkeypatch)
    assert message in _usage_error(capsys, argv)


@pytest.mark.parametrize("argv,message", [
    # an empty drift prompt fell back to the default prompt, a blank generate prompt ran
    (["generate", "--prompt", "  ", "--out", "v.mp4"], "--prompt is required and must not be empty"),
    (["drift", "--prompt", "", "--out", "d"], "--prompt must not be empty"),
    # flags for a part that does not run were silently ignored
    (["drift", "--model", "tiny-random", "--accuracy-seeds", "3", "--out", "d"],
     "--accuracy-seeds given but prompt accuracy is off (--accuracy auto turns it on for the embedded trained "
     "model only, not 'tiny-random'); add --accuracy on"),
    (["drift", "--accuracy", "off", "--accuracy-prompts", "2", "--out", "d"],
     "--accuracy-prompts given but prompt accuracy is off (--accuracy off)"),
    (["drift", "--model", "tiny-random", "--policies", "none", "--policy-steps", "3", "--out", "d"],
     "--policy-steps given but --policies none runs no policy"),
    # DriftConfig's errors named its fields (decode_steps), not the flags
    (["drift", "--model", "tiny-random", "--policies", "nope", "--out", "d"], "error: --policies: unknown ['nope']"),
    (["drift", "--model", "tiny-random", "--steps", "1,4", "--decode-steps", "3", "--out", "d"],
     "error: --decode-steps [3] must be among steps [1, 4]"),
])
def test_drift_and_generate_refuse_contradictory_flags_before_loading(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    _no_load(monkeypatch)
    assert message in _usage_error(capsys, [*argv, "--device", "cpu"])
    assert not (tmp_path / "d").exists()


def test_devices_this_machine_cannot_use_are_refused_before_loading(tmp_path, capsys, monkeypatch):
    # --device meta (and xpu on a torch without it) ended in a traceback while the model loaded
    _no_load(monkeypatch)
    gen = ["generate", "--prompt", "x", *RANDOM, "--out", str(tmp_path / "v.mp4"), "--device"]
    assert "meta tensors hold no data" in _usage_error(capsys, [*gen, "meta"])
    if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        assert "--device 'xpu' cannot be used with this torch" in _usage_error(capsys, [*gen, "xpu"])
    # a GPU index past the last one: torch's "invalid device ordinal" came mid-load
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    err = _usage_error(capsys, [*gen, "cuda:1"])
    assert "--device 'cuda:1': this machine has 1 CUDA GPU(s), cuda:0 to cuda:0" in err


def test_bench_help_works_without_a_gpu(capsys, monkeypatch):
    # `wan-fp4 bench e2e --help` said "needs a CUDA GPU" on a CPU machine: its options could not be read
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "e2e", "--help"])
    assert exc.value.code == 0
    assert "--budget-s" in capsys.readouterr().out
    assert cli.main(["bench", "e2e"]) == 2  # running it still needs one
