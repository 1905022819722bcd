"""A procedural video world to train the embedded model on: one or two objects over a background.

Every clip is drawn from a seeded `torch.Generator`, rendered with torch alone (CPU or GPU, a batch
at a time), and described by a caption generated from its parameters with a fixed grammar:

    caption    := main [" and " second] [" on a " BACKGROUND " background"]
    main       := "a " COLOUR " " SHAPE " moving " DIRECTION
    second     := "a small " COLOUR " " SHAPE " moving " DIRECTION

    COLOUR     := red | green | blue | yellow | purple
    SHAPE      := ball | square
    DIRECTION  := left | right | up | down        (up is towards the top of the frame)
    BACKGROUND := black | gray | white | navy | maroon | moss

The main object is always the larger one (half-size 10-17 px at 128 px, the second 4-7 px) and is
drawn on top; the second object has another colour. A background never takes the colour family of
an object in the clip (navy is blue's, maroon red's, moss green's and yellow's). Sizes, speeds,
start positions, background shade and texture (a linear gradient and fixed grain) vary per clip, so
a model must read the colour, shape and direction from the prompt: nothing else predicts them.

Pixel values are in [-1, 1], laid out (B, 3, F, H, W) as AutoencoderKLWan takes them.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

COLOURS = {  # RGB in [0, 1]
    "red": (0.88, 0.14, 0.14),
    "green": (0.16, 0.74, 0.22),
    "blue": (0.16, 0.32, 0.92),
    "yellow": (0.94, 0.84, 0.14),
    "purple": (0.62, 0.24, 0.82),
}
SHAPES = ("ball", "square")
DIRECTIONS = {"left": (-1.0, 0.0), "right": (1.0, 0.0), "up": (0.0, -1.0), "down": (0.0, 1.0)}
BACKGROUNDS = {
    "black": (0.06, 0.06, 0.07),
    "gray": (0.46, 0.46, 0.47),
    "white": (0.93, 0.93, 0.92),
    "navy": (0.10, 0.12, 0.36),
    "maroon": (0.40, 0.10, 0.12),
    "moss": (0.40, 0.42, 0.14),
}
# Backgrounds each object colour may not appear on (same colour family).
EXCLUDED_BACKGROUNDS = {"red": {"maroon"}, "green": {"moss"}, "blue": {"navy"}, "yellow": {"moss"},
                        "purple": set()}

# Geometry at the reference size of 128 px; other sizes scale it.
REFERENCE_SIZE = 128
MAIN_HALF_SIZE = (10.0, 17.0)
SECOND_HALF_SIZE = (4.0, 7.0)
SPEED = (1.8, 3.2)  # px per frame at 128 px
MARGIN = 2.0
SECOND_OBJECT_P = 0.25
BACKGROUND_IN_CAPTION_P = 0.5
GRADIENT_AMPLITUDE = 0.08
GRAIN_AMPLITUDE = 0.02


@dataclass(frozen=True)
class ObjectSpec:
    colour: str
    shape: str
    direction: str
    half_size: float  # px: the ball's radius, half the square's side
    start: tuple[float, float]  # centre (x, y) in px at frame 0
    speed: float  # px per frame

    def centre(self, frame: int) -> tuple[float, float]:
        dx, dy = DIRECTIONS[self.direction]
        return self.start[0] + dx * self.speed * frame, self.start[1] + dy * self.speed * frame


@dataclass(frozen=True)
class ClipSpec:
    """Everything that determines one clip; `render` and `caption` read nothing else."""

    size: int
    frames: int
    background: str
    gradient: tuple[float, float, float]  # amplitude along x, along y, and a brightness offset
    grain_seed: int
    main: ObjectSpec
    second: ObjectSpec | None = None
    background_in_caption: bool = False

    @property
    def caption(self) -> str:
        return caption(self)


def object_phrase(colour: str, shape: str, direction: str, small: bool = False) -> str:
    return f"a {'small ' if small else ''}{colour} {shape} moving {direction}"


def caption(spec: ClipSpec) -> str:
    text = object_phrase(spec.main.colour, spec.main.shape, spec.main.direction)
    if spec.second is not None:
        text += " and " + object_phrase(spec.second.colour, spec.second.shape, spec.second.direction,
                                        small=True)
    if spec.background_in_caption:
        text += f" on a {spec.background} background"
    return text


def parse_prompt(prompt: str) -> dict:
    """The main object's colour, shape and direction named in a prompt of the grammar above
    (case and a trailing full stop ignored); raises ValueError naming what is missing."""
    words = prompt.lower().strip().rstrip(".").split()
    if not words:
        raise ValueError("prompt is empty")
    found = {}
    for key, vocab in (("colour", COLOURS), ("shape", SHAPES), ("direction", DIRECTIONS)):
        hit = next((w for w in words if w in vocab), None)
        if hit is None:
            raise ValueError(f"prompt {prompt!r} names no {key} (one of {', '.join(vocab)})")
        found[key] = hit
    return found


def _uniform(gen, lo, hi):
    return lo + (hi - lo) * float(torch.rand((), generator=gen))


def _choice(gen, options):
    options = list(options)
    return options[int(torch.randint(len(options), (), generator=gen))]


def _sample_object(gen, size, frames, half_range, colour, shape=None, direction=None) -> ObjectSpec:
    scale = size / REFERENCE_SIZE
    shape = shape or _choice(gen, SHAPES)
    direction = direction or _choice(gen, DIRECTIONS)
    half = _uniform(gen, *half_range) * scale
    speed = _uniform(gen, *SPEED) * scale
    travel = speed * (frames - 1)
    lo, hi = half + MARGIN * scale, size - half - MARGIN * scale
    along = _uniform(gen, lo, max(lo, hi - travel))  # the object stays in frame the whole clip
    across = _uniform(gen, lo, hi)
    dx, dy = DIRECTIONS[direction]
    if dx < 0 or dy < 0:  # moving towards 0: start from the far side
        along = size - along
    start = (along, across) if dx else (across, along)
    return ObjectSpec(colour, shape, direction, half, start, speed)


def sample_clip(gen: torch.Generator, size: int = REFERENCE_SIZE, frames: int = 17, *, colour=None,
                shape=None, direction=None, second: bool | None = None,
                background: str | None = None) -> ClipSpec:
    """One clip's parameters drawn from `gen`; keyword arguments pin the main object's attributes,
    whether a second object is present, and the background."""
    if size < 32 or size % 16:
        raise ValueError(f"size must be a multiple of 16 and at least 32, got {size}")
    if frames < 1:
        raise ValueError(f"frames must be positive, got {frames}")
    colour = colour or _choice(gen, COLOURS)
    if colour not in COLOURS:
        raise ValueError(f"colour must be one of {', '.join(COLOURS)}, got {colour!r}")
    main = _sample_object(gen, size, frames, MAIN_HALF_SIZE, colour, shape, direction)
    has_second = (float(torch.rand((), generator=gen)) < SECOND_OBJECT_P) if second is None else second
    other = None
    if has_second:
        other = _sample_object(gen, size, frames, SECOND_HALF_SIZE,
                               _choice(gen, [c for c in COLOURS if c != colour]))
    banned = EXCLUDED_BACKGROUNDS[colour] | (EXCLUDED_BACKGROUNDS[other.colour] if other else set())
    if background is None:
        background = _choice(gen, [b for b in BACKGROUNDS if b not in banned])
    elif background in banned:
        raise ValueError(f"background {background!r} takes the colour family of an object in the clip")
    gradient = (_uniform(gen, -1, 1) * GRADIENT_AMPLITUDE, _uniform(gen, -1, 1) * GRADIENT_AMPLITUDE,
                _uniform(gen, -0.5, 0.5) * GRADIENT_AMPLITUDE)
    grain_seed = int(torch.randint(2**31 - 1, (), generator=gen))
    in_caption = float(torch.rand((), generator=gen)) < BACKGROUND_IN_CAPTION_P
    return ClipSpec(size, frames, background, gradient, grain_seed, main, other, in_caption)


def sample_clips(n: int, seed: int, size: int = REFERENCE_SIZE, frames: int = 17, **pins) -> list[ClipSpec]:
    gen = torch.Generator().manual_seed(seed)
    return [sample_clip(gen, size, frames, **pins) for _ in range(n)]


def _coverage(obj: ObjectSpec, frames: int, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """(F, H, W) anti-aliased coverage in [0, 1] and the ball's shading factor folded in."""
    t = torch.arange(frames, device=xs.device, dtype=xs.dtype)
    dx, dy = DIRECTIONS[obj.direction]
    cx = (obj.start[0] + dx * obj.speed * t).view(-1, 1, 1)
    cy = (obj.start[1] + dy * obj.speed * t).view(-1, 1, 1)
    ox, oy = xs - cx, ys - cy
    if obj.shape == "ball":
        dist = torch.sqrt(ox * ox + oy * oy)
    else:
        dist = torch.maximum(ox.abs(), oy.abs())
    return (obj.half_size - dist + 0.5).clamp(0.0, 1.0), dist


