"""wan_fp4.attention / kernel_for: validation, CPU dispatch, fallbacks, torch.compile."""
import logging

import pytest
import torch

import wan_fp4
from wan_fp4 import reference
from wan_fp4.eval.metrics import rel_l2


def _qkv(b=1, sq=70, skv=90, h=2, d=64, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, s, h, d, generator=g).to(dtype) for s in (sq, skv, skv))


def _exact(q, k, v, scale):
    """Softmax attention in float64, independent of every wan_fp4 code path."""
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) * scale
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), v.double())


# Relative L2 error against float64 attention on N(0,1) inputs at D = 128: bf16 only rounds the
# output to BF16 (2^-9 relative, bound 1%); the low-precision bounds are tests/test_reference.py's
# BOUNDS (derived there), and their lower ends make sure the mode really quantised.
CPU_BOUNDS = {"bf16": (0.0, 0.01), "fp8": (0.02, 0.09), "direct-p": (0.02, 0.10), "direct-p-fp4": (0.15, 0.45)}


@pytest.mark.parametrize("mode", wan_fp4.MODES)
def test_cpu_attention_is_attention_within_the_modes_bound(mode):
    q, k, v = _qkv(sq=130, skv=300, d=128, seed=1)
    assert wan_fp4.kernel_for(q, mode) == ("sdpa" if mode == "bf16" else "reference")
    out = wan_fp4.attention(q, k, v, mode=mode)
    assert out.dtype == q.dtype and out.shape == q.shape
    low, high = CPU_BOUNDS[mode]
    assert low <= rel_l2(out, _exact(q, k, v, 1 / 128 ** 0.5)) < high


@pytest.mark.parametrize("mode", wan_fp4.MODES[1:])
@pytest.mark.parametrize("return_lse", [False, True])
def test_the_op_hands_scale_and_fp4_map_to_the_kernel(monkeypatch, mode, return_lse):
    """What a registry kernel receives through the custom op on a (stood-in) GPU: the call's
    inputs, mode, scale and FP4 map (affine and guard), and whether the LSE is wanted; what it
    returns is what attention() returns, and last_kernel() names it."""
    from wan_fp4 import dispatch
    from wan_fp4.kernels import registry

    got = []

    def run(q, k, v, mode, scale, fp4, want_lse):
        got.append((q, k, v, mode, scale, fp4, want_lse))
        b, sq, h, _ = q.shape
        return torch.full_like(q, 7.0), (torch.full((b, h, sq), 3.0) if want_lse else None)

    spec = registry.KernelSpec("triton", wan_fp4.MODES[1:], (0, 0), None, lambda *a: (True, ""), run)
    monkeypatch.setattr(registry, "_SPECS", (spec,))
    monkeypatch.setattr(dispatch, "_capability", lambda device: (9, 0))
    q, k, v = _qkv(seed=8)
    fp4 = wan_fp4.FP4Params(affine=(1.5, 1.2), guard_margin=100.0)
    result = wan_fp4.attention(q, k, v, mode=mode, scale=0.3, fp4=fp4, return_lse=return_lse)
    ((gq, gk, gv, gmode, gscale, gfp4, glse),) = got
    assert all(torch.equal(a, b) for a, b in ((gq, q), (gk, k), (gv, v)))
    assert (gmode, gscale, gfp4, glse) == (mode, 0.3, fp4, return_lse)
    out, lse = result if return_lse else (result, None)
    assert torch.equal(out, torch.full_like(q, 7.0)) and dispatch.last_kernel() == "triton"
    assert lse is None or torch.equal(lse, torch.full((1, 2, 70), 3.0))


@pytest.mark.parametrize("mode", wan_fp4.MODES[1:])
def test_on_cpu_the_op_runs_the_reference_with_the_calls_scale_and_map(mode):
    """On CPU the op's kernel is the reference, run with the call's scale and P map, not the
    defaults."""
    q, k, v = _qkv(seed=8)
    fp4 = wan_fp4.FP4Params(affine=(1.5, 1.2))
    out = wan_fp4.attention(q, k, v, mode=mode, scale=0.3, fp4=fp4)
    assert torch.equal(out, reference.attention(q, k, v, mode, 0.3, fp4=fp4))
    assert not torch.equal(out, reference.attention(q, k, v, mode))


