"""The "direct_p" diffusers attention backend: registration, routing, refusals, context-parallel plumbing."""
import pytest
import torch
import diffusers
from diffusers.models import attention_dispatch as ad
from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry, dispatch_attention_fn

from wan_fp4 import backend, dispatch, reference
from wan_fp4.eval.metrics import rel_l2
from wan_fp4.backend import DIRECT_P, _cp_backward_op, _cp_forward_op, backend_mode, set_backend_mode


@pytest.fixture
def spy(monkeypatch):
    """Records the mode of every call that reaches wan_fp4.dispatch.attention."""
    modes = []
    real = dispatch.attention

    def attention(q, k, v, **kw):
        modes.append(kw["mode"])
        return real(q, k, v, **kw)

    monkeypatch.setattr(dispatch, "attention", attention)
    return modes


@pytest.fixture(autouse=True)
def keep_global_backend():
    before = _AttentionBackendRegistry._active_backend
    yield
    _AttentionBackendRegistry.set_active_backend(before)


def qkv(b=1, s=40, h=2, d=32, skv=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, s, h, d, generator=g), torch.randn(b, skv or s, h, d, generator=g),
            torch.randn(b, skv or s, h, d, generator=g))


def test_registered_in_diffusers():
    assert AttentionBackendName("direct_p") is DIRECT_P is AttentionBackendName.DIRECT_P
    assert "direct_p" in {m.value for m in AttentionBackendName.__members__.values()}
    assert _AttentionBackendRegistry._backends[DIRECT_P] is backend._direct_p_attention
    assert _AttentionBackendRegistry._is_context_parallel_available(DIRECT_P)


def test_dispatch_uses_the_default_mode(spy):
    q, k, v = qkv()
    out = dispatch_attention_fn(q, k, v, backend=DIRECT_P)
    assert torch.equal(out, reference.attention(q, k, v, "direct-p"))
    with backend_mode("fp8"):
        dispatch_attention_fn(q, k, v, backend="direct_p")
    dispatch_attention_fn(q, k, v, backend="direct_p", attention_kwargs={"mode": "bf16"})
    assert spy == ["direct-p", "fp8", "bf16"]
    assert backend.get_backend_mode()[0] == "direct-p"


def test_set_backend_mode_validates_and_returns_previous():
    with pytest.raises(ValueError, match="mode must be one of"):
        set_backend_mode("fp4")
    with pytest.raises(TypeError, match="fp4 must be a wan_fp4.FP4Params"):
        set_backend_mode("direct-p-fp4", fp4=(1.5, 1.2))
    previous = set_backend_mode("direct-p-fp4")
    try:
        assert backend.get_backend_mode()[0] == "direct-p-fp4"
    finally:
        set_backend_mode(*previous)
    assert backend.get_backend_mode() == previous


@pytest.mark.parametrize("kwargs, message", [
    ({"attn_mask": torch.ones(1, 1, 40, 40, dtype=torch.bool)}, "does not take attn_mask"),
    ({"dropout_p": 0.1}, "dropout_p must be 0"),
    ({"is_causal": True}, "is_causal"),
    ({"enable_gqa": True}, "enable_gqa"),
])
def test_refuses_what_it_cannot_compute(kwargs, message):
    q, k, v = qkv()
    with pytest.raises(ValueError, match=message):
        dispatch_attention_fn(q, k, v, backend=DIRECT_P, **kwargs)


def test_model_set_attention_backend_routes_wan(tiny_wan, spy):
    model = tiny_wan()
    x, ehs = torch.randn(1, 16, 3, 8, 8), torch.randn(1, 16, 32)
    with torch.no_grad():
        ref = model(x, torch.tensor([500]), ehs, return_dict=False)[0]
        backend.set_attention_backend(model, "direct_p")
        out = model(x, torch.tensor([500]), ehs, return_dict=False)[0]
    assert spy == ["direct-p"] * 4  # the stock processor sends self and cross attention alike
    assert 0 < rel_l2(out, ref) < 0.01
    # diffusers' own set_attention_backend also moves the global backend; our helper does not.
    assert _AttentionBackendRegistry._active_backend == AttentionBackendName.NATIVE


def test_diffusers_set_and_reset_leave_nothing_behind(tiny_wan, spy):
    """model.set_attention_backend("direct_p") then reset_attention_backend() used to leave
    diffusers' global backend at direct_p: a later "stock" run silently ran direct-p."""
    model, other = tiny_wan(), tiny_wan(seed=1)
    x, ehs = torch.randn(1, 16, 3, 8, 8), torch.randn(1, 16, 32)
    run = lambda m: m(x, torch.tensor([500]), ehs, return_dict=False)[0]  # noqa: E731
    with torch.no_grad():
        ref, ref_other = run(model), run(other)
        model.set_attention_backend("direct_p")
        assert _AttentionBackendRegistry._active_backend == AttentionBackendName.NATIVE
        assert not torch.equal(run(model), ref) and spy == ["direct-p"] * 4
        assert torch.equal(run(other), ref_other)  # no leak into other models meanwhile
        model.reset_attention_backend()
        assert torch.equal(run(model), ref) and len(spy) == 4
    assert _AttentionBackendRegistry._active_backend == AttentionBackendName.NATIVE
    # other backends keep diffusers' behaviour
    model.set_attention_backend("_native_math")
    assert _AttentionBackendRegistry._active_backend == AttentionBackendName._NATIVE_MATH


