"""Training the embedded model: every stage runs and resumes (a tiny configuration on CPU), the
export loads with WanPipeline.from_pretrained, and the shortened text encoding equals the pipeline's."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from wan_fp4.pipelines import trained, training

ROOT = Path(__file__).resolve().parents[1]


def test_short_text_encoding_equals_the_pipelines_full_length():
    parts = trained.build_components(seed=0)
    ids, mask = training.tokenize(parts["tokenizer"], ["a red ball moving right", ""])
    encoder = parts["text_encoder"].eval()
    with torch.no_grad():
        full = training.encode_text(encoder, ids, mask)
        short = training.encode_text(encoder, ids, mask, tokens=32)
    assert full.shape == short.shape == (2, trained.MAX_SEQUENCE_LENGTH, trained.TEXT_ENCODER["d_model"])
    torch.testing.assert_close(short, full, rtol=1e-5, atol=1e-6)
    assert bool((full[:, 30:] == 0).all())
    with pytest.raises(ValueError, match="text_tokens"):
        training.encode_text(encoder, ids, mask, tokens=4)


def test_architecture_takes_the_sm90_head_dim():
    assert trained.TRANSFORMER["attention_head_dim"] == 64


def test_every_stage_runs_resumes_and_exports(tmp_path):
    state, out = tmp_path / "state", tmp_path / "out"
    cmd = [sys.executable, str(ROOT / "scripts" / "train_tiny.py"), "--smoke", "--device", "cpu",
           "--state", str(state), "--budget-s", "60", "--max-steps", "2", "--out", str(out)]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True)
    history = json.loads((out / "history.json").read_text())
    assert history["vae"] and history["transformer"][-1]["step"] == 2
    cmd[cmd.index("--max-steps") + 1] = "3"  # resumes where it stopped, through torch.compile
    cmd += ["--compile", "eager"]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True)
    history = json.loads((out / "history.json").read_text())
    assert [r["step"] for r in history["transformer"]] == [1, 2, 3]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stage"] == "transformer" and summary["transformer_steps"] == 3
    assert summary["config"]["compile_backend"] == "eager"

    import tarfile

    from diffusers import WanPipeline

    export = tmp_path / "export"
    for name in ("transformer.tar", "rest.tar"):
        with tarfile.open(out / name) as tar:
            tar.extractall(export, filter="data")
    pipe = WanPipeline.from_pretrained(str(export), local_files_only=True)
    assert pipe.transformer.config.attention_head_dim == 64
    assert pipe.vae.config.latents_std != [1.0] * 16  # measured after the VAE stage
    frames = pipe(prompt="a red ball moving right", height=32, width=32, num_frames=5, num_inference_steps=2,
                  output_type="np").frames
    assert frames.shape == (1, 5, 32, 32, 3) and bool(torch.isfinite(torch.as_tensor(frames)).all())

    # The decoder alone is fine-tuned: the encoder, and so the latents the transformer learnt, stay.
    before = {k: v.clone() for k, v in pipe.vae.state_dict().items()}
    cmd[cmd.index("--budget-s") + 1] = "0"
    subprocess.run(cmd + ["--decoder-s", "3"], check=True, cwd=ROOT, capture_output=True)
    history = json.loads((out / "history.json").read_text())
    assert history["decoder"] and history["vae_roundtrip"]["clips"] == 64
    assert [r["step"] for r in history["transformer"]] == [1, 2, 3]
    with tarfile.open(out / "rest.tar") as tar:
        tar.extractall(export, filter="data")
    after = WanPipeline.from_pretrained(str(export), local_files_only=True).vae.state_dict()
    changed = {k.split(".")[0] for k in before if not torch.equal(before[k], after[k])}
    assert "decoder" in changed and changed <= {"decoder", "post_quant_conv"}, changed
    subprocess.run([sys.executable, str(ROOT / "scripts" / "train_tiny.py"), "--plot", str(out / "history.json")],
                   check=True, cwd=ROOT, capture_output=True)
    assert (out / "losses.png").stat().st_size > 0


def test_export_carries_the_command_lines_defaults(tmp_path):
    from wan_fp4.pipelines import build_tiny_pipeline, model_info

    export = training.save_pipeline(build_tiny_pipeline(), tmp_path / "export")
    info = model_info(str(export))
    assert info.defaults == trained.DEFAULTS and not info.synthetic
