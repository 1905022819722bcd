"""`random:1.3b` and `random:14b`: the real Wan2.1 T2V architectures with random weights.

For latency at real shapes (and for exercising the drift machinery at real shapes) without
downloading anything. The transformer is the exact WanTransformer3DModel configuration of
Wan2.1-T2V-1.3B / -14B (the config.json of the released Diffusers checkpoints). It is built on the meta
device, materialised directly on the target device in the target dtype (`to_empty`), and
initialised there with each module's own `reset_parameters()`: no slow CPU init of 14 B
parameters, and the same weight scales as a freshly constructed model. Modules diffusers keeps in
float32 (`_keep_in_fp32_modules`: time embedder, norms, scale-shift tables) stay float32, as
`from_pretrained(torch_dtype=bf16)` would leave them.

The rest of the pipeline is NOT the real one, and timings say so:
  * text encoder: a one-layer UMT5 with the real output width (d_model 4096, so the transformer's
    text projection runs at its real size) and a byte-level tokenizer; text encoding time is far
    below the real umt5-xxl's (5.7 B parameters, one forward over 512 tokens per prompt);
  * VAE: the real AutoencoderKLWan architecture (base_dim 96, z_dim 16) with random weights, in
    float32, so decode time at a given geometry is realistic while the decoded pixels are noise;
  * scheduler: UniPC flow-matching with flow_shift 3.0, as the Wan2.1 diffusers repos ship.
Every output of these models is a smoke test: drift on random weights is not a quality figure.
"""
from __future__ import annotations

import torch

from .registry import MODELS, ModelSpec, register_model

# WanTransformer3DModel fields of the released checkpoints (their transformer/config.json).
_COMMON = dict(patch_size=(1, 2, 2), attention_head_dim=128, in_channels=16, out_channels=16, text_dim=4096,
               freq_dim=256, cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
               image_dim=None, added_kv_proj_dim=None, rope_max_seq_len=1024)
CONFIGS = {
    "1.3b": dict(_COMMON, num_attention_heads=12, ffn_dim=8960, num_layers=30),
    "14b": dict(_COMMON, num_attention_heads=40, ffn_dim=13824, num_layers=40),
}
TEXT_DIM = 4096
# The tiny text encoder: real output width, everything else minimal.
_TEXT_ENCODER = dict(d_model=TEXT_DIM, d_kv=64, d_ff=256, num_layers=1, num_heads=2,
                     relative_attention_num_buckets=32, feed_forward_proj="gated-gelu",
                     is_encoder_decoder=False, use_cache=False)


def _keep_fp32(model, dtype) -> set:
    from .tiny import fp32_modules

    return fp32_modules(model, dtype)


def _init_leftover(name: str, param: torch.nn.Parameter) -> None:
    """Parameters that belong to no module with reset_parameters(): diffusers' scale-shift tables
    (drawn as randn / sqrt(dim) in its constructor). Anything else means diffusers changed."""
    if name.split(".")[-1] == "scale_shift_table":
        with torch.no_grad():
            param.normal_(0.0, param.shape[-1] ** -0.5)
        return
    raise RuntimeError(f"random weights: parameter {name!r} of shape {tuple(param.shape)} has no initialiser; "
                       "diffusers' WanTransformer3DModel has changed (wan_fp4/pipelines/random.py knows "
                       "Linear/Conv/norm modules and scale_shift_table)")


def build_random_transformer(config: dict, device="cpu", dtype: torch.dtype = torch.bfloat16, seed: int = 0):
    """A WanTransformer3DModel of `config` with random weights, materialised on `device` in `dtype`.

    Built on the meta device, then `to_empty(device)` and per-module `reset_parameters()` on the
    device. The non-persistent RoPE tables (which meta construction leaves empty) are copied from
    a zero-layer model of the same config built on the device.
    """
    from diffusers import WanTransformer3DModel

    from .tiny import cast_like_from_pretrained

    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict of WanTransformer3DModel fields, got {type(config).__name__}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    device = torch.device(device)
    with torch.device("meta"):
        model = WanTransformer3DModel(**config)
    cast_like_from_pretrained(model, dtype, _keep_fp32(model, dtype))
    model.to_empty(device=device)

    torch.manual_seed(seed)  # seeds the CPU and every CUDA generator
    initialised = set()
    with torch.no_grad():
        for module in model.modules():
            own = list(module.parameters(recurse=False))
            if own and hasattr(module, "reset_parameters"):
                module.reset_parameters()
                initialised.update(id(p) for p in own)
        for name, param in model.named_parameters():
            if id(param) not in initialised:
                _init_leftover(name, param)

    with torch.device(device):
        shell = WanTransformer3DModel(**{**config, "num_layers": 0})
    shell_buffers = dict(shell.named_buffers())
    for name, buf in model.named_buffers():
        if name not in shell_buffers:
            raise RuntimeError(f"random weights: buffer {name!r} is not in a zero-layer model; diffusers' "
                               "WanTransformer3DModel has changed")
        owner, _, leaf = name.rpartition(".")
        target = model.get_submodule(owner) if owner else model
        target._buffers[leaf] = shell_buffers[name].to(device=device, dtype=buf.dtype)
    return model.eval()


def build_random_pipeline(size: str, device="cpu", dtype: torch.dtype = torch.bfloat16, seed: int = 0):
    """A WanPipeline around the real `size` transformer (random weights), a minimal text encoder of
    the real width, and the real VAE architecture with random weights (float32)."""
    from diffusers import AutoencoderKLWan, WanPipeline
    from transformers import UMT5Config, UMT5EncoderModel

    from .tiny import build_scheduler, build_tokenizer, cast_like_from_pretrained, fp32_modules

    if size not in CONFIGS:
        raise ValueError(f"size must be one of {', '.join(CONFIGS)}, got {size!r}")
    device = torch.device(device)
    transformer = build_random_transformer(CONFIGS[size], device, dtype, seed)
    tokenizer = build_tokenizer()
    with torch.device(device):
        torch.manual_seed(seed + 1)
        text_encoder = UMT5EncoderModel(UMT5Config(vocab_size=len(tokenizer), **_TEXT_ENCODER)).eval()
        torch.manual_seed(seed + 2)
        vae = AutoencoderKLWan().eval()  # the default config is Wan2.1's VAE
    cast_like_from_pretrained(text_encoder, dtype, fp32_modules(text_encoder, dtype))
    return WanPipeline(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                       scheduler=build_scheduler("unipc"))


_DESCRIPTION = ("Wan2.1-T2V-{name} transformer architecture with RANDOM weights (no download), with a "
                "one-layer stand-in text encoder and the real VAE architecture (random): for latency at "
                "real shapes and smoke runs; not a video model, its drift is not a quality figure")


def _builder(size):
    def build(device, dtype):
        return build_random_pipeline(size, device, dtype)
    return build


for _size, _label in (("1.3b", "1.3B"), ("14b", "14B")):
    if f"random:{_size}" not in MODELS:  # importing twice (e.g. reload) must not fail
        register_model(ModelSpec(name=f"random:{_size}", build=_builder(_size), synthetic=True,
                                 description=_DESCRIPTION.format(name=_label)))
