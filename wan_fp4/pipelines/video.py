"""Writing frames to a video file with imageio's ffmpeg plugin (imageio-ffmpeg ships ffmpeg)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def to_uint8_frames(frames) -> np.ndarray:
    """(F, H, W, 3) uint8 from a pipeline's output: float in [0, 1] (np / pt), uint8, or PIL list;
    a leading batch axis of size 1 is dropped."""
    if isinstance(frames, (list, tuple)):
        frames = np.stack([np.asarray(f) for f in frames])
    if hasattr(frames, "detach"):  # torch tensor
        frames = frames.detach().float().cpu().numpy()
    arr = np.asarray(frames)
    if arr.ndim == 5:
        if arr.shape[0] != 1:
            raise ValueError(f"frames holds a batch of {arr.shape[0]} videos; pass one (F, H, W, 3)")
        arr = arr[0]
    if arr.ndim != 4 or arr.shape[-1] != 3:
        raise ValueError(f"frames must be (F, H, W, 3), got shape {arr.shape}")
    if arr.dtype == np.uint8:
        return arr
    if not np.issubdtype(arr.dtype, np.floating):
        raise TypeError(f"frames must be float in [0, 1] or uint8, got {arr.dtype}")
    return (np.clip(arr, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def export_video(frames, path, fps: int = 8) -> Path:
    """Write `frames` to `path` (H.264 mp4, yuv420p so common players open it); returns the path."""
    import imageio

    if not isinstance(fps, (int, float)) or fps <= 0:
        raise ValueError(f"fps must be a positive number, got {fps!r}")
    arr = to_uint8_frames(frames)
    height, width = arr.shape[1:3]
    if height % 2 or width % 2:
        raise ValueError(f"frame size {height}x{width} must be even for yuv420p H.264")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # macro_block_size=1: never let imageio resize frames behind our back.
    with imageio.get_writer(str(path), format="FFMPEG", mode="I", fps=fps, codec="libx264",
                            pixelformat="yuv420p", quality=8, macro_block_size=1) as writer:
        for frame in arr:
            writer.append_data(frame)
    return path


def read_video(path) -> np.ndarray:
    """All frames of a video file as (F, H, W, 3) uint8 (used by tests and by `generate`'s check)."""
    import imageio

    with imageio.get_reader(str(path), format="FFMPEG") as reader:
        return np.stack([np.asarray(f) for f in reader])
