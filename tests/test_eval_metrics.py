"""Metrics on inputs whose answers are known in closed form."""
import math

import numpy as np
import pytest
import torch

from wan_fp4.eval import metrics as M


def test_cosine_and_rel_l2_known_values():
    ref = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert M.cosine(ref, ref) == 1.0 and M.rel_l2(ref, ref) == 0.0
    assert M.cosine(-ref, ref) == -1.0
    assert M.rel_l2(ref * 1.1, ref) == pytest.approx(0.1, rel=1e-12)
    assert M.cosine(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])) == pytest.approx(0.0, abs=1e-15)
    assert M.max_abs(torch.tensor([1.0, 2.5]), torch.tensor([1.0, 2.0])) == 0.5


def test_compare_flags_non_finite_and_rejects_bad_inputs():
    out = M.compare(torch.tensor([float("nan"), 1.0]), torch.tensor([1.0, 1.0]))
    assert out["finite"] is False and math.isnan(out["rel_l2"])
    with pytest.raises(ValueError, match="shapes must match"):
        M.compare(torch.ones(3), torch.ones(4))
    with pytest.raises(ValueError, match="all zeros"):
        M.rel_l2(torch.ones(2), torch.zeros(2))
    # same size, other layout (e.g. a transposed output): an error, not a silently wrong number
    with pytest.raises(ValueError, match="shapes differ"):
        M.rel_l2(torch.ones(2, 3), torch.ones(3, 2))


def test_identical_tensors_give_exact_cosine_one():
    x = torch.randn(4097, generator=torch.Generator().manual_seed(3))
    assert M.cosine(x, x.clone()) == 1.0 and M.rel_l2(x.bfloat16(), x.bfloat16()) == 0.0


def test_trajectory_drift_per_step():
    ref = [torch.ones(4, dtype=torch.float64) * (i + 1) for i in range(3)]
    run = [r * (1 + 0.01 * i) for i, r in enumerate(ref)]
    traj = M.trajectory_drift(run, ref)
    assert [t["step"] for t in traj] == [1, 2, 3]
    assert [t["rel_l2"] for t in traj] == pytest.approx([0.0, 0.01, 0.02], abs=1e-12)
    with pytest.raises(ValueError, match="length"):
        M.trajectory_drift(run[:2], ref)


def test_psnr_of_known_noise_level():
    frames = np.full((3, 16, 16, 3), 0.5)
    noisy = frames.copy()
    noisy[..., 0] += 0.1  # one channel off by 0.1: MSE = 0.01 / 3
    p = M.psnr(noisy, frames)
    assert p["mean"] == pytest.approx(10 * math.log10(3 / 0.01), rel=1e-9)
    assert len(p["per_frame"]) == 3
    assert M.psnr(frames, frames)["mean"] == math.inf


def test_ssim_identical_is_one_and_degrades_with_noise():
    g = torch.Generator().manual_seed(0)
    frames = torch.rand(2, 32, 32, 3, generator=g, dtype=torch.float64)
    assert M.ssim(frames, frames)["mean"] == pytest.approx(1.0, abs=1e-12)
    light = (frames + 0.02 * torch.randn(frames.shape, generator=g, dtype=torch.float64)).clamp(0, 1)
    heavy = (frames + 0.3 * torch.randn(frames.shape, generator=g, dtype=torch.float64)).clamp(0, 1)
    s_light, s_heavy = M.ssim(light, frames)["mean"], M.ssim(heavy, frames)["mean"]
    assert 1.0 > s_light > s_heavy > 0.0


def test_ssim_matches_direct_formula_on_constant_frames():
    # Constant frames a and b: variances and covariance vanish, SSIM = (2ab + C1) / (a^2 + b^2 + C1).
    a, b = 0.3, 0.5
    x = np.full((1, 20, 20, 1), a)
    y = np.full((1, 20, 20, 1), b)
    c1 = (M.SSIM_K1 * 1.0) ** 2
    assert M.ssim(x, y)["mean"] == pytest.approx((2 * a * b + c1) / (a * a + b * b + c1), rel=1e-9)


def test_gaussian_window_and_frame_layouts():
    g = M.gaussian_window(11, 1.5)
    assert g.sum().item() == pytest.approx(1.0) and torch.argmax(g).item() == 5
    with pytest.raises(ValueError, match="odd"):
        M.gaussian_window(10)
    x = torch.rand(2, 3, 16, 16)
    assert M.ssim(x, x, channels_last=False)["mean"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="channels"):
        M.ssim(torch.rand(2, 16, 16, 7), torch.rand(2, 16, 16, 7))
    with pytest.raises(ValueError, match="differ in shape"):
        M.psnr(torch.rand(2, 16, 16, 3), torch.rand(3, 16, 16, 3))