def test_return_lse_shapes():
    q, k, v = _qkv(seed=2)
    out, lse = wan_fp4.attention(q, k, v, mode="direct-p", return_lse=True)
    assert out.shape == q.shape and lse.shape == (1, 2, 70) and lse.dtype == torch.float32


@pytest.mark.parametrize("make, exc, words", [
    (lambda q, k, v: (q.float().numpy(), k, v), TypeError, "q must be a torch.Tensor"),
    (lambda q, k, v: (q[0], k, v), ValueError, "q must be 4-d"),
    (lambda q, k, v: (q, k.to(torch.int32), v), TypeError, "k must be bfloat16"),
    (lambda q, k, v: (q, k, v.transpose(1, 3).contiguous().transpose(1, 3)), ValueError, "v must be contiguous"),
    (lambda q, k, v: (q, k, v[:, :10]), ValueError, "k .* and v .* must have the same shape"),
    (lambda q, k, v: (q, k[:, :, :1], v[:, :, :1]), ValueError, "heads of q"),
    (lambda q, k, v: (q[:1].expand(2, -1, -1, -1).contiguous(), k, v), ValueError, "batch of q"),
    (lambda q, k, v: (q.float(), k, v), TypeError, "share a dtype"),
    (lambda q, k, v: (q[:, :0], k, v), ValueError, "q is empty"),
])
def test_bad_inputs_get_clear_errors(make, exc, words):
    q, k, v = _qkv(seed=3)
    with pytest.raises(exc, match=words):
        wan_fp4.attention(*make(q, k, v), mode="direct-p")


@pytest.mark.parametrize("scale", [0.0, -0.125, float("nan"), float("inf")])
def test_scale_must_be_finite_and_positive(scale):
    q, k, v = _qkv(seed=5)
    with pytest.raises(ValueError, match="scale must be a finite positive number"):
        wan_fp4.attention(q, k, v, mode="direct-p", scale=scale)


@pytest.mark.parametrize("kwargs, exc, words", [
    ({"fp4": (1.6, 0.95)}, TypeError, "fp4 must be a wan_fp4.FP4Params"),  # was an AttributeError
    ({"scale": "1/8"}, TypeError, "scale must be a number"),
    # forced bf16 kernels used to return exact attention for a low-precision mode
    ({"kernel": "sdpa"}, ValueError, "sdpa computes bf16 attention only, not mode 'fp8'"),
])
def test_bad_keyword_arguments_get_clear_errors(kwargs, exc, words):
    q, k, v = _qkv(seed=3)
    with pytest.raises(exc, match=words):
        wan_fp4.attention(q, k, v, mode="fp8", **kwargs)
    if "fp4" in kwargs:
        with pytest.raises(exc, match=words):
            wan_fp4.kernel_for(q, "direct-p-fp4", fp4=kwargs["fp4"])  # was silently ignored


@pytest.mark.parametrize("kwargs, exc, words", [
    ({"affine": (float("nan"), 0.95)}, ValueError, "finite with A > 0"),  # gave an all-zero output
    ({"affine": (-1.6, 0.95)}, ValueError, "finite with A > 0"),  # ranked scores backwards
    ({"affine": (1.6,)}, TypeError, "affine must be a pair"),
    ({"guard_margin": float("nan")}, ValueError, "guard_margin must be finite"),  # ran shiftless
    ({"guard_margin": float("inf")}, ValueError, "guard_margin must be finite"),
    ({"guard_margin": "110"}, TypeError, "guard_margin must be a number"),
])
def test_fp4_map_is_checked_when_made(kwargs, exc, words):
    with pytest.raises(exc, match=words):
        wan_fp4.FP4Params(**kwargs)


def test_the_bf16_fallback_keeps_the_low_precision_modes_finite_input_error():
    # an unsupported head dim runs exact bf16, which on CPU turned a NaN query row into zeros
    q, k, v = _qkv(d=258, seed=5)  # not 257: the fallback warns once per message, and a test reads that
    q[0, 3, 1, 0] = float("nan")
    with pytest.raises(ValueError, match="q contains NaN or inf"):
        wan_fp4.attention(q, k, v, mode="direct-p")


