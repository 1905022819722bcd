"""A Wan transformer forward's shapes at a video geometry, and random inputs of those shapes."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Geometry:
    height: int
    width: int
    frames: int
    text_tokens: int = 512
    t_factor: int = 4  # the Wan VAE's temporal and spatial compression
    s_factor: int = 8

    def latent_shape(self, transformer):
        c, tf, sf = transformer.config.in_channels, self.t_factor, self.s_factor
        return (1, c, (self.frames - 1) // tf + 1, self.height // sf, self.width // sf)

    def tokens(self, transformer) -> int:
        _, _, t, h, w = self.latent_shape(transformer)
        pt, ph, pw = transformer.config.patch_size
        return (t // pt) * (h // ph) * (w // pw)


def make_inputs(transformer, geom: Geometry, device, seed: int = 0) -> dict:
    """Random forward inputs at the real shapes: latents, one timestep, a padded text context."""
    g = torch.Generator("cpu").manual_seed(seed)
    dtype = transformer.dtype
    latents = torch.randn(geom.latent_shape(transformer), generator=g).to(device, dtype)
    text = torch.randn(1, geom.text_tokens, transformer.config.text_dim, generator=g).to(device, dtype)
    return {"hidden_states": latents, "timestep": torch.tensor([500.0], device=device),
            "encoder_hidden_states": text, "return_dict": False}
