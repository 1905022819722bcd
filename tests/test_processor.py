"""WanDirectPAttnProcessor and enable()/disable() on tiny Wan transformers built in code."""
import time
from collections import Counter

import pytest
import torch
from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry
from diffusers.models.transformers.transformer_wan import WanAttnProcessor

from wan_fp4 import dispatch
from wan_fp4.eval.metrics import rel_l2
from wan_fp4.modes import FP4Params
from wan_fp4.policy import Policy
from wan_fp4.processor import WanDirectPAttnProcessor, disable, enable

LOW = ("fp8", "direct-p", "direct-p-fp4")


def inputs(i2v=False, seed=1, dtype=torch.float32, frames=3, size=8):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 36 if i2v else 16, frames, size, size, generator=g, dtype=dtype)
    # I2V: diffusers hard-codes 512 text tokens and splits the image tokens off the front.
    ehs = torch.randn(1, 512 if i2v else 16, 32, generator=g, dtype=dtype)
    kw = {"encoder_hidden_states_image": torch.randn(1, 5, 8, generator=g, dtype=dtype)} if i2v else {}
    return (x, torch.tensor([500]), ehs), kw


@torch.no_grad()
def run(model, args, kw):
    return model(*args, **kw, return_dict=False)[0]


def sdpa_like_native(q, k, v, mode="direct-p", scale=None, *, fp4=None, return_lse=False):
    """What diffusers' native backend computes, for checking our routing path bit for bit."""
    out = torch.nn.functional.scaled_dot_product_attention(
        q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3), scale=scale)
    return out.permute(0, 2, 1, 3)


