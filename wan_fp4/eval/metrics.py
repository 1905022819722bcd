"""Distances between a run and its control: latents (cosine, relative L2, per-step trajectory)
and decoded frames (PSNR, SSIM).

Latent metrics are computed in float64 on the device of `x` (`ref` moves there), so a check on a
GPU output does not copy it to the host; this module is the one definition of cosine and relative
L2 that the kernels' checks, benchmarks and tests use. Frame metrics take frames in [0, 1], laid out
(F, H, W, C) as diffusers' `output_type="np"` returns them (a leading batch axis of 1 is dropped;
(F, C, H, W) tensors are accepted with `channels_last=False`).
"""
from __future__ import annotations

import math

import numpy as np
import torch

# SSIM constants of Wang et al. (2004): 11x11 gaussian window, sigma 1.5, K1 0.01, K2 0.03.
SSIM_WINDOW = 11
SSIM_SIGMA = 1.5
SSIM_K1 = 0.01
SSIM_K2 = 0.03


def _tensor(x, name):
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(np.asarray(x))
    if x.numel() == 0:
        raise ValueError(f"{name} is empty")
    return x.detach()


def _pair(x, ref):
    """x and ref flattened to float64 on x's device; their shapes must be equal, not just their sizes
    (a transposed layout of the same size would otherwise compare silently wrong)."""
    a, b = _tensor(x, "x"), _tensor(ref, "ref")
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: x {tuple(a.shape)} vs ref {tuple(b.shape)}; shapes must match")
    return a.to(torch.float64).flatten(), b.to(a.device, torch.float64).flatten()


def cosine(x, ref) -> float:
    """Cosine similarity of the flattened tensors, in float64, clamped to [-1, 1]."""
    a, b = _pair(x, ref)
    na, nb = torch.linalg.vector_norm(a), torch.linalg.vector_norm(b)
    if na == 0 or nb == 0:
        raise ValueError("x or ref is all zeros: cosine is undefined")
    if torch.equal(a, b):  # identical: exactly 1, not 1 +- an ulp of the quotient
        return 1.0
    return float((torch.dot(a, b) / (na * nb)).clamp(-1.0, 1.0))


def rel_l2(x, ref) -> float:
    """||x - ref|| / ||ref||, in float64."""
    a, b = _pair(x, ref)
    nb = torch.linalg.vector_norm(b)
    if nb == 0:
        raise ValueError("ref is all zeros: relative L2 is undefined")
    return float(torch.linalg.vector_norm(a - b) / nb)


def max_abs(x, ref) -> float:
    a, b = _pair(x, ref)
    return float((a - b).abs().max())


def compare(x, ref) -> dict:
    """{"cosine", "rel_l2", "max_abs"} of x against ref; non-finite x gives NaN metrics, not an error."""
    a, b = _pair(x, ref)
    if not torch.isfinite(a).all():
        return {"cosine": math.nan, "rel_l2": math.nan, "max_abs": math.nan, "finite": False}
    return {"cosine": cosine(a, b), "rel_l2": rel_l2(a, b), "max_abs": max_abs(a, b), "finite": True}


def trajectory_drift(traj, ref_traj) -> list[dict]:
    """Per denoising step: the latent after step i of a run against the control's, 1-based steps."""
    if len(traj) != len(ref_traj):
        raise ValueError(f"trajectories differ in length: {len(traj)} steps vs control {len(ref_traj)}")
    return [{"step": i + 1, **compare(x, r)} for i, (x, r) in enumerate(zip(traj, ref_traj))]


# --------------------------------------------------------------------------- frames
def _frames(x, name, channels_last: bool) -> torch.Tensor:
    """(F, C, H, W) float64 from (F, H, W, C) (or (F, C, H, W) when channels_last=False)."""
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(np.asarray(x))
    x = x.detach().to("cpu", torch.float64)
    if x.dim() == 5:
        if x.shape[0] != 1:
            raise ValueError(f"{name} holds a batch of {x.shape[0]} videos; pass one video")
        x = x[0]
    if x.dim() == 3:  # a single frame
        x = x.unsqueeze(0)
    if x.dim() != 4:
        raise ValueError(f"{name} must be frames (F, H, W, C), got shape {tuple(x.shape)}")
    if channels_last:
        x = x.permute(0, 3, 1, 2)
    if x.shape[1] not in (1, 3, 4):
        raise ValueError(f"{name}: expected 1, 3 or 4 channels, got shape {tuple(x.shape)} "
                         f"(channels_last={channels_last})")
    return x


