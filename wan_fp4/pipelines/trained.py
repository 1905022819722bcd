"""The embedded trained model: a small Wan2.1 pipeline trained on the procedural world.

Real diffusers classes at small widths: a byte-level tokenizer, a 3-layer UMT5 text encoder, an
AutoencoderKLWan (8x spatial, 4x temporal compression, 16 latent channels) and a 6-layer
WanTransformer3DModel with 4 heads of dim 64 (a head dim the sm90 kernels take). It was trained by
`scripts/train_tiny.py` (see `wan_fp4.pipelines.training`) on clips of `wan_fp4.pipelines.world`,
so it draws what prompts of that world's grammar say ("a red ball moving right"); it knows nothing
else. Its weights ship in the package under `weights/tiny` in diffusers' `save_pretrained` layout,
so `WanPipeline.from_pretrained(trained_dir())` loads it too.
"""
from __future__ import annotations

from pathlib import Path

import torch

NAME = "tiny"  # its name in the model registry: the command line's default model
WEIGHTS_DIR = Path(__file__).parent / "weights" / "tiny"

TEXT_ENCODER = dict(d_model=128, d_kv=32, d_ff=256, num_layers=3, num_heads=4,
                    relative_attention_num_buckets=16, dropout_rate=0.0, feed_forward_proj="gated-gelu",
                    is_encoder_decoder=False, use_cache=False)
VAE = dict(base_dim=32, z_dim=16, dim_mult=[1, 1, 2, 2], num_res_blocks=1,
           temperal_downsample=[False, True, True])
TRANSFORMER = dict(patch_size=(1, 2, 2), num_attention_heads=4, attention_head_dim=64, in_channels=16,
                   out_channels=16, text_dim=128, freq_dim=256, ffn_dim=1024, num_layers=6,
                   cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=1024)
# What the model was trained at; its CLI defaults.
DEFAULTS = {"height": 128, "width": 128, "frames": 17, "steps": 20}
DEFAULT_PROMPT = "a red ball moving right"  # the drift report's prompt on this model (it knows no other world)
MAX_SEQUENCE_LENGTH = 512  # WanPipeline's default text length; training pads to it as inference does


def build_components(seed: int = 0) -> dict:
    """Untrained components of the embedded model's architecture, drawn from `seed` (float32)."""
    from diffusers import AutoencoderKLWan, WanTransformer3DModel
    from transformers import UMT5Config, UMT5EncoderModel

    from .tiny import build_scheduler, build_tokenizer

    tokenizer = build_tokenizer()
    torch.manual_seed(seed)
    text_encoder = UMT5EncoderModel(UMT5Config(vocab_size=len(tokenizer), **TEXT_ENCODER))
    torch.manual_seed(seed + 1)
    vae = AutoencoderKLWan(**VAE, latents_mean=[0.0] * VAE["z_dim"], latents_std=[1.0] * VAE["z_dim"])
    torch.manual_seed(seed + 2)
    transformer = WanTransformer3DModel(**TRANSFORMER)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                scheduler=build_scheduler("unipc"))


def trained_dir() -> Path:
    """The shipped weights directory; raises if the package was installed without it."""
    if not (WEIGHTS_DIR / "model_index.json").is_file():
        raise FileNotFoundError(f"the embedded trained model is missing from {WEIGHTS_DIR}; reinstall "
                                "wan-fp4 (its weights ship as package data)")
    return WEIGHTS_DIR


def is_trained_model(model) -> bool:
    """Whether a `--model` argument is the embedded trained model: its registered name or its
    directory (False while the package ships without its weights)."""
    try:
        weights = trained_dir()
    except FileNotFoundError:
        return False
    if model == NAME:
        return True
    path = Path(model)
    return path.is_dir() and path.resolve() == weights.resolve()