# ----------------------------------------------------------------------------- bf16 == stock
@pytest.mark.parametrize("i2v", [False, True], ids=["t2v", "i2v"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bf16_mode_bit_identical_to_stock(tiny_wan, i2v, dtype):
    model = tiny_wan(i2v=i2v).to(dtype)
    args, kw = inputs(i2v, dtype=dtype)
    ref = run(model, args, kw)
    model.set_attn_processor(WanDirectPAttnProcessor("bf16"))
    assert torch.equal(run(model, args, kw), ref)
    # enable() with everything bf16 also changes nothing, image branch included.
    model.set_attn_processor(WanAttnProcessor())
    handle = enable(model, "bf16", cross_attention=True)
    assert torch.equal(run(model, args, kw), ref)
    n_attn_calls = 2 * 2 + (2 if i2v else 0)  # 2 layers x (self + text cross) + image branch
    assert handle.call_counts() == Counter({("bf16", "diffusers:native"): n_attn_calls})


@pytest.mark.parametrize("i2v", [False, True], ids=["t2v", "i2v"])
def test_routed_path_reproduces_stock_processor(tiny_wan, i2v, monkeypatch):
    """Low-precision calls reuse WanAttnProcessor's code with only the attention function swapped:
    with a dispatcher that computes what diffusers' native backend does, the output is stock's."""
    model = tiny_wan(i2v=i2v)
    args, kw = inputs(i2v)
    ref = run(model, args, kw)
    seen = []
    monkeypatch.setattr(dispatch, "attention", lambda q, k, v, **a: seen.append(a["mode"]) or sdpa_like_native(q, k, v, **a))
    enable(model, "fp8", cross_attention=True)
    assert torch.equal(run(model, args, kw), ref)
    assert seen == ["fp8"] * (6 if i2v else 4)


# ----------------------------------------------------------------------------- low precision
# Bounds (float32 tiny model, relative L2 vs the stock processor). Observed over seeds: one attn1
# module ~2% for fp8/direct-p (E4M3 operands, 3 mantissa bits) and ~14% for direct-p-fp4 (E2M1,
# 1 mantissa bit); the whole transformer output ~0.1% / ~0.5% (attention is one term of the
# residual stream). Bounds leave ~2.5x headroom; a layout or scale bug gives O(1) module error,
# and dropping self-attention altogether moves the model output by ~3-4% (checked below).
MODULE_BOUND = {"fp8": 0.05, "direct-p": 0.05, "direct-p-fp4": 0.3}
MODEL_BOUND = {"fp8": 0.003, "direct-p": 0.003, "direct-p-fp4": 0.015}


@pytest.mark.parametrize("mode", LOW)
def test_low_precision_self_attention_drift(tiny_wan, mode):
    model = tiny_wan(seed=3)
    attn = model.blocks[0].attn1
    g = torch.Generator().manual_seed(4)
    hs = torch.randn(1, 320, 64, generator=g)
    rope = model.rope(torch.zeros(1, 16, 5, 16, 16))
    with torch.no_grad():
        ref = attn(hs, None, None, rope)
        attn.set_processor(WanDirectPAttnProcessor(mode))
        out = attn(hs, None, None, rope)
    assert torch.isfinite(out).all()
    assert 0 < rel_l2(out, ref) < MODULE_BOUND[mode]


@pytest.mark.parametrize("i2v", [False, True], ids=["t2v", "i2v"])
def test_low_precision_model_drift(tiny_wan, i2v):
    model = tiny_wan(i2v=i2v, seed=5)
    args, kw = inputs(i2v, seed=6, frames=5, size=16)
    ref = run(model, args, kw)

    class DropSelfAttention(WanAttnProcessor):
        def __call__(self, attn, hs, ehs=None, *a, **k):
            out = super().__call__(attn, hs, ehs, *a, **k)
            return out * 0 if ehs is None else out

    model.set_attn_processor(DropSelfAttention())
    control = rel_l2(run(model, args, kw), ref)
    for mode in LOW:
        model.set_attn_processor(WanDirectPAttnProcessor(mode))
        out = run(model, args, kw)
        assert torch.isfinite(out).all(), mode
        assert 0 < rel_l2(out, ref) < MODEL_BOUND[mode] < control, (mode, rel_l2(out, ref), control)


# ----------------------------------------------------------------------------- backends
def test_bf16_calls_use_the_users_backend(tiny_wan, monkeypatch):
    model = tiny_wan()
    args, kw = inputs()
    ref = run(model, args, kw)
    math_name = AttentionBackendName._NATIVE_MATH
    calls = []
    real = _AttentionBackendRegistry._backends[math_name]
    monkeypatch.setitem(_AttentionBackendRegistry._backends, math_name,
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    proc = WanDirectPAttnProcessor("direct-p")
    proc._attention_backend = math_name
    model.set_attn_processor(proc)  # one instance on all four modules
    run(model, args, kw)
    assert len(calls) == 2  # the two cross-attention (bf16) calls; self-attention went to direct_p
    assert proc.calls == Counter({("bf16", "diffusers:_native_math", "cross"): 2,
                                  ("direct-p", "reference", "self"): 2})
    # bf16 mode with the "direct_p" backend set explicitly: our dispatcher, in mode bf16.
    seen = []
    monkeypatch.setattr(dispatch, "attention", lambda q, k, v, **a: seen.append(a["mode"]) or sdpa_like_native(q, k, v, **a))
    proc = WanDirectPAttnProcessor("bf16")
    proc._attention_backend = AttentionBackendName("direct_p")
    model.set_attn_processor(proc)
    assert torch.equal(run(model, args, kw), ref)
    assert seen == ["bf16"] * 4


def test_enable_keeps_backend_and_parallel_config(tiny_wan):
    model = tiny_wan()
    marker = object()
    for block in model.blocks:
        block.attn1.processor._attention_backend = AttentionBackendName._NATIVE_MATH
        block.attn1.processor._parallel_config = marker
    enable(model)
    for block in model.blocks:
        assert block.attn1.processor._attention_backend == AttentionBackendName._NATIVE_MATH
        assert block.attn1.processor._parallel_config is marker
        assert block.attn2.processor._parallel_config is None


# ----------------------------------------------------------------------------- call counts
@pytest.mark.parametrize("guard", [None, 110.0], ids=["shiftless", "guard"])
def test_counts_name_the_kernel_that_ran(tiny_wan, monkeypatch, guard):
    """A call is counted under the kernel the op ran for it, FP4 map included: with a GPU kernel
    that refuses the guard's map, guarded calls count as the exact emulation that ran instead."""
    from dataclasses import replace

    from wan_fp4 import reference
    from wan_fp4.kernels import registry

    ran = Counter()

    def stand_in(q, k, v, mode, scale, fp4, return_lse):
        ran["fp4-emulation"] += 1
        out, lse = reference.attention(q, k, v, mode, scale, fp4=fp4, return_lse=True)
        return out, (lse if return_lse else None)

    def shiftless_only(q, k, v, mode, fp4=None):
        return fp4.guard_margin is None, "this stand-in takes shiftless maps only"

    specs = tuple(replace(s, supports=shiftless_only, run=stand_in) if s.name == "fp4-emulation" else s
                  for s in registry.specs())
    monkeypatch.setattr(dispatch, "_capability", lambda device: (9, 0))
    monkeypatch.setattr(registry, "_SPECS", specs)
    model = tiny_wan()
    args, kw = inputs()
    handle = enable(model, "direct-p-fp4", fp4=FP4Params(guard_margin=guard))
    run(model, args, kw)
    fp4_calls = {key: n for key, n in handle.call_counts().items() if key[0] == "direct-p-fp4"}
    ran_name = "fp4-emulation" if guard is None else "emulation"
    assert fp4_calls == {("direct-p-fp4", ran_name): 2}  # self-attention of the two blocks
    assert ran["fp4-emulation"] == (2 if guard is None else 0)
    handle.disable()


# ----------------------------------------------------------------------------- enable / disable
def test_disable_restores_exactly(tiny_wan):
    model = tiny_wan(i2v=True)
    args, kw = inputs(True)
    before = model.attn_processors
    ref = run(model, args, kw)
    handle = enable(model, "direct-p-fp4", cross_attention=True)
    assert not torch.equal(run(model, args, kw), ref)
    assert handle.call_counts()[("direct-p-fp4", "reference")] == 6
    with pytest.raises(RuntimeError, match="already enabled"):
        enable(model)
    disable(model)
    after = model.attn_processors
    assert before.keys() == after.keys() and all(before[k] is after[k] for k in before)
    assert model._diffusers_hook.get_hook("wan_fp4_attention_policy") is None
    assert torch.equal(run(model, args, kw), ref)
    with pytest.raises(RuntimeError, match="not enabled"):
        disable(model)


def test_disable_undoes_processors_set_by_hand(tiny_wan):
    # set_attn_processor(WanDirectPAttnProcessor(...)) is the plain diffusers route; disable() used
    # to answer "not enabled" there. It now puts the stock processor back, keeping the backend.
    model = tiny_wan()
    args, kw = inputs()
    ref = run(model, args, kw)
    proc = WanDirectPAttnProcessor("direct-p")
    proc._attention_backend = AttentionBackendName._NATIVE_MATH  # one instance, set on every module
    model.set_attn_processor(proc)
    assert not torch.equal(run(model, args, kw), ref)
    disable(model)
    stock = list(model.attn_processors.values())
    assert all(type(p) is WanAttnProcessor and p._attention_backend == "_native_math" for p in stock)
    for p in stock:
        p._attention_backend = None
    assert torch.equal(run(model, args, kw), ref)
    with pytest.raises(RuntimeError, match="not enabled"):
        disable(model)


def test_handle_repr_is_one_line(tiny_wan):
    # The handle holds the pipeline: its default repr printed all of it (129-145 lines).
    handle = enable(tiny_wan(), "fp8")
    text = repr(handle)
    assert "\n" not in text and len(text) < 120 and "fp8" in text
    handle.disable()
    assert "disabled" in repr(handle)


def test_enable_validates_arguments(tiny_wan):
    model = tiny_wan()
    with pytest.raises(ValueError, match="mode must be one of"):
        enable(model, "fp6")
    with pytest.raises(ValueError, match="bf16_layers: layer 2 is out of range .* 2 layers"):
        enable(model, bf16_layers=(2,))
    with pytest.raises(ValueError, match=r"layer_modes\[0\]: mode must be one of"):
        enable(model, layer_modes={0: "int8"})
    with pytest.raises(ValueError, match="guard_layers needs guard_margin"):
        enable(model, guard_layers=(1,))
    with pytest.raises(ValueError, match="guard_layers is empty"):
        enable(model, guard_margin=110)
    with pytest.raises(ValueError, match=r"layers \[1\] are in both guard_layers and bf16_layers"):
        enable(model, guard_layers=(1,), guard_margin=110, bf16_layers=(-1,))
    with pytest.raises(TypeError, match="bf16_steps must hold int"):
        enable(model, bf16_steps=("first",))
    with pytest.raises(TypeError, match="fp4 must be a wan_fp4.FP4Params"):
        enable(model, fp4=(1.6, 0.95))
    with pytest.raises(TypeError, match="expected a Wan pipeline or a Wan transformer"):
        enable(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="transformer=Linear"):
        enable(type("Pipe", (), {"transformer": torch.nn.Linear(2, 2)})())
    with pytest.raises(TypeError, match="bf16_steps must be a sequence of int step indices"):
        enable(model, bf16_steps=-1)
    with pytest.raises(TypeError, match="layer_modes must be a dict"):
        enable(model, layer_modes=[(0, "fp8")])
    assert not hasattr(model, "_wan_fp4_handle")  # nothing half-applied
    with pytest.raises(ValueError, match="mode must be one of"):
        WanDirectPAttnProcessor("fp4")


def test_processor_with_a_policy_checks_its_layer_and_fp4():
    # The policy's per-layer modes were skipped without a layer_idx or past its layers, and an
    # fp4 other than the policy's went unused, all silently.
    pol = Policy.build("direct-p", 2, bf16_layers=(0,))
    with pytest.raises(ValueError, match="layer_idx is needed"):
        WanDirectPAttnProcessor(policy=pol)
    with pytest.raises(ValueError, match="layer_idx 2 is out of range for a policy of 2 layers"):
        WanDirectPAttnProcessor(policy=pol, layer_idx=2)
    with pytest.raises(ValueError, match="differs from the policy's"):
        WanDirectPAttnProcessor(policy=pol, layer_idx=1, fp4=FP4Params(affine=(1.5, 1.2)))
    assert WanDirectPAttnProcessor(policy=pol, layer_idx=0, fp4=pol.fp4).mode_for(False)[0] == "bf16"
    assert WanDirectPAttnProcessor(policy=Policy.build("fp8", 2)).mode_for(False)[0] == "fp8"  # no per-layer part


def test_layer_policy_reaches_the_dispatcher(tiny_wan, monkeypatch):
    model = tiny_wan(num_layers=4)
    seen = []
    monkeypatch.setattr(dispatch, "attention",
                        lambda q, k, v, **a: seen.append((a["mode"], a["fp4"].guard_margin)) or sdpa_like_native(q, k, v))
    handle = enable(model, "direct-p", bf16_layers=(0,), layer_modes={1: "fp8"}, guard_layers=(-1,), guard_margin=110)
    run(model, *inputs())
    # Only self-attention reaches our dispatcher (cross stays bf16 on diffusers' backend).
    assert seen == [("fp8", None), ("direct-p", None), ("direct-p-fp4", 110.0)]
    layers = handle.summary()["transformer"]["layers"]
    assert [layers[i]["self"] for i in range(4)] == ["bf16", "fp8", "direct-p", "direct-p-fp4"]
    assert layers[3]["guard_margin"] == 110.0 and all(layers[i]["cross"] == "bf16" for i in range(4))


# ----------------------------------------------------------------------------- steps
def tiny_pipeline(head_dim=32):
    """A tiny WanPipeline built offline: real diffusers classes, a word-level tokenizer, no downloads."""
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanPipeline, WanTransformer3DModel
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast, UMT5Config, UMT5EncoderModel

    words = ["<pad>", "</s>", "<unk>"] + "a cat dog dance negative video".split()
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                        model_max_length=512)
    torch.manual_seed(0)
    text_encoder = UMT5EncoderModel(UMT5Config(
        vocab_size=len(words), d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
        relative_attention_num_buckets=8, feed_forward_proj="gated-gelu", is_encoder_decoder=False,
        use_cache=False)).eval()
    vae = AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True])
    transformer = WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=head_dim, in_channels=16, out_channels=16,
        text_dim=32, freq_dim=32, ffn_dim=64, num_layers=2, rope_max_seq_len=32).eval()
    return WanPipeline(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                       scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0))


