"""wan_fp4.eval.row_max_moves: the trigger counts follow the two rules on constructed scores."""
import pytest
import torch

from wan_fp4.eval.row_max_moves import row_max_moves


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
