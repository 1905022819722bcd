"""Wan2.1 video geometry: what a pipeline call accepts, checked up front so errors name the argument.

Torch-free, so the command line can check its flags before importing anything heavy.
"""
from __future__ import annotations


def check_geometry(height: int | None = None, width: int | None = None, frames: int | None = None) -> None:
    """Height and width multiples of 16 (the VAE's 8x times the 2x2 patch), frames 4k+1 (the VAE's
    4x temporal compression plus the first frame). None: not given, not checked."""
    for name, value in (("height", height), ("width", width)):
        if value is not None and (value < 16 or value % 16):
            raise ValueError(f"{name} must be a positive multiple of 16, got {value}")
    if frames is not None and (frames < 1 or (frames - 1) % 4):
        raise ValueError(f"frames must be 4k+1 (1, 5, 9, 13, 17, ...), got {frames}")