def test_bf16_steps_follow_the_pipeline(monkeypatch):
    pipe = tiny_pipeline()
    handle = enable(pipe, "direct-p", bf16_steps=(0, -1))
    per_step = []

    def on_step(p, i, t, kwargs):
        per_step.append(dict(handle.call_counts()))
        handle.reset_counts()
        return kwargs

    pipe(prompt="a cat dance", negative_prompt="negative", height=16, width=16, num_frames=9, num_inference_steps=4,
         guidance_scale=6.0, max_sequence_length=16, generator=torch.Generator().manual_seed(0),
         output_type="latent", callback_on_step_end=on_step)
    bf16_only = {("bf16", "diffusers:native"): 8}  # 2 CFG passes x 2 layers x (self + cross)
    mixed = {("bf16", "diffusers:native"): 4, ("direct-p", "reference"): 4}
    assert per_step == [bf16_only, mixed, mixed, bf16_only]
    disable(pipe)
    assert all(type(p) is WanAttnProcessor for p in pipe.transformer.attn_processors.values())


def test_steps_need_a_step_context(tiny_wan):
    model = tiny_wan()
    enable(model, bf16_steps=(1,))
    with pytest.raises(RuntimeError, match="needs the denoising step"):
        run(model, *inputs())
    with model.cache_context("cond", step_index=0, num_inference_steps=2):
        run(model, *inputs())  # fine
    disable(model)
    enable(model, bf16_steps=(-1,))
    with pytest.raises(RuntimeError, match="gave no num_inference_steps"):
        with model.cache_context("cond", step_index=0):
            pass


