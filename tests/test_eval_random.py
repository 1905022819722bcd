"""random:1.3b / random:14b: real configs (counted on the meta device) and the random builder."""
import torch

from wan_fp4.pipelines import random as R
from wan_fp4.pipelines import registered_models


def _meta_params(cfg):
    from diffusers import WanTransformer3DModel

    with torch.device("meta"):
        m = WanTransformer3DModel(**cfg)
    return sum(p.numel() for p in m.parameters()), len(m.blocks)


def test_real_configs_have_the_published_sizes():
    n13, l13 = _meta_params(R.CONFIGS["1.3b"])
    n14, l14 = _meta_params(R.CONFIGS["14b"])
    assert (round(n13 / 1e9, 3), l13) == (1.419, 30)
    assert (round(n14 / 1e9, 3), l14) == (14.288, 40)


def test_registered_as_synthetic():
    models = registered_models()
    for name in ("random:1.3b", "random:14b"):
        assert models[name].synthetic and "RANDOM" in models[name].description


def test_builder_matches_a_fresh_model_in_scale_dtype_and_rope():
    from diffusers import WanTransformer3DModel

    cfg = dict(R.CONFIGS["1.3b"], num_attention_heads=2, num_layers=2, ffn_dim=64, text_dim=64)
    model = R.build_random_transformer(cfg, "cpu", torch.bfloat16, seed=0)
    fresh = WanTransformer3DModel(**cfg)
    params = dict(fresh.named_parameters())
    for name, p in model.named_parameters():
        assert torch.isfinite(p.float()).all(), name
        ref = params[name].float()
        assert abs(p.float().std().item() - ref.std().item()) <= 0.15 * ref.std().item() + 1e-6, name
        keep = any(k in name.split(".") for k in ("time_embedder", "scale_shift_table", "norm1", "norm2", "norm3"))
        assert p.dtype == (torch.float32 if keep else torch.bfloat16), name
    for name, b in fresh.named_buffers():
        assert torch.equal(dict(model.named_buffers())[name], b), name
    x = torch.randn(1, 16, 2, 8, 8, dtype=torch.bfloat16)
    with torch.no_grad():
        out = model(x, torch.tensor([500.0]), torch.randn(1, 8, 64, dtype=torch.bfloat16), return_dict=False)[0]
    assert out.shape == x.shape and torch.isfinite(out.float()).all()


def test_builder_is_seeded():
    cfg = dict(R.CONFIGS["1.3b"], num_attention_heads=2, num_layers=1, ffn_dim=32, text_dim=32)
    a = R.build_random_transformer(cfg, "cpu", torch.bfloat16, seed=3)
    b = R.build_random_transformer(cfg, "cpu", torch.bfloat16, seed=3)
    c = R.build_random_transformer(cfg, "cpu", torch.bfloat16, seed=4)
    wa, wb, wc = (m.blocks[0].attn1.to_q.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)
