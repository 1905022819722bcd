"""The embedded pipelines (tiny-random built from code, tiny the trained model loaded from its shipped
directory), local-directory loading, the model registry and video export."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from wan_fp4.pipelines import (MODELS, ModelError, ModelSpec, build_tiny_pipeline, export_video, load_pipeline,
                               model_info, read_video, register_model, trained, write_defaults)
from wan_fp4.pipelines.tiny import TINY_HEAD_DIM

RUN = dict(prompt="a cat dances", negative_prompt="blurry", height=32, width=48, num_frames=5,
           num_inference_steps=2, guidance_scale=5.0, output_type="latent")


def _latents(pipe, seed=1):
    pipe.set_progress_bar_config(disable=True)
    return pipe(generator=torch.Generator("cpu").manual_seed(seed), **RUN).frames


@pytest.fixture(scope="module")
def saved_tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_pipe")
    build_tiny_pipeline(dtype=torch.bfloat16).save_pretrained(path)
    return path


def test_tiny_builds_and_runs_with_network_blocked():
    # Building and running the random tiny pipeline must not even try to reach the network.
    stdout = _run_with_network_refused("""
        from wan_fp4.pipelines import build_tiny_pipeline
        pipe = build_tiny_pipeline()
        pipe.set_progress_bar_config(disable=True)
        out = pipe(prompt="a red car", height=32, width=32, num_frames=5, num_inference_steps=2,
                   generator=torch.Generator().manual_seed(0), output_type="np").frames
        assert out.shape == (1, 5, 32, 32, 3), out.shape
        assert 0.0 <= out.min() and out.max() <= 1.0 and out.std() > 0, (out.min(), out.max(), out.std())
        print("OK", out.shape)
    """, env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
    assert "OK (1, 5, 32, 32, 3)" in stdout


def _run_with_network_refused(body: str, env: dict) -> str:
    """Run `body` (torch imported) in a fresh interpreter whose every socket connection raises;
    its stdout."""
    code = textwrap.dedent("""
        import socket
        def refuse(*a, **k):
            raise RuntimeError("network access attempted")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        import torch
    """) + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_tiny_geometry_runs_every_mode_natively():
    pipe = build_tiny_pipeline()
    cfg = pipe.transformer.config
    assert cfg.attention_head_dim == TINY_HEAD_DIM and TINY_HEAD_DIM % 32 == 0  # NVFP4 pairs 16-value blocks
    assert cfg.text_dim == pipe.text_encoder.config.d_model
    ids = pipe.tokenizer("A red vintage car, ünïcode!").input_ids
    assert pipe.tokenizer.unk_token_id not in ids and ids[-1] == pipe.tokenizer.eos_token_id


def test_tiny_weights_follow_seed():
    a, b, c = (build_tiny_pipeline(seed=s).transformer.state_dict() for s in (3, 3, 4))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_tiny_dtype_split():
    pipe = build_tiny_pipeline(dtype=torch.bfloat16)
    assert pipe.transformer.proj_out.weight.dtype == torch.bfloat16
    assert pipe.transformer.scale_shift_table.dtype == torch.float32  # diffusers keeps it fp32
    assert pipe.text_encoder.dtype == torch.bfloat16
    assert pipe.vae.dtype == torch.float32
    with pytest.raises(TypeError, match="dtype"):
        build_tiny_pipeline(dtype=torch.int8)
    with pytest.raises(ValueError, match="scheduler"):
        build_tiny_pipeline(scheduler="ddim")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_save_then_load_pipeline_gives_identical_latents(tmp_path, dtype):
    built = build_tiny_pipeline(dtype=dtype)
    built.save_pretrained(tmp_path)
    loaded = load_pipeline(str(tmp_path), "cpu", dtype)
    assert type(loaded).__name__ == "WanPipeline"
    assert loaded.transformer.dtype == dtype and loaded.vae.dtype == torch.float32
    a, b = _latents(built), _latents(loaded)
    assert torch.isfinite(a).all()
    assert torch.equal(a, b), (a - b).abs().max()
    assert not torch.equal(a, _latents(built, seed=2))  # the comparison can see a difference


def test_load_pipeline_tiny_random_by_name():
    pipe = load_pipeline("tiny-random", "cpu", torch.float32)
    assert torch.equal(_latents(pipe), _latents(build_tiny_pipeline()))
    info = model_info("tiny-random")
    assert info.synthetic and "random weights" in info.description and info.defaults["height"] == 64


def test_tiny_is_the_trained_model_loaded_from_its_directory(saved_tiny, monkeypatch):
    # Any saved pipeline stands in for the shipped weights: "tiny" loads whatever trained_dir() holds,
    # the way a local directory loads (VAE in float32, weights out of the memory map on CPU).
    info = model_info("tiny")
    assert not info.synthetic and info.defaults == trained.DEFAULTS
    assert "trained by wan-fp4" in info.description and "world.py" in info.description
    monkeypatch.setattr(trained, "WEIGHTS_DIR", saved_tiny)
    pipe = load_pipeline("tiny", "cpu", torch.bfloat16)
    assert pipe.vae.dtype == torch.float32 and pipe.transformer.dtype == torch.bfloat16
    assert torch.equal(_latents(pipe), _latents(build_tiny_pipeline(dtype=torch.bfloat16)))
    assert trained.is_trained_model("tiny") and trained.is_trained_model(str(saved_tiny))
    assert not trained.is_trained_model("tiny-random")


def test_tiny_without_its_weights_names_the_directory(tmp_path, monkeypatch):
    missing = tmp_path / "weights" / "tiny"
    monkeypatch.setattr(trained, "WEIGHTS_DIR", missing)
    with pytest.raises(ModelError, match="reinstall") as err:
        load_pipeline("tiny", "cpu")
    assert str(missing) in str(err.value) and "'tiny'" in str(err.value)
    assert not trained.is_trained_model("tiny")


SHIPPED = (trained.WEIGHTS_DIR / "model_index.json").is_file()
needs_weights = pytest.mark.skipif(not SHIPPED, reason=f"the trained weights are not in {trained.WEIGHTS_DIR} "
                                                       "(they are added to the repository separately)")


@needs_weights
def test_shipped_weights_load_by_name_and_by_path_alike():
    by_name = load_pipeline("tiny", "cpu", torch.float32)
    by_path = load_pipeline(str(trained.WEIGHTS_DIR), "cpu", torch.float32)
    config = by_name.transformer.config
    assert (config.num_layers, config.attention_head_dim) == (trained.TRANSFORMER["num_layers"],
                                                              trained.TRANSFORMER["attention_head_dim"])
    assert torch.equal(_latents(by_name), _latents(by_path))
    assert model_info(str(trained.WEIGHTS_DIR)).defaults == model_info("tiny").defaults == trained.DEFAULTS


@needs_weights
def test_shipped_weights_run_with_network_blocked():
    # the hub's offline switches unset: loading the shipped weights must need them no more than a socket
    stdout = _run_with_network_refused("""
        from wan_fp4.pipelines import load_pipeline
        pipe = load_pipeline("tiny", "cpu", torch.float32)
        pipe.set_progress_bar_config(disable=True)
        out = pipe(prompt="a red ball moving right", height=32, width=32, num_frames=5, num_inference_steps=2,
                   generator=torch.Generator().manual_seed(0), output_type="np").frames
        assert out.shape == (1, 5, 32, 32, 3) and 0.0 <= out.min() and out.max() <= 1.0, (out.shape, out.min())
        print("OK")
    """, env={k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")})
    assert "OK" in stdout


def test_load_pipeline_rejects_missing_path_and_lists_names(tmp_path):
    missing = tmp_path / "no_such_model"
    with pytest.raises(ModelError) as err:
        load_pipeline(str(missing), "cpu")
    assert "no_such_model" in str(err.value) and "tiny" in str(err.value) and "never downloads" in str(err.value)
    with pytest.raises(ModelError, match="tiny"):
        load_pipeline("random:7b", "cpu")  # an unknown name is not a path either


def test_load_pipeline_rejects_non_wan_directories(tmp_path, saved_tiny):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelError, match="model_index.json"):
        load_pipeline(str(empty), "cpu")
    other = tmp_path / "other"
    other.mkdir()
    (other / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionPipeline"}))
    with pytest.raises(ModelError, match="StableDiffusionPipeline"):
        load_pipeline(str(other), "cpu")
    (other / "model_index.json").write_text("{not json")
    with pytest.raises(ModelError, match="cannot read"):
        load_pipeline(str(other), "cpu")
    with pytest.raises(ModelError, match="non-empty string"):
        load_pipeline("", "cpu")
    for bad in ("", None):  # "" described the working directory, None failed inside pathlib
        with pytest.raises(ModelError, match="non-empty string"):
            model_info(bad)
    # diffusers loaded a string dtype as float32, with only a log line
    with pytest.raises(TypeError, match="dtype must be a floating torch.dtype"):
        load_pipeline(str(saved_tiny), "cpu", "bfloat16")
    with pytest.raises(ValueError, match="device must be a torch device"):
        load_pipeline(str(saved_tiny), "gpu")
    info = model_info(str(saved_tiny))
    assert not info.synthetic and str(saved_tiny) in info.description


def test_local_directory_defaults_file(tmp_path, saved_tiny):
    # a saved pipeline carries the command line's defaults in wan_fp4_defaults.json, checked on both ends
    model = tmp_path / "copy"
    model.mkdir()
    (model / "model_index.json").write_text((saved_tiny / "model_index.json").read_text())
    assert model_info(str(model)).defaults == {}
    write_defaults(model, height=64, width=64, frames=17, steps=8)
    info = model_info(str(model))
    assert info.defaults == {"height": 64, "width": 64, "frames": 17, "steps": 8}
    assert info.defaults_source == str(model / "wan_fp4_defaults.json")
    for bad, message in (({"fps": 8}, "unknown keys"), ({"steps": 0}, "positive integer"),
                         ({"frames": 6}, "must be 4k")):
        with pytest.raises(ModelError, match=message):
            write_defaults(model, **bad)
    # a directory that is not a pipeline: the file was written, and never read
    with pytest.raises(ModelError, match="not a saved diffusers pipeline directory"):
        write_defaults(tmp_path, height=64)
    assert not (tmp_path / "wan_fp4_defaults.json").exists()
    (model / "wan_fp4_defaults.json").write_text("[64]")
    with pytest.raises(ModelError, match="JSON object"):
        model_info(str(model))


def test_registry_hook_for_other_builders():
    built = []

    def build(device, dtype):
        built.append((device, dtype))
        return build_tiny_pipeline(seed=7, dtype=dtype)

    spec = ModelSpec(name="test:seven", build=build, description="test model", defaults={"steps": 3})
    register_model(spec)
    try:
        with pytest.raises(ValueError, match="already registered"):
            register_model(spec)
        pipe = load_pipeline("test:seven", "cpu", torch.float32)
        assert built == [(torch.device("cpu"), torch.float32)]
        assert torch.equal(pipe.transformer.proj_out.weight,
                           build_tiny_pipeline(seed=7).transformer.proj_out.weight)
        info = model_info("test:seven")
        assert info.synthetic and info.defaults == {"steps": 3}
        with pytest.raises(TypeError, match="ModelSpec"):
            register_model({"name": "x"})
    finally:
        MODELS.pop("test:seven", None)


def _smooth_frames(rng, frames, height, width):
    # Smooth content (what codecs are built for) with a random phase per frame.
    y, x = np.mgrid[0:height, 0:width] / max(height, width)
    phase = rng.uniform(0, 2 * np.pi, size=(frames, 1, 1, 3))
    return 0.5 + 0.4 * np.sin(2 * np.pi * (x + y)[None, :, :, None] + phase)


def test_export_video_round_trip(tmp_path):
    rng = np.random.default_rng()
    frames, height, width = 9, 48, 80
    video = _smooth_frames(rng, frames, height, width).astype(np.float32)
    path = export_video(video[None], tmp_path / "sub" / "v.mp4", fps=8)  # batch axis of 1 is accepted
    back = read_video(path)
    assert back.shape == (frames, height, width, 3) and back.dtype == np.uint8
    # H.264 is lossy: mean error of a few levels out of 255 on smooth content.
    err = np.abs(back.astype(np.float64) - np.round(video * 255)).mean()
    assert err < 6.0, err


def test_export_video_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match=r"\(F, H, W, 3\)"):
        export_video(np.zeros((4, 16, 16)), tmp_path / "a.mp4")
    with pytest.raises(ValueError, match="batch of 2"):
        export_video(np.zeros((2, 4, 16, 16, 3)), tmp_path / "a.mp4")
    with pytest.raises(ValueError, match="fps"):
        export_video(np.zeros((4, 16, 16, 3)), tmp_path / "a.mp4", fps=0)
    with pytest.raises(ValueError, match="even"):
        export_video(np.zeros((4, 15, 16, 3)), tmp_path / "a.mp4")
    with pytest.raises(TypeError, match="uint8"):
        export_video(np.zeros((4, 16, 16, 3), dtype=np.int32), tmp_path / "a.mp4")
