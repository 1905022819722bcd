"""wan_fp4.eval.local_stats: direct-p with local statistics, against today's numerics and exact attention."""
import pytest
import torch

from wan_fp4 import reference
from wan_fp4.eval.local_stats import local_direct_p, v_families, variant_errors


def _qkv(s, seed, h=2, d=64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, s, h, d, generator=g) for _ in range(3)]


def test_today_is_the_reference_bit_for_bit():
    q, k, v = _qkv(300, 1)  # not a multiple of the 128-key tile
    k = k + 3.0 * torch.randn(64)
    assert torch.equal(local_direct_p(q, k, v, "today"), reference.direct_p_headroom(q, k, v, 3.0)[0])


def test_first_block_mean_is_the_mean_on_one_block():
    q, k, v = _qkv(100, 2)
    assert torch.equal(local_direct_p(q, k, v, "first-block K mean"), local_direct_p(q, k, v, "today"))


def test_equal_block_and_channel_scales_give_the_same_output():
    # every channel and every 128-key block reaches |v| = 3 and nothing more: one power of two both ways
    q, k, v = _qkv(384, 3)
    v = v.clamp(-2.9, 2.9)
    v[:, ::128] = 3.0
    assert torch.equal(local_direct_p(q, k, v, "local"), local_direct_p(q, k, v, "first-block K mean"))


@pytest.mark.parametrize("binades", [(0, 1, -1, 2), (0, -2, 3, -1)])
def test_block_shifts_are_compensated(binades):
    # blocks scaled by powers of two: a shift of the wrong sign or size would put the error far off
    q, k, v = _qkv(4 * 128 - 17, 4)
    factor = torch.exp2(torch.tensor(binades, dtype=torch.float32)).repeat_interleave(128)[: v.shape[1]]
    v = v * factor[None, :, None, None]
    e = variant_errors(q, k, v)
    assert e["local"] < 1.5 * e["today"] < 0.15
    assert e["block-channel V"] < 1.5 * e["today"]


def test_v_families_and_bad_inputs():
    _, _, v = _qkv(256, 5)
    fams = v_families(v, generator=torch.Generator().manual_seed(0))
    assert set(fams) == {"N(0,1)", "channel outliers", "token outliers", "large mean", "drifting scale"}
    assert all(t.shape == v.shape for t in fams.values())
    with pytest.raises(ValueError, match="variant"):
        local_direct_p(v, v, v, "global")
    wide = v * torch.exp2(torch.tensor([0.0, 9.0])).repeat_interleave(128)[None, :, None, None]
    with pytest.raises(ValueError, match="binades"):
        local_direct_p(v, v, wide, "local")


def test_block_channel_scales_equal_to_the_channel_scales_give_the_same_output():
    # every 128-key block reaches each channel's maximum over all keys: the scales are the same
    # powers of two both ways, and scaling each tile's partial by one is exact
    q, k, v = _qkv(300, 6)
    v = v.clamp(-2.9, 2.9)
    v[:, ::128] = 3.0 * torch.sign(torch.randn(v[:, ::128].shape, generator=torch.Generator().manual_seed(1)))
    assert torch.equal(local_direct_p(q, k, v, "block-channel V"), local_direct_p(q, k, v, "first-block K mean"))


@pytest.mark.parametrize("seed", [0, 1])
def test_block_channel_scales_follow_each_block_and_channel(seed):
    # V scaled by its own power of two per 128-key block and channel (down to 2^-6): a scale applied
    # to the wrong tile or channel would put the error far off; done right it loses nothing against
    # one scale per channel over all keys
    q, k, v = _qkv(4 * 128 - 17, 8 + seed)
    g = torch.Generator().manual_seed(seed)
    factor = torch.exp2(torch.randint(-6, 1, (4, 64), generator=g).float()).repeat_interleave(128, dim=0)
    v = v * factor[None, : v.shape[1], None, :]
    e = variant_errors(q, k, v)
    assert e["block-channel V"] <= 1.05 * e["today"] < 0.1
