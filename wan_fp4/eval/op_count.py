"""What one call runs, counted on the CPU: torch ops by kind, and Triton launches.

On a CUDA tensor every torch op counted as a kernel here is one GPU launch, every allocation one
trip through the caching allocator, and every host read a device-to-host synchronisation. Triton
kernels are counted when they run under the Triton interpreter (TRITON_INTERPRET=1 set before
triton is imported); the torch work the interpreter itself does to run them is not counted.

    count_ops(fn) -> OpCount
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

_ALLOCATIONS = {"empty", "empty_strided", "zeros", "ones", "full", "new_empty", "new_zeros", "empty_like"}
_HOST_READS = {"_local_scalar_dense"}
# ops that make a view of existing storage: no kernel on any device
_VIEWS = {"view", "_unsafe_view", "slice", "select", "as_strided", "alias", "permute", "transpose", "t",
          "unsqueeze", "squeeze", "expand", "detach", "unflatten", "view_as", "lift_fresh", "split",
          "_reshape_alias", "unbind"}


@dataclass
class OpCount:
    triton: Counter = field(default_factory=Counter)  # Triton kernel name -> launches
    torch: Counter = field(default_factory=Counter)  # aten op name -> calls

    def _of(self, names) -> int:
        return sum(n for op, n in self.torch.items() if op in names)

    @property
    def triton_launches(self) -> int:
        return sum(self.triton.values())

    @property
    def allocations(self) -> int:
        return self._of(_ALLOCATIONS)

    @property
    def host_reads(self) -> int:
        return self._of(_HOST_READS)

    @property
    def torch_kernels(self) -> int:
        """torch ops that launch a kernel on a GPU (everything but allocations, views, reads)."""
        return sum(self.torch.values()) - self._of(_ALLOCATIONS | _HOST_READS | _VIEWS)

    def summary(self) -> dict:
        return {"launches": self.triton_launches + self.torch_kernels, "triton_launches": self.triton_launches,
                "torch_kernels": self.torch_kernels, "allocations": self.allocations,
                "host_reads": self.host_reads,
                "torch_kernel_ops": sorted(op for op in self.torch
                                           if op not in _ALLOCATIONS | _HOST_READS | _VIEWS)}


class _Recorder(TorchDispatchMode):
    def __init__(self, count: OpCount):
        super().__init__()
        self.count = count

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count.torch[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def count_ops(fn, warmup: bool = True) -> OpCount:
    """Run fn() and count what it ran (see the module docstring). warmup: run it once uncounted
    first, so that what a process does once (caches, first compiles) is left out."""
    if warmup:
        fn()
    count = OpCount()
    restore = _count_triton(count)
    try:
        with _Recorder(count):
            fn()
    finally:
        restore()
    return count


def _count_triton(count: OpCount):
    """Count interpreted Triton launches (outside the recorder: the interpreter's own tensor
    copies are not the kernel's work). Returns the function that undoes the patch."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - without triton there is nothing to count
        return lambda: None
    run = InterpretedFunction.run

    def counted(self, *args, **kwargs):
        count.triton[self.fn.__name__] += 1
        with _disable_current_modes():
            return run(self, *args, **kwargs)

    InterpretedFunction.run = counted

    def restore():
        InterpretedFunction.run = run

    return restore