def test_unknown_mode_and_kernel():
    q, k, v = _qkv(seed=4)
    with pytest.raises(ValueError, match="mode must be one of"):
        wan_fp4.attention(q, k, v, mode="fp4")
    with pytest.raises(ValueError, match="unknown kernel"):
        wan_fp4.attention(q, k, v, mode="fp8", kernel="magic")
    with pytest.raises(ValueError, match="cannot run this call"):
        wan_fp4.attention(q, k, v, mode="fp8", kernel="sm90-cute")  # no GPU here


def test_unsupported_head_dim_falls_back_to_bf16_visibly(caplog):
    q, k, v = _qkv(d=257, seed=5)  # odd, above 256: e.g. a VAE attention under a global backend
    with caplog.at_level(logging.WARNING, logger="wan_fp4"):
        out = wan_fp4.attention(q, k, v, mode="direct-p")
    assert wan_fp4.kernel_for(q, "direct-p") == "sdpa (bf16 fallback)"
    assert "falling back to exact bf16" in caplog.text
    ref = reference.attention(q.float(), k.float(), v.float(), "bf16")
    assert (out.float() - ref).abs().max() < 2e-2


def test_torch_compile_fullgraph_sees_one_op():
    """Dynamo traces attention as the one custom-op node: kernel selection, validation and the
    reference's Python stay inside the op, out of the graph."""
    q, k, v = _qkv(seed=6)

    def f(q, k, v):
        return wan_fp4.attention(q, k, v, mode="direct-p") * 2

    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, backend=capture)
    assert torch.equal(compiled(q, k, v), f(q, k, v))
    assert len(graphs) == 1
    calls = [n.target for n in graphs[0].graph.nodes if n.op in ("call_function", "call_method")]
    op = torch.ops.wan_fp4.attention
    assert sum(t in (op, op.default) for t in calls) == 1, calls
    assert len(calls) == 2, calls  # the op and the * 2: nothing of the selection was traced


@pytest.mark.parametrize("name", ["triton", "sm90-cute", "sm100-cute", "fp4-emulation"])
def test_every_kernel_answers_the_support_question(name):
    # dispatch asks every kernel the same question, FP4 map included; on CPU each says no and why
    from wan_fp4.dispatch import kernel_available

    q, k, v = _qkv(d=128, seed=7)
    for mode in wan_fp4.MODES[1:]:
        ok, why = kernel_available(name, q, k, v, mode, wan_fp4.FP4Params(guard_margin=110.0))
        assert isinstance(ok, bool) and isinstance(why, str)
        if name != "triton":  # the Triton kernels run on CPU under the interpreter
            assert not ok and why


def test_custom_op_fake_kernel_matches_the_real_op_for_strided_inputs():
    # A (B, H, S, D) tensor transposed to diffusers' layout has unit last stride but other strides
    # than its shape's contiguous ones; the op's fake (meta) result must match the real one, or
    # torch.compile with inductor rejects the graph.
    import math

    x = torch.randn(1, 2, 64, 32)
    q, k, v = (x.transpose(1, 2), torch.randn(1, 2, 64, 32).transpose(1, 2), torch.randn(1, 2, 64, 32).transpose(1, 2))
    for mode, kernel in (("fp8", "reference"), ("bf16", "sdpa")):
        args = (q, k, v, mode, kernel, 1 / math.sqrt(32), 1.6, 0.95, math.nan)
        torch.library.opcheck(torch.ops.wan_fp4.attention.default, args)
        torch.library.opcheck(torch.ops.wan_fp4.attention_lse.default, args)


def test_gpu_without_a_kernel_falls_back_visibly(monkeypatch, caplog):
    from wan_fp4 import dispatch

    monkeypatch.setattr(dispatch, "_capability", lambda device: (8, 0))  # an A100
    q = torch.zeros(1, 10, 2, 64)
    with caplog.at_level(logging.WARNING, logger="wan_fp4"):
        assert dispatch.kernel_for(q, "direct-p", q, q) == "emulation"
    assert "no GPU kernel for mode 'direct-p' on sm_80" in caplog.text


