"""The embedded tiny Wan pipeline, registered as "tiny-random": every part built from code, nothing
downloaded. (The name "tiny" is the trained model of `trained.py`, which shares its tokenizer and
scheduler builders.)

It is a smoke model (random weights, ~0.1 M parameters), not a video model: it exercises the
exact code paths of a real Wan2.1 pipeline (UMT5 text encoder, WanTransformer3DModel with
qk-norm and interleaved RoPE, AutoencoderKLWan, flow-matching sampler) in seconds on a CPU.
"""
from __future__ import annotations

import torch

# Two heads of dim 32: every mode runs natively (NVFP4 pairs 16-value blocks under one scale, so
# direct-p-fp4 wants a multiple of 32), and RoPE's t/h/w split of the head dim (12/10/10) stays even.
TINY_HEADS = 2
TINY_HEAD_DIM = 32
TINY_TEXT_DIM = 32  # = the UMT5 d_model: WanTransformer3DModel.text_dim must match it
SPECIAL_TOKENS = ("<pad>", "</s>", "<unk>")
SCHEDULERS = ("unipc", "euler")


def build_tokenizer():
    """A byte-level tokenizer held in memory: every prompt maps to distinct ids, none unknown."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    symbols = list(SPECIAL_TOKENS) + sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(BPE(vocab={s: i for i, s in enumerate(symbols)}, merges=[], unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    # UMT5 appends </s>, as the real Wan tokenizer does.
    core.post_processor = TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>",
                                   unk_token="<unk>", model_max_length=512)


def build_scheduler(name: str = "unipc"):
    from diffusers import FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler

    if name == "unipc":  # what the Wan2.1 diffusers repos ship
        return UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                       flow_shift=3.0)
    if name == "euler":
        return FlowMatchEulerDiscreteScheduler(shift=3.0)
    raise ValueError(f"scheduler must be one of {SCHEDULERS}, got {name!r}")


def cast_like_from_pretrained(model: torch.nn.Module, dtype: torch.dtype, keep=()) -> torch.nn.Module:
    """Cast to `dtype`, leaving parameters under a module named in `keep` in float32, as the
    library's from_pretrained would: a saved-and-reloaded pipeline then has exactly these weights."""
    keep = set(keep)
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        if tensor.is_floating_point() and not keep.intersection(name.split(".")):
            tensor.data = tensor.data.to(dtype)
    return model


def fp32_modules(model: torch.nn.Module, dtype: torch.dtype) -> set:
    """Modules from_pretrained keeps in float32 at `dtype`: diffusers always keeps its list,
    transformers keeps `_keep_in_fp32_modules` only for float16 and the `_strict` list for both
    half types."""
    keep = set(getattr(model, "_keep_in_fp32_modules", None) or ())
    if not type(model).__module__.startswith("transformers."):
        return keep
    strict = set(getattr(model, "_keep_in_fp32_modules_strict", None) or ())
    return (keep if dtype == torch.float16 else set()) | (strict if dtype in (torch.float16, torch.bfloat16) else set())


def build_tiny_pipeline(seed: int = 0, dtype: torch.dtype = torch.float32, scheduler: str = "unipc"):
    """A WanPipeline with random weights drawn from `seed`, built fully offline.

    dtype applies to the transformer and the text encoder; the VAE stays float32, as in the
    Wan2.1 diffusers examples.
    """
    from diffusers import AutoencoderKLWan, WanPipeline, WanTransformer3DModel
    from transformers import UMT5Config, UMT5EncoderModel

    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    sched = build_scheduler(scheduler)
    tokenizer = build_tokenizer()
    # Seed each part separately so changing one part's size leaves the others' weights alone.
    torch.manual_seed(seed)
    text_encoder = UMT5EncoderModel(UMT5Config(
        vocab_size=len(tokenizer), d_model=TINY_TEXT_DIM, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        relative_attention_num_buckets=8, feed_forward_proj="gated-gelu", is_encoder_decoder=False,
        use_cache=False)).eval()
    torch.manual_seed(seed + 1)
    vae = AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True]).eval()
    torch.manual_seed(seed + 2)
    transformer = WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=TINY_HEADS, attention_head_dim=TINY_HEAD_DIM,
        in_channels=16, out_channels=16, text_dim=TINY_TEXT_DIM, freq_dim=256, ffn_dim=64, num_layers=2,
        cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=1024).eval()
    for model in (text_encoder, transformer):
        cast_like_from_pretrained(model, dtype, fp32_modules(model, dtype))
    return WanPipeline(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae,
                       transformer=transformer, scheduler=sched)
