"""The shipped embedded trained model: the weights are in the package within the size limits, load
offline with WanPipeline.from_pretrained, and draw what a prompt says, as the adherence detector
reads it back (bf16 control and direct-p through the reference, on CPU)."""
import pytest
import torch

from wan_fp4.eval import adherence
from wan_fp4.pipelines import trained

MIB = 1 << 20


@pytest.fixture(scope="module")
def pipe():
    from diffusers import WanPipeline

    pipe = WanPipeline.from_pretrained(str(trained.trained_dir()), torch_dtype=torch.float32, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def test_weights_ship_within_the_size_limits():
    files = [p for p in trained.WEIGHTS_DIR.rglob("*") if p.is_file()]
    weights = [p for p in files if p.suffix == ".safetensors"]
    assert {p.parent.name for p in weights} == {"transformer", "vae", "text_encoder"}
    assert all(p.stat().st_size <= 16 * MIB for p in files)
    assert sum(p.stat().st_size for p in files) <= 24 * MIB
    assert not [p for p in files if p.suffix in (".bin", ".pt", ".pth")]  # safetensors only


def test_loads_offline_as_the_architecture_says(pipe):
    assert pipe.transformer.config.attention_head_dim == trained.TRANSFORMER["attention_head_dim"] == 64
    assert pipe.transformer.config.num_layers == trained.TRANSFORMER["num_layers"]
    assert pipe.vae.config.z_dim == trained.VAE["z_dim"]
    assert pipe.vae.config.latents_std != [1.0] * trained.VAE["z_dim"]  # measured after training


def _generate(pipe, prompt):
    return pipe(prompt=prompt, height=trained.DEFAULTS["height"], width=trained.DEFAULTS["width"],
                num_frames=trained.DEFAULTS["frames"], num_inference_steps=trained.DEFAULTS["steps"],
                generator=torch.Generator().manual_seed(0), output_type="np").frames[0]


@pytest.mark.parametrize("prompt", ["a red ball moving right", "a blue square moving up"])
def test_draws_what_the_prompt_says(pipe, prompt):
    reading = adherence.read(_generate(pipe, prompt))
    assert reading.matches(prompt) == {"colour": True, "shape": True, "direction": True, "all": True}, reading


def test_direct_p_draws_it_too(pipe):
    import wan_fp4

    prompt = "a yellow ball moving left"
    wan_fp4.enable(pipe, mode="direct-p")
    try:
        reading = adherence.read(_generate(pipe, prompt))
    finally:
        wan_fp4.disable(pipe)
    assert reading.matches(prompt)["all"], reading