@pytest.mark.parametrize("cap, mode, names", [
    ((9, 0), "direct-p", ["sm90-cute", "triton"]), ((9, 0), "fp8", ["sm90-cute", "triton"]),
    ((8, 9), "fp8", ["triton"]), ((12, 0), "direct-p", ["triton"]), ((10, 0), "direct-p", ["triton"]),
    ((8, 0), "direct-p", []), ((10, 0), "direct-p-fp4", ["sm100-cute", "fp4-emulation"]),
    ((10, 3), "direct-p-fp4", ["sm100-cute", "fp4-emulation"]), ((9, 0), "direct-p-fp4", ["fp4-emulation"]),
    ((7, 5), "direct-p-fp4", ["fp4-emulation"]), ((12, 0), "bf16", []),
])
def test_registry_offers_each_gpu_its_kernels_in_order_of_preference(cap, mode, names):
    """The specialised kernel of a GPU generation first, then the portable one; an sm_100a kernel
    only on sm_10x, the sm_90a one only on sm_9x (its `supports` then names any minor it refuses)."""
    from wan_fp4.kernels import registry

    assert [s.name for s in registry.specs() if s.offered(cap, mode)] == names
    assert [s.name for s in registry.specs()] == list(registry.NAMES)


def test_a_family_without_its_stack_refuses_with_the_reason():
    from wan_fp4.kernels import registry

    spec = registry.unavailable("triton", ("fp8",), (8, 9), "triton could not be imported: no module")
    q = torch.zeros(1, 4, 1, 64)
    ok, why = spec.supports(q, q, q, "fp8")
    assert spec.offered((9, 0), "fp8") and not ok and "could not be imported" in why
    with pytest.raises(RuntimeError, match="unavailable"):
        spec.run(q, q, q, "fp8", 0.1, None, False)


def test_a_forced_kernel_is_asked_about_its_head_dims(monkeypatch):
    """Forcing a kernel skips selection, not the kernel's own question: the FP4 emulation refuses
    an odd head dim whatever the device."""
    from wan_fp4 import dispatch

    q = torch.zeros(1, 4, 1, 63)
    ok, why = dispatch.kernel_available("fp4-emulation", q, q, q, "direct-p-fp4")
    assert not ok and "head dim 63" in why


def test_fa4_is_only_chosen_for_head_dims_it_accepts():
    """flash-attn-4 asserts on head dims outside its range; bf16 then goes to SDPA instead."""
    from wan_fp4.dispatch import fa4_head_dim_ok

    assert fa4_head_dim_ok(128, 9) and fa4_head_dim_ok(256, 9) and fa4_head_dim_ok(64, 10)
    assert fa4_head_dim_ok(256, 10) and not fa4_head_dim_ok(192, 10)
    assert not fa4_head_dim_ok(80 + 4, 9) and not fa4_head_dim_ok(264, 9) and not fa4_head_dim_ok(4, 9)


def test_exact_lse_chunks_are_bounded_and_exact(monkeypatch):
    """The bf16 LSE (ring attention's fallback) in memory-bounded query chunks equals the
    one-shot logsumexp, whatever the chunk size the bound gives."""
    from wan_fp4 import dispatch

    g = torch.Generator().manual_seed(4)
    q, k = torch.randn(2, 300, 3, 64, generator=g), torch.randn(2, 257, 3, 64, generator=g)
    want = torch.logsumexp(torch.einsum("bqhd,bkhd->bhqk", q, k) * 0.125, dim=-1)
    monkeypatch.setattr(dispatch, "_LSE_CHUNK_ELEMENTS", 2 * 3 * 257 * 7)  # 7-row chunks
    torch.testing.assert_close(dispatch._lse_exact(q, k, 0.125), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["direct-p", "bf16"])
def test_backward_says_inference_only(mode):
    # torch's raw "no autograd formula was registered" used to be the only answer
    q, k, v = (t.float().requires_grad_() for t in _qkv())
    out = wan_fp4.attention(q, k, v, mode)
    with pytest.raises(NotImplementedError, match="inference-only"):
        out.sum().backward()
    out, lse = wan_fp4.attention(q, k, v, mode, return_lse=True)
    with pytest.raises(NotImplementedError, match="inference-only"):
        lse.sum().backward()
