"""The kernel contract: one `KernelSpec` per kernel family, and the registry dispatch selects from.

Each `kernels/<family>/__init__.py` exports `SPEC`. Dispatch validates a call's inputs once
(`dispatch.validate`), offers the call to the specs serving its mode on its device (`offered`, in the
registry's order of preference), asks each `supports` until one says yes, and runs that spec's
`run`. `supports` and `run` may therefore assume inputs `dispatch.validate` accepted; a family's public
entry points (`is_supported`, `<family>_attention`) add the shape checks for direct callers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class KernelSpec:
    """name: dispatch's name for the kernel ('sm90-cute'); modes: the modes it computes;
    capability: the lowest CUDA compute capability it is offered on; same_major: offered only on
    that capability's GPU generation (sm_100a code runs on no other major); head_dims: the head
    dims it takes (None: every one the low-precision modes take).
    supports(q, k, v, mode, fp4) -> (ok, reason): whether it runs these validated inputs here.
    run(q, k, v, mode, scale, fp4, return_lse) -> (out, lse or None)."""

    name: str
    modes: tuple[str, ...]
    capability: tuple[int, int]
    head_dims: tuple[int, ...] | None
    supports: Callable
    run: Callable
    same_major: bool = False

    def offered(self, capability: tuple[int, int], mode: str) -> bool:
        """Whether dispatch asks this kernel about `mode` on a GPU of `capability`; `supports`
        then gives the reason for any refusal."""
        if mode not in self.modes or tuple(capability) < self.capability:
            return False
        return not self.same_major or capability[0] == self.capability[0]


def unavailable(name: str, modes: tuple[str, ...], capability: tuple[int, int], why: str) -> KernelSpec:
    """The spec of a family whose software stack is missing here: offered as usual, it refuses
    every call with `why` (dispatch logs it and moves on)."""

    def supports(q, k, v, mode, fp4=None):
        return False, why

    def run(*args, **kwargs):
        raise RuntimeError(f"kernel {name!r} is unavailable: {why}")

    return KernelSpec(name, modes, capability, None, supports, run)


# The families' names in order of preference, known without importing any family (a forced
# kernel's name is checked where torch.compile traces); `specs()` holds them to this list.
NAMES = ("sm100-cute", "sm90-cute", "triton", "fp4-emulation")
_SPECS: tuple[KernelSpec, ...] | None = None


def specs() -> tuple[KernelSpec, ...]:
    """Every family's spec, in dispatch's order of preference: the specialised kernel of a GPU
    generation before the portable one serving the same modes. Imported on first use, so the
    kernel stacks load only when a GPU call needs them."""
    global _SPECS
    if _SPECS is None:
        from . import fp4_emulation, sm90, sm100, triton

        found = (sm100.SPEC, sm90.SPEC, triton.SPEC, fp4_emulation.SPEC)
        if tuple(s.name for s in found) != NAMES:
            raise RuntimeError(f"kernel families {[s.name for s in found]} do not match NAMES {NAMES}")
        _SPECS = found
    return _SPECS


def spec(name: str) -> KernelSpec | None:
    """The spec called `name`, None for a name no family has."""
    return next((s for s in specs() if s.name == name), None)