def render(specs: list[ClipSpec], device=None, dtype=torch.float32, with_coverage: bool = False):
    """(B, 3, F, H, W) pixels in [-1, 1] for clips of one size and frame count; with
    `with_coverage`, also the (B, 1, F, H, W) fraction of each pixel the objects cover."""
    if not specs:
        raise ValueError("specs is empty")
    size, frames = specs[0].size, specs[0].frames
    if any(s.size != size or s.frames != frames for s in specs):
        raise ValueError("all clips in one render call must share size and frame count")
    device = torch.device(device or "cpu")
    coords = torch.arange(size, device=device, dtype=torch.float32) + 0.5
    ys, xs = torch.meshgrid(coords, coords, indexing="ij")
    u, v = xs / size - 0.5, ys / size - 0.5
    out = torch.empty(len(specs), 3, frames, size, size, device=device, dtype=torch.float32)
    covered = torch.zeros(len(specs), 1, frames, size, size, device=device, dtype=torch.float32)
    for i, spec in enumerate(specs):
        bg = torch.tensor(BACKGROUNDS[spec.background], device=device).view(3, 1, 1)
        gx, gy, g0 = spec.gradient
        grain_gen = torch.Generator().manual_seed(spec.grain_seed)
        grain = (torch.rand(size, size, generator=grain_gen) * 2 - 1).to(device) * GRAIN_AMPLITUDE
        still = (bg + (gx * u + gy * v + g0 + grain)).expand(3, size, size)
        video = still.unsqueeze(1).repeat(1, frames, 1, 1)  # (3, F, H, W)
        for obj in (spec.second, spec.main):  # the main object is drawn on top
            if obj is None:
                continue
            cover, dist = _coverage(obj, frames, xs, ys)
            colour = torch.tensor(COLOURS[obj.colour], device=device).view(3, 1, 1, 1)
            if obj.shape == "ball":  # darker towards the rim, so the ball reads as round
                shade = 1.0 - 0.3 * (dist / obj.half_size).clamp(max=1.0) ** 2
                colour = colour * shade.unsqueeze(0)
            video = video * (1 - cover) + colour * cover
            covered[i, 0] = torch.maximum(covered[i, 0], cover)
        out[i] = video
    video = (out.clamp(0.0, 1.0) * 2 - 1).to(dtype)
    return (video, covered.to(dtype)) if with_coverage else video


def prompt_set(colours=("red", "green", "blue", "yellow")) -> list[str]:
    """The fixed prompt set for prompt accuracy: every colour x shape x direction, in a fixed order."""
    return [object_phrase(c, s, d) for c in colours for s in SHAPES for d in DIRECTIONS]