def test_context_manager_routes_and_restores(tiny_wan, spy):
    model = tiny_wan()
    x, ehs = torch.randn(1, 16, 3, 8, 8), torch.randn(1, 16, 32)
    with torch.no_grad(), diffusers.attention_backend("direct_p"), backend_mode("fp8"):
        model(x, torch.tensor([500]), ehs, return_dict=False)
    assert spy == ["fp8"] * 4
    assert _AttentionBackendRegistry._active_backend == AttentionBackendName.NATIVE


def test_non_wan_model(spy):
    from diffusers import FluxTransformer2DModel

    torch.manual_seed(0)
    model = FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                   attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                   pooled_projection_dim=32, axes_dims_rope=(4, 4, 8)).eval()
    args = (torch.randn(1, 16, 4), torch.randn(1, 8, 32), torch.randn(1, 32), torch.tensor([0.5]),
            torch.zeros(16, 3), torch.zeros(8, 3))
    with torch.no_grad():
        ref = model(*args, return_dict=False)[0]
        backend.set_attention_backend(model, "direct_p")
        with backend_mode("bf16"):  # on CPU: the FP32 reference, equal to SDPA to rounding
            out = model(*args, return_dict=False)[0]
    assert spy == ["bf16"] * 2
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- context parallelism
def test_forward_op_contract_for_templated_attention():
    """diffusers' TemplatedRing/UlyssesAttention call forward_op positionally and, for the ring,
    with return_lse=True, expecting out (B,S,H,D) and lse (B,S,H)."""
    q, k, v = qkv(b=2, s=40, skv=24)
    op = lambda *a, **kw: _cp_forward_op(*a, **kw, mode="bf16", fp4=None)
    out, lse = op(None, q, k, v, None, 0.0, False, None, False, True, _save_ctx=True, _parallel_config=None)
    assert out.shape == q.shape and lse.shape == (2, 40, 2) and lse.dtype == torch.float32
    exact = torch.logsumexp(torch.einsum("bshd,bthd->bhst", q, k) / 32 ** 0.5, dim=-1).transpose(1, 2)
    torch.testing.assert_close(lse, exact, rtol=1e-5, atol=1e-5)
    assert op(None, q, k, v, None, 0.0, False, None, False, False).shape == q.shape
    with pytest.raises(NotImplementedError, match="inference-only"):
        _cp_backward_op(None, out)


@pytest.mark.parametrize("mode", ["bf16", "fp8", "direct-p", "direct-p-fp4"])
def test_ring_merge_of_key_chunks(mode):
    """Ring attention merges per-chunk (out, lse) as TemplatedRingAttention does; keys whose mean
    differs between chunks check that K smoothing does not shift the LSE. The merged result must be
    as close to exact attention as the single-device run (chunks quantise on their own, so not equal)."""
    q, k, v = qkv(s=256, seed=1)
    k[:, 128:] += torch.randn(1, 1, 2, 32, generator=torch.Generator().manual_seed(2))
    exact = reference.attention(q, k, v, "bf16")
    full = _cp_forward_op(None, q, k, v, mode=mode, fp4=None)
    parts = [_cp_forward_op(None, q, k[:, i:i + 128], v[:, i:i + 128], return_lse=True, mode=mode, fp4=None)
             for i in (0, 128)]
    (o1, l1), (o2, l2) = parts
    merged = o1 - torch.sigmoid(l2 - l1).unsqueeze(-1) * (o1 - o2)
    err_merged, err_full = rel_l2(merged, exact), rel_l2(full, exact)
    assert err_merged < 1.25 * err_full + 1e-6, (err_merged, err_full)


def test_backend_hands_parallel_config_to_templated_attention(monkeypatch):
    seen = {}

    def fake_templated(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, return_lse, *,
                       forward_op, backward_op, _parallel_config):
        seen.update(config=_parallel_config, backward=backward_op)
        return forward_op(None, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, return_lse,
                          _parallel_config=_parallel_config)

    monkeypatch.setattr(ad, "_templated_context_parallel_attention", fake_templated)
    q, k, v = qkv()
    config = object()
    out = dispatch_attention_fn(q, k, v, backend=DIRECT_P, parallel_config=config,
                                attention_kwargs={"mode": "fp8"})
    assert seen["config"] is config and seen["backward"] is _cp_backward_op
    assert torch.equal(out, reference.attention(q, k, v, "fp8"))


def test_enable_parallelism_accepts_direct_p(tiny_wan):
    """diffusers refuses set_attention_backend for a backend without context-parallel support once
    processors carry a _parallel_config; ours passes that check."""
    model = tiny_wan()
    for m in model.modules():
        if hasattr(m, "processor"):
            m.processor._parallel_config = object()
    backend.set_attention_backend(model, "direct_p")
    with pytest.raises(ValueError, match="does not support context parallelism"):
        model.set_attention_backend("_native_math")
