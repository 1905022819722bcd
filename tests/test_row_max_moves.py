"""wan_fp4.eval.row_max_moves: the trigger counts follow the two rules on constructed scores."""
import pytest
import torch

from wan_fp4.eval.row_max_moves import headroom_error, row_max_moves


def _ramp(n_tiles, step):
    """q = e0 and key j's first channel = step * (j // 128): every row's raw scores rise by `step`
    from one key tile to the next, all keys of a tile equal."""
    s, d = 128 * n_tiles, 128
    q = torch.zeros(1, 70, 1, d)
    q[..., 0] = 1.0
    k = torch.zeros(1, s, 1, d)
    k[0, :, 0, 0] = step * (torch.arange(s) // 128).float()
    return q, k, torch.randn(1, s, 1, d)


def test_rising_scores_move_the_exact_max_every_tile():
    q, k, v = _ramp(6, 1.0)
    r = row_max_moves(q, k, v)
    assert r["tiles"] == 6 and r["rows"] == 70
    assert r["row_rate"] == 1.0 and r["warp_rate"] == 1.0 and r["warp_group_rate"] == 1.0


def test_falling_scores_move_it_only_on_the_first_tile():
    q, k, v = _ramp(6, -1.0)
    r = row_max_moves(q, k, v)
    assert r["row_rate"] == pytest.approx(1 / 6)
    assert r["warp_rate"] == pytest.approx(1 / 6)


def test_slack_keeps_the_reference_through_small_rises_only():
    # a raw rise of 3.92 (4 once K is quantised) per tile is 4 * c = 0.51 log2 units, ~4 codes:
    # a top byte of 126 absorbs the first rise after a refresh (t ~ 124), not the second (~128)
    q, k, v = _ramp(7, 3.92)
    slack = row_max_moves(q, k, v, top=126)
    exact = row_max_moves(q, k, v)
    assert exact["row_rate"] == 1.0
    assert slack["row_rate"] == pytest.approx(4 / 7)  # tiles 0, 2, 4, 6
    # the rows past S_q's 70 pad the last warp group and never trigger; the group rate counts groups
    assert slack["warp_group_rate"] == pytest.approx(4 / 7)


def test_top_outside_the_codes_is_refused():
    q, k, v = _ramp(2, 1.0)
    with pytest.raises(ValueError, match="top must be"):
        row_max_moves(q, k, v, top=127)


def test_headroom_refreshes_when_a_code_passes_126_and_lands_the_max_below_it():
    # rises of 0.51 log2 units (about 4.1 codes) per tile; headroom 1 puts a refreshed row's largest
    # code at 112: 116.1, 120.2 and 124.3 on the next three tiles (kept: E4M3 holds codes up to
    # 126), 128.4 on the fourth (refresh, back to 112), then 116.1 and 120.2: tiles 0 and 4 trigger
    q, k, v = _ramp(7, 3.92)
    assert row_max_moves(q, k, v, headroom=1.0)["row_rate"] == pytest.approx(2 / 7)
    with pytest.raises(ValueError, match="headroom must be"):
        row_max_moves(q, k, v, headroom=-1.0)
    with pytest.raises(ValueError, match="replaces top"):
        row_max_moves(q, k, v, headroom=1.0, top=126)


def test_headroom_codes_follow_the_rule_row_by_row():
    from wan_fp4 import reference

    g = torch.Generator().manual_seed(5)
    s_raw = torch.randn(3, 128, generator=g) * 40.0
    qk = torch.full((3,), 0.02)
    z_max = (s_raw * qk.unsqueeze(-1)).amax(dim=-1)
    # row 0: no reference yet; row 1: a reference far above (codes low, kept); row 2: far below
    m = torch.tensor([-float("inf"), float(z_max[1]) + 3.0, float(z_max[2]) - 2.0])
    t, m_new, moved = reference.headroom_codes(s_raw, qk, m, 1.5)
    assert moved.tolist() == [True, False, True]
    assert m_new[0] == z_max[0] + 1.5 and m_new[1] == m[1]
    assert torch.equal(t[1], reference.direct_p_t(s_raw[1:2], qk[1:2], m[1:2])[0])
    # a refreshed row's largest code lands at 120 - 8 * 1.5 (to FP32 rounding), every code moved alike
    assert torch.round(t.amax(dim=-1)).tolist() == [108.0, torch.round(t[1].amax()).item(), 108.0]
    assert torch.round(t[1].amax()) < 120


def test_headroom_error_is_close_to_the_running_max():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 300, 2, 64, generator=g) for _ in range(3))
    two = headroom_error(q, k, v, 2.0, rows=130)
    # other rounding of the codes, about as close to exact attention as the running max
    assert 0.0 < two["vs_running_max"] < 0.06 and two["vs_exact"] < 1.1 * two["running_max_vs_exact"]


