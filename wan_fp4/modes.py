"""Attention modes and their numeric parameters (docs/NUMERICS.md).

Every constant that the reference and the kernels must agree on lives here, so that a kernel
cannot drift from the reference by a copied literal. A prebuilt kernel's key includes the values
of the constants its sources import from here (kernels/aot.py, modes_key).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

MODES = ("bf16", "fp8", "direct-p", "direct-p-fp4")
FP8_MODES = ("fp8", "direct-p")  # the modes whose operands are FP8 (kernels/prepare.py)

LN2 = math.log(2.0)  # natural-log LSE = LN2 * (log2-unit LSE)
# The largest (even) head dim the low-precision modes take; larger ones fall back to bf16.
MAX_HEAD_DIM = 256

# Tiling shared by the reference and every kernel: 128 queries x 128 keys, P blocks of 32 keys.
TILE_M = 128
TILE_N = 128
P_BLOCK = 32
QK_SCALE_BLOCK = 128  # tokens per FP8 Q/K scale

E4M3_MAX = 448.0
E4M3_ONE = 0x38  # the E4M3 byte of 1.0
# fp8 feeds E4M3(256 p) to the PV product, the 256 added to the exponent's argument: ex2(z - m + 8)
LOG2_P_SCALE = 8.0

# direct-p: byte = rne(8 x + 120), read as an E4M3 byte (~ 256 * 2^x), x = (s - r) c against the
# row's reference r (docs/NUMERICS.md, "Row reference"): r is set DIRECT_P_HEADROOM codes above the
# row's max, and moved only when a code would pass DIRECT_P_TOP, so codes need no row max per tile.
DIRECT_P_SLOPE = 8.0
DIRECT_P_ONE = 120  # the E4M3 byte of 256.0
DIRECT_P_TOP = 126  # the largest finite E4M3 byte (448.0)
DIRECT_P_HEADROOM = 24  # codes (3 log2 units); chosen by measurement (docs/SM90_GEN2.md, item 12)

# The largest |score| z = s * scale * log2(e) (log2 units) the FP8 modes take; larger inputs raise.
# Both fold the score scale into one FMA against the row's reference m (fp8: the rounded row max
# fl(max s * qk); direct-p: its row reference, within a few log2 units of that max):
# fp8 p = 2^fl(s qk + fl(8 - m)), direct-p t = fma(s, 8 qk, fl(120 - 8 m)). The reference's own
# argument is then z's rounding error, up to ulp(m) / 2, which grows with m, and fp8 adds fl(8 - m)'s
# rounding, as large. Below 2^19 each is at most 2^-6: fp8's largest p is within 2.2% of 256, and
# direct-p's t within 3/8 of a byte of 8 (z - m) + 120.
# Beyond, fp8's 256 p saturates E4M3 from |m| ~ 2^24 (wrong rows) and overflows to inf from 2^31
# (NaN rows), and direct-p's rounding of 8 m swallows the 120, so whole rows can round to byte 0.
MAX_SCORE_LOG2 = 2.0**19

# direct-p-fp4 (the paper's "fast" policy).
LOG2_6 = 2.5849626  # fl32(log2 6), as the paper's kernel writes it
# The score constant c = log2(e) / sqrt(128) as the paper's kernel holds it: this FP32 literal is
# 25 ulps below the correctly rounded value (0.12751743); every mode uses it at the default scale
# of D = 128 (reference.log2_scale), so our codes are the paper's.
PAPER_LOG2E_RSQRT128 = 0.12751706
NVFP4_INV_6 = 1.0 / 6.0  # NVFP4 base scale = fl(pair amax * fl32(1/6)), as the paper's quantiser
NEAREST_POW2_BIAS = 0.41503751  # 1 - log2(1.5): floor(g + this) picks the nearest power of two
NVFP4_SCALE_MULTIPLIERS = (0.25, 0.3125, 0.375, 0.4375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25)
NVFP4_BLOCK = 16
# The paper's stored-scale shift L: P's scales are published as 2^(e - L) so that 6 * 2^e cannot
# overflow FP32 when a block exponent saturates; it cancels between P.V and the denominator.
FP4_SCALE_SHIFT = 16
# P block exponents e = u - 127 come from E8M0 bytes u clamped to [1, 254]. A row whose largest
# block exponent sits at either end had scores beyond the map's range relative to its reference
# m: its probabilities are clamped, and the output is wrong (FP4RangeWarning).
P_EXP_MIN, P_EXP_MAX = -126, 127
AFFINE_GENERIC = (1.50, 1.20)
AFFINE_WAN = (1.60, 0.95)


@dataclass(frozen=True)
class FP4Params:
    """Parameters of the direct-p-fp4 P map.

    affine: (A, B) of y = A x + B, the FMA stand-in for 2^x before E2M1 rounding.
    guard_margin: None for the shiftless map (row reference m = 0); otherwise M of the
      large-logit guard, m = max(s over 128 anchor keys) + M ln 2 in raw score units.
    """

    affine: tuple[float, float] = AFFINE_WAN
    guard_margin: float | None = None

    def __post_init__(self):
        # Checked here, where every entry (attention, enable, the backend) gets its map: a NaN A
        # gives all-zero P, A <= 0 ranks scores backwards, and the op reads a NaN margin as "no
        # guard", each a finite, wrong output.
        try:
            a, b = self.affine
        except (TypeError, ValueError):
            a = b = None
        if not (_is_number(a) and _is_number(b)):
            raise TypeError(f"FP4Params.affine must be a pair (A, B) of numbers, got {self.affine!r}")
        if not (math.isfinite(a) and math.isfinite(b) and a > 0):
            raise ValueError(f"FP4Params.affine (A, B) must be finite with A > 0, got {self.affine!r}")
        if self.guard_margin is not None:
            check_guard_margin(self.guard_margin, "FP4Params.guard_margin")


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_guard_margin(margin, name: str = "guard_margin") -> None:
    """A guard margin is a finite real: NaN would read as "no guard", inf clamps every row."""
    if not _is_number(margin):
        raise TypeError(f"{name} must be a number, got {margin!r}")
    if not math.isfinite(margin):
        raise ValueError(f"{name} must be finite, got {margin!r}")


class FP4RangeWarning(RuntimeWarning):
    """direct-p-fp4 clamped P block scales at the E8M0 limits (scores too large for the map).
    `warnings.simplefilter("error", FP4RangeWarning)` turns it into an exception."""


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def check_fp4(fp4) -> None:
    """The `fp4` argument of every entry: an FP4Params or None (the default map)."""
    if fp4 is not None and not isinstance(fp4, FP4Params):
        raise TypeError(f"fp4 must be a wan_fp4.FP4Params or None, got {type(fp4).__name__}")


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)