def test_step_from_pipeline_without_step_index(tiny_wan, monkeypatch):
    """WanImageToVideoPipeline (0.42.1) enters cache_context without step_index: the step then
    comes from the pipeline's current timestep."""
    model = tiny_wan()
    sched = type("S", (), {"timesteps": torch.tensor([999.0, 700.0, 300.0])})()
    pipe = type("Pipe", (), {"transformer": model, "scheduler": sched, "_current_timestep": None})()
    seen = []
    monkeypatch.setattr(dispatch, "attention", lambda q, k, v, **a: seen.append(a["mode"]) or sdpa_like_native(q, k, v))
    enable(pipe, bf16_steps=(-1,))
    for t in sched.timesteps:
        pipe._current_timestep = t
        with model.cache_context("cond"):
            run(model, *inputs())
    assert seen == ["direct-p"] * 4  # steps 0 and 1, two self-attention layers each; step 2 in bf16


# ----------------------------------------------------------------------------- compile
def test_compile_fullgraph_matches_eager(tiny_wan):
    model = tiny_wan()
    args, kw = inputs()
    enable(model, "direct-p", bf16_steps=(0,))
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    start = time.time()
    for step in range(3):
        with model.cache_context("cond", step_index=step, num_inference_steps=3):
            assert torch.equal(run(compiled, args, kw), run(model, args, kw)), step
    assert time.time() - start < 60