def test_direct_p_is_the_headroom_rule_and_none_is_the_running_max():
    from wan_fp4 import reference
    from wan_fp4.modes import DIRECT_P_HEADROOM, DIRECT_P_SLOPE

    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 200, 1, 64, generator=g) for _ in range(3))
    direct_p = reference.attention(q, k, v, "direct-p")
    rule = reference._fp8_attention(q, k, v, 0.125, True, DIRECT_P_HEADROOM / DIRECT_P_SLOPE)[0]
    assert torch.equal(rule.to(direct_p.dtype), direct_p)
    running = reference.direct_p_headroom(q, k, v, None)[0]
    assert torch.equal(reference._fp8_attention(q, k, v, 0.125, True, None)[0].to(running.dtype), running)
    assert not torch.equal(running, direct_p)  # the codes round differently
    with pytest.raises(ValueError, match="headroom applies to direct-p only"):
        reference._fp8_attention(q, k, v, 0.125, False, headroom=1.0)


def test_input_families_are_the_five_named_ones_and_keep_the_shapes():
    from wan_fp4.eval.row_max_moves import input_families

    g = torch.Generator().manual_seed(6)
    q, k = (torch.randn(1, 50, 2, 64, generator=g) for _ in range(2))
    fams = input_families(q, k, generator=g)
    assert list(fams) == ["N(0,1)", "logit std ~6", "channel outliers", "large mean on K", "huge logits"]
    for qq, kk in fams.values():
        assert qq.shape == q.shape and kk.shape == k.shape
    # four channels of q and k twenty times larger, the same four in both
    ratio = torch.round(fams["channel outliers"][0] / q)
    assert sorted(set(ratio.flatten().tolist())) == [1.0, 20.0]
    assert torch.equal(torch.round(fams["channel outliers"][1] / k), ratio)
    assert int((ratio[0, 0, 0] == 20.0).sum()) == 4


def test_rates_after_the_first_tile_leave_out_its_trigger():
    rising, falling = row_max_moves(*_ramp(6, 1.0)), row_max_moves(*_ramp(6, -1.0))
    assert rising["row_rate_after_first"] == 1.0 and rising["warp_group_rate_after_first"] == 1.0
    assert falling["row_rate_after_first"] == 0.0 and falling["warp_rate_after_first"] == 0.0


def test_pooled_moves_counts_the_headroom_rule_over_calls_of_one_shape():
    from wan_fp4.eval.row_max_moves import pooled_moves

    # rises of 40 raw (5.1 log2 units, 41 codes) per tile pass 126 from a refreshed 96 every tile;
    # falling scores never move the reference after the first tile
    rising, falling = _ramp(4, 40.0), _ramp(4, -40.0)
    assert pooled_moves([rising])["row_rate_after_first"] == 1.0
    assert pooled_moves([falling])["warp_rate_after_first"] == 0.0
    both = pooled_moves([rising, falling])
    assert both["calls"] == 2 and both["tiles"] == 4 and both["rows"] == 70
    assert both["row_rate_after_first"] == 0.5 and both["warp_group_rate_after_first"] == 0.5
    assert both["row_rate"] == pytest.approx((1.0 + 1 / 4) / 2)
    with pytest.raises(ValueError, match="of one shape"):
        pooled_moves([rising, _ramp(3, 40.0)])
    with pytest.raises(ValueError, match="of one shape"):
        pooled_moves([])