def _frame_pair(x, ref, channels_last):
    a, b = _frames(x, "x", channels_last), _frames(ref, "ref", channels_last)
    if a.shape != b.shape:
        raise ValueError(f"x frames {tuple(a.shape)} and ref frames {tuple(b.shape)} differ in shape")
    return a, b


def psnr(x, ref, *, data_range: float = 1.0, channels_last: bool = True) -> dict:
    """PSNR in dB, per frame and over the whole clip (from the clip's mean squared error).
    Identical frames give +inf."""
    a, b = _frame_pair(x, ref, channels_last)
    mse = ((a - b) ** 2).mean(dim=(1, 2, 3))

    def db(m):
        return math.inf if m == 0 else 10.0 * math.log10(data_range ** 2 / float(m))

    return {"per_frame": [db(m) for m in mse], "mean": db(mse.mean())}


def gaussian_window(size: int = SSIM_WINDOW, sigma: float = SSIM_SIGMA) -> torch.Tensor:
    """Normalised 1-d gaussian of `size` taps, float64."""
    if size < 1 or size % 2 == 0:
        raise ValueError(f"size must be a positive odd number, got {size}")
    if sigma <= 0:
        raise ValueError(f"sigma must be positive, got {sigma}")
    r = torch.arange(size, dtype=torch.float64) - (size - 1) / 2
    g = torch.exp(-(r ** 2) / (2 * sigma ** 2))
    return g / g.sum()


def _blur(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Separable gaussian filter over H and W of (N, C, H, W), 'valid' region only."""
    c = x.shape[1]
    k = g.numel()
    x = torch.nn.functional.conv2d(x, g.view(1, 1, k, 1).expand(c, 1, k, 1), groups=c)
    return torch.nn.functional.conv2d(x, g.view(1, 1, 1, k).expand(c, 1, 1, k), groups=c)


def ssim(x, ref, *, data_range: float = 1.0, window: int = SSIM_WINDOW, sigma: float = SSIM_SIGMA,
         channels_last: bool = True) -> dict:
    """SSIM (Wang et al. 2004) per frame: gaussian window, statistics per channel over the 'valid'
    region, averaged over pixels and channels. Returns {"per_frame": [...], "mean": ...}.

    Frames smaller than the window use a window of the frame's smaller side (made odd)."""
    a, b = _frame_pair(x, ref, channels_last)
    side = min(a.shape[2], a.shape[3])
    win = min(window, side if side % 2 else side - 1)
    g = gaussian_window(win, sigma)
    c1, c2 = (SSIM_K1 * data_range) ** 2, (SSIM_K2 * data_range) ** 2
    mu_a, mu_b = _blur(a, g), _blur(b, g)
    var_a = _blur(a * a, g) - mu_a ** 2
    var_b = _blur(b * b, g) - mu_b ** 2
    cov = _blur(a * b, g) - mu_a * mu_b
    num = (2 * mu_a * mu_b + c1) * (2 * cov + c2)
    den = (mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2)
    per_frame = (num / den).mean(dim=(1, 2, 3))
    return {"per_frame": [float(v) for v in per_frame], "mean": float(per_frame.mean())}


def frame_metrics(x, ref, *, channels_last: bool = True) -> dict:
    """PSNR and SSIM of decoded frames in [0, 1] against the control's frames."""
    p, s = psnr(x, ref, channels_last=channels_last), ssim(x, ref, channels_last=channels_last)
    return {"psnr_db": p["mean"], "psnr_db_per_frame": p["per_frame"], "ssim": s["mean"],
            "ssim_per_frame": s["per_frame"]}
