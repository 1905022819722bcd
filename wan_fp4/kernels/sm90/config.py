"""The sm90 kernel's launch options: the defaults every launch and every prebuilt kernel uses."""
from __future__ import annotations

DEFAULT_CONFIG = {"n_wg": 2, "stages": 2, "overlap": True, "fold": 2}
# Per-mode changes to DEFAULT_CONFIG, chosen by measurement (BENCHMARKS.md, sm90 config sweep):
# fp8's exp2 work overlaps its own PV product (intra); direct-p's cheaper codes gain nothing from it.
MODE_CONFIG = {"fp8": {"intra": True}}


def default_config(mode: str) -> dict:
    """The kernel options `launch` uses for `mode` unless told otherwise."""
    return {**DEFAULT_CONFIG, **MODE_CONFIG.get(mode, {})}
