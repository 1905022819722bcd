"""Opt-in speed-up stacks for the latency tool: what wan_fp4 attention combines with.

`float8` linears: torchao's dynamic-activation float8 linears (`Float8DynamicActivationFloat8WeightConfig`,
E4M3 activations and weights, one scale per row of each), applied to the linears of the transformer
blocks (self- and cross-attention projections, FFN) whose weights are bf16 with both dims a multiple
of 16 (what `torch._scaled_mm` takes). The embeddings, time projection and output head stay as they
are. These are benchmark variants, never something `wan_fp4.enable()` does.

torchao is a library dependency of this module only: `pip install 'wan-fp4[stack]'`. Rowwise float8
GEMMs need CUDA compute capability 8.9 or newer (Ada, Hopper, Blackwell); anywhere else the variant
is refused with the reason.
"""
from __future__ import annotations

import torch

LINEARS = ("float8",)
INSTALL = "pip install 'wan-fp4[stack]'"
MIN_CAPABILITY = (8, 9)


class StackUnavailable(RuntimeError):
    """A stack that cannot run here; the message says why."""


def float8_config():
    """torchao config of the float8 stack: per-row scales for activations and weights. Inductor's
    settings are left alone (set_inductor_config=False) so every compiled variant of a run
    compiles under the same settings."""
    try:
        from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow
    except ImportError as exc:
        raise StackUnavailable(f"float8 linears need torchao ({INSTALL}): {exc}") from exc
    return Float8DynamicActivationFloat8WeightConfig(granularity=PerRow(), set_inductor_config=False)


def float8_targets(transformer) -> list[tuple[str, torch.nn.Linear]]:
    """The linears the float8 stack quantizes: inside `transformer.blocks`, bf16 weights, both dims
    multiples of 16."""
    blocks = getattr(transformer, "blocks", None)
    if not isinstance(blocks, torch.nn.ModuleList):
        raise TypeError(f"expected a Wan transformer with .blocks, got {type(transformer).__name__}")
    return [(f"blocks.{name}", m) for name, m in blocks.named_modules()
            if isinstance(m, torch.nn.Linear) and m.weight.dtype == torch.bfloat16
            and m.in_features % 16 == 0 and m.out_features % 16 == 0]


def check_available(linears: str, device) -> None:
    """Raise StackUnavailable naming what is missing for `linears` on `device`."""
    if linears not in LINEARS:
        raise ValueError(f"linears must be one of {LINEARS}, got {linears!r}")
    device = torch.device(device)
    if device.type != "cuda":
        raise StackUnavailable(f"float8 linears need a CUDA GPU of compute capability >= 8.9 "
                               f"(torchao rowwise float8); this run is on {device.type}")
    cap = torch.cuda.get_device_capability(device)
    if cap < MIN_CAPABILITY:
        raise StackUnavailable(f"float8 linears need compute capability >= 8.9, this GPU is sm_{cap[0]}{cap[1]}")
    float8_config()  # torchao importable


class Linears:
    """Context manager: quantize the target linears of `transformer` on entry, put the original
    weights back on exit (the bf16 weights are kept, not copied, while the variant runs)."""

    def __init__(self, transformer, linears: str = "float8"):
        if linears not in LINEARS:
            raise ValueError(f"linears must be one of {LINEARS}, got {linears!r}")
        self.transformer, self.linears = transformer, linears
        self.saved: dict[torch.nn.Linear, torch.nn.Parameter] = {}

    def __enter__(self):
        targets = float8_targets(self.transformer)
        if not targets:
            raise StackUnavailable("no linear of the transformer blocks is bf16 with dims that are multiples of 16")
        config = float8_config()
        from torchao.quantization import quantize_

        self.saved = {m: m.weight for _, m in targets}
        chosen = set(self.saved)
        try:
            quantize_(self.transformer, config, filter_fn=lambda m, fqn: m in chosen)
        except Exception:
            self._restore()
            raise
        return self

    @property
    def count(self) -> int:
        return len(self.saved)

    def _restore(self):
        for module, weight in self.saved.items():
            module.weight = weight
            module.__dict__.pop("extra_repr", None)  # torchao's per-instance repr of the quantized weight
        self.saved = {}

    def __exit__(self, *exc):
        self._restore()
        return False
