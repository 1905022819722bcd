"""Prompt adherence: read the main object's colour, shape and direction back from decoded frames.

A classical detector for clips of the procedural world (`wan_fp4.pipelines.world`), used on
generated videos to score whether the model drew what the prompt says:

1. background: the per-frame median colour (objects cover well under half of a frame);
2. foreground: pixels farther than `FOREGROUND_DISTANCE` from it (RGB in [0, 1]) that are saturated;
3. colour: each foreground pixel takes the object colour of nearest hue; the main object is the
   colour with the most pixels over the clip (it is the larger object);
4. direction: the sign of the dominant axis of the least-squares slope of that colour's centroid
   track (image y grows downwards, so "up" is a negative slope);
5. shape: the median over frames of the mask's area over its bounding box's, for frames where the
   box does not touch the frame edge: a disc fills pi/4 of its box, a square all of it.

The detector is validated on rendered clips (ground truth known) before it scores anything:
`validate()` and the tests check it.
"""
from __future__ import annotations

import colorsys
import math
from dataclasses import asdict, dataclass

import numpy as np

from ..pipelines import world

FOREGROUND_DISTANCE = 0.22
MIN_SATURATION = 0.35
MIN_PIXELS = 12  # a frame's mask smaller than this says nothing about shape or position
# Fill ratio (mask area over bounding-box area) from which a shape reads as a square. A disc fills
# pi/4 = 0.785 of its box, a square all of it; but the detector reads decoded video, and an 8x VAE
# rounds a square's corners: over VAE round trips of rendered clips, discs filled 0.80 (median,
# at most 0.82) and squares 0.88 (median; a quarter below 0.85). The cut sits between the two.
SQUARE_FILL = 0.83
MIN_TRAVEL = 2.0  # px over the clip: less reads as "not moving"


@dataclass(frozen=True)
class Reading:
    colour: str | None
    shape: str | None
    direction: str | None
    fill: float | None = None
    travel: float | None = None

    def matches(self, prompt: str) -> dict:
        want = world.parse_prompt(prompt)
        got = {"colour": self.colour, "shape": self.shape, "direction": self.direction}
        hits = {k: got[k] == v for k, v in want.items()}
        hits["all"] = all(hits.values())
        return hits


def _hue_table() -> tuple[list[str], np.ndarray]:
    names = list(world.COLOURS)
    hues = np.array([colorsys.rgb_to_hsv(*world.COLOURS[n])[0] for n in names])
    return names, hues


