"""A frame strip: a few prompts of the procedural world, generated in several attention modes from
the same seed, laid side by side with what the adherence detector reads back from each video.

Rows are prompts; for each mode a block of evenly spaced frames. It is the picture of what the
embedded trained model draws and of what a low-precision mode changes in it (README, docs/).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def generate_modes(pipe, prompts: list[str], modes, *, seed: int, height: int, width: int, frames: int,
                   steps: int, guidance: float = 5.0, progress=None) -> dict[str, np.ndarray]:
    """mode -> (prompts, F, H, W, 3) frames in [0, 1]; every video from its own generator seeded
    with `seed`, so the modes differ only by their attention."""
    import torch

    import wan_fp4

    if not prompts:
        raise ValueError("prompts is empty")
    out = {}
    for mode in modes:
        if mode != "bf16":
            wan_fp4.enable(pipe, mode=mode)
        try:
            gens = [torch.Generator(pipe.device).manual_seed(seed) for _ in prompts]
            out[mode] = pipe(prompt=list(prompts), height=height, width=width, num_frames=frames,
                             num_inference_steps=steps, guidance_scale=guidance, generator=gens,
                             output_type="np").frames
        finally:
            if mode != "bf16":
                wan_fp4.disable(pipe)
        if progress is not None:
            progress(mode)
    return out


def frame_indices(frames: int, shown: int) -> list[int]:
    """`shown` frame indices spread evenly from the first to the last."""
    if shown < 1:
        raise ValueError(f"shown must be at least 1, got {shown}")
    return sorted({round(i * (frames - 1) / max(shown - 1, 1)) for i in range(shown)})


def plot_strip(videos: dict[str, np.ndarray], prompts: list[str], path, *, shown: int = 5,
               title: str = "") -> Path:
    """Write the strip as a PNG: one row per prompt, one block of `shown` frames per mode, each
    block labelled with the mode and the detector's reading (colour, shape, direction)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from . import adherence

    modes = list(videos)
    n_frames, height, width = next(iter(videos.values())).shape[1:4]
    picks = frame_indices(n_frames, shown)
    gap = max(2, width // 8)
    fig, axes = plt.subplots(len(prompts), len(modes), squeeze=False,
                             figsize=(1.25 * len(picks) * len(modes) + 0.4, 1.45 * len(prompts) + 0.5))
    for row, prompt in enumerate(prompts):
        for col, mode in enumerate(modes):
            video = videos[mode][row]
            blank = np.ones((height, gap, 3))
            strip = np.concatenate([part for f in picks for part in (video[f], blank)][:-1], axis=1)
            reading = adherence.read(video)
            verdict = "matches" if reading.matches(prompt)["all"] else "MISREAD"
            ax = axes[row][col]
            ax.imshow(np.clip(strip, 0, 1), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{mode}: read {reading.colour} {reading.shape} {reading.direction} ({verdict})",
                         fontsize=7.5, color="black" if verdict == "matches" else "firebrick")
            if col == 0:
                ax.set_ylabel(f'"{prompt}"', fontsize=7.5, rotation=0, ha="right", va="center")
    fig.suptitle(title or f"frames {', '.join(map(str, picks))} of each video", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