def test_processor_fp4_params_reach_dispatch(tiny_wan, monkeypatch):
    model = tiny_wan()
    seen = []
    monkeypatch.setattr(dispatch, "attention", lambda q, k, v, **a: seen.append(a["fp4"]) or sdpa_like_native(q, k, v))
    fp4 = FP4Params(affine=(1.5, 1.2), guard_margin=100.0)
    model.set_attn_processor(WanDirectPAttnProcessor("direct-p-fp4", fp4=fp4))
    run(model, *inputs())
    assert seen == [fp4, fp4]


# ----------------------------------------------------------------------------- the call path
def test_one_call_reaches_the_kernel_launch_through_five_modules(tiny_wan, monkeypatch):
    """docs/ARCHITECTURE.md's map, measured: an enable()d Wan attention call on an sm_90 GPU hands
    on from the processor through the backend, dispatch and the family's host side to the one
    prebuilt-or-JIT launch, five wan_fp4 modules on the stack when the kernel starts. The GPU is
    stood in: the capability, the stream and the prebuilt shim (which records the stack)."""
    import contextlib
    import sys
    from dataclasses import replace
    from pathlib import Path
    from types import SimpleNamespace

    from wan_fp4.kernels import registry
    from wan_fp4.kernels.sm90 import aot as sm90_aot

    root = Path(dispatch.__file__).resolve().parent
    stacks = []

    def module_of(frame):
        path = Path(frame.f_code.co_filename).resolve()
        return path.relative_to(root).with_suffix("").as_posix() if path.is_relative_to(root) else None

    def shim(*args):
        chain, frame = [], sys._getframe(1)
        while frame is not None:
            name = module_of(frame)
            if name is not None and (not chain or chain[-1] != name):
                chain.append(name)
            frame = frame.f_back
        stacks.append(chain[::-1])
        return 0

    specs = tuple(replace(s, supports=lambda *a: (True, "")) if s.name == "sm90-cute" else s
                  for s in registry.specs())
    monkeypatch.setattr(registry, "_SPECS", specs)
    monkeypatch.setattr(dispatch, "_capability", lambda device: (9, 0))
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # the torch pre-pass on CPU (the path is the subject here)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: SimpleNamespace(cuda_stream=0))
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(sm90_aot.PREBUILT, "launcher", lambda name, expect=None: shim)
    # the stood-in kernel writes nothing: zero-filled outputs keep the next layer's inputs finite
    # (the pre-pass refuses NaN or inf, which an uninitialised output can hold)
    monkeypatch.setattr(torch, "empty", torch.zeros)
    model = tiny_wan()
    args, kw = inputs()
    handle = enable(model, "direct-p")
    run(model, args, kw)
    assert handle.call_counts()[("direct-p", "sm90-cute")] == 2
    assert stacks and all(chain == stacks[0] for chain in stacks)
    assert stacks[0] == ["processor", "backend", "dispatch", "kernels/sm90/host", "kernels/aot"]
    handle.disable()