def _hsv(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hue in [0, 1) and saturation of (..., 3) RGB in [0, 1]."""
    mx, mn = frames.max(-1), frames.min(-1)
    chroma = mx - mn
    sat = np.where(mx > 0, chroma / np.maximum(mx, 1e-6), 0.0)
    r, g, b = frames[..., 0], frames[..., 1], frames[..., 2]
    safe = np.maximum(chroma, 1e-6)
    hue = np.where(mx == r, ((g - b) / safe) % 6, np.where(mx == g, (b - r) / safe + 2, (r - g) / safe + 4))
    return (hue / 6.0) % 1.0, sat


def as_frames(frames) -> np.ndarray:
    """(F, H, W, 3) float in [0, 1] from uint8 or float frames (a leading batch axis of 1 dropped)."""
    arr = np.asarray(frames.detach().float().cpu() if hasattr(frames, "detach") else frames)
    if arr.ndim == 5 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 4 or arr.shape[-1] != 3:
        raise ValueError(f"frames must be (F, H, W, 3), got shape {arr.shape}")
    if arr.dtype == np.uint8:
        return arr.astype(np.float64) / 255.0
    return np.clip(arr.astype(np.float64), 0.0, 1.0)


def _open3(mask: np.ndarray) -> np.ndarray:
    """Morphological opening of (F, H, W) masks with a 3x3 square."""
    def shifted(m, fill):
        p = np.pad(m, ((0, 0), (1, 1), (1, 1)), constant_values=fill)
        h, w = m.shape[1:]
        return [p[:, i:i + h, j:j + w] for i in range(3) for j in range(3)]
    eroded = np.logical_and.reduce(shifted(mask, True))
    return np.logical_or.reduce(shifted(eroded, False))


def read(frames) -> Reading:
    """What the main object in `frames` is and where it goes."""
    x = as_frames(frames)
    n_frames, height, width, _ = x.shape
    background = np.median(x.reshape(n_frames, -1, 3), axis=1)[:, None, None, :]
    hue, sat = _hsv(x)
    fg = (np.linalg.norm(x - background, axis=-1) > FOREGROUND_DISTANCE) & (sat > MIN_SATURATION)
    names, hues = _hue_table()
    gap = np.abs(hue[..., None] - hues)
    label = np.minimum(gap, 1.0 - gap).argmin(-1)
    counts = [int((fg & (label == i)).sum()) for i in range(len(names))]
    if max(counts) < MIN_PIXELS:
        return Reading(None, None, None)
    main = int(np.argmax(counts))
    # An opening drops one-pixel fringes: anti-aliased edges of another object, blended with the
    # background, can take the main colour's hue (blue over maroon reads purple).
    mask = _open3(fg & (label == main))

    ys, xs = np.mgrid[0:height, 0:width]
    track, fills = [], []
    for f in range(n_frames):
        m = mask[f]
        area = int(m.sum())
        if area < MIN_PIXELS:
            continue
        track.append((f, xs[m].mean(), ys[m].mean()))
        rows, cols = np.nonzero(m.any(1))[0], np.nonzero(m.any(0))[0]
        top, bottom, left, right = rows[0], rows[-1], cols[0], cols[-1]
        if top > 0 and left > 0 and bottom < height - 1 and right < width - 1:
            fills.append(area / ((bottom - top + 1) * (right - left + 1)))
    shape = fill = None
    if fills:
        fill = float(np.median(fills))
        shape = "square" if fill >= SQUARE_FILL else "ball"
    direction = travel = None
    if len(track) >= 2:
        t, cx, cy = (np.array(c, dtype=np.float64) for c in zip(*track))
        slope_x, slope_y = np.polyfit(t, cx, 1)[0], np.polyfit(t, cy, 1)[0]
        travel = float(math.hypot(slope_x, slope_y) * (n_frames - 1))
        if travel >= MIN_TRAVEL:
            if abs(slope_x) >= abs(slope_y):
                direction = "right" if slope_x > 0 else "left"
            else:
                direction = "down" if slope_y > 0 else "up"
    return Reading(names[main], shape, direction, fill, travel)


def score(readings_and_prompts) -> dict:
    """Accuracy per attribute and for all three together over (Reading, prompt) pairs."""
    return accuracy([r.matches(p) for r, p in readings_and_prompts])


@dataclass(frozen=True)
class Validation:
    clips: int
    accuracy: dict
    failures: list
    fills: dict  # true shape -> the fill ratios read for it: what SQUARE_FILL is set from

    def as_dict(self) -> dict:
        return asdict(self)


def validate(n: int = 240, seed: int = 20261130, size: int = world.REFERENCE_SIZE, frames: int = 17,
             batch: int = 40, transform=None) -> Validation:
    """Read back `n` rendered clips of the world (seeded, a second object in some) and compare with
    their ground truth: the detector's own accuracy, before it scores a model. `transform` maps a
    rendered (B, 3, F, H, W) batch in [-1, 1] to another before reading (a VAE round trip, say)."""
    specs = world.sample_clips(n, seed=seed, size=size, frames=frames)
    pairs, failures, fills = [], [], {shape: [] for shape in world.SHAPES}
    for start in range(0, n, batch):
        chunk = specs[start:start + batch]
        pixels = world.render(chunk)
        if transform is not None:
            pixels = transform(pixels).float().cpu().clamp(-1.0, 1.0)
        video = ((pixels + 1) / 2).permute(0, 2, 3, 4, 1).numpy()  # (B, F, H, W, 3)
        for spec, clip in zip(chunk, video):
            reading = read(clip)
            pairs.append((reading, spec.caption))
            if reading.fill is not None:
                fills[spec.main.shape].append(reading.fill)
            if not reading.matches(spec.caption)["all"]:
                failures.append({"caption": spec.caption, "read": asdict(reading)})
    return Validation(n, score(pairs), failures, fills)


def generate_and_read(pipe, prompts: list[str], seeds=(0, 1), *, height: int, width: int, frames: int,
                      steps: int, guidance: float = 5.0, batch: int = 16, progress=None,
                      on_video=None) -> list[dict]:
    """Generate every prompt with every seed (one torch.Generator per video, so a video does not
    depend on the batch it ran in), read each back, and return one row per video. on_video(row,
    video) may add entries to a row (video: (F, H, W, C) floats in [0, 1])."""
    import torch

    jobs = [(p, s) for s in seeds for p in prompts]
    rows = []
    for start in range(0, len(jobs), batch):
        chunk = jobs[start:start + batch]
        gens = [torch.Generator(pipe.device).manual_seed(s) for _, s in chunk]
        out = pipe(prompt=[p for p, _ in chunk], height=height, width=width, num_frames=frames,
                   num_inference_steps=steps, guidance_scale=guidance, generator=gens,
                   output_type="np").frames
        for (prompt, seed), video in zip(chunk, out):
            reading = read(video)
            rows.append({"prompt": prompt, "seed": seed, "read": asdict(reading), **reading.matches(prompt)})
            if on_video is not None:
                on_video(rows[-1], video)
        if progress is not None:
            progress(len(rows), len(jobs))
    return rows


def accuracy(rows: list[dict]) -> dict:
    """Per-attribute and joint accuracy of `generate_and_read` rows."""
    if not rows:
        raise ValueError("nothing to score")
    return {k: sum(bool(r[k]) for r in rows) / len(rows) for k in ("colour", "shape", "direction", "all")}
