"""torch.compile for the latency tool: compile a transformer in place the way users do, and report
what dynamo did meanwhile (graphs compiled, graph breaks, its warnings such as recompile-limit hits).

Two scopes, both diffusers/PyTorch recipes:
  * "full": `transformer.compile(mode=...)`, i.e. torch.compile of the whole forward;
  * "blocks": diffusers' regional compilation, `transformer.compile_repeated_blocks(mode=...)`,
    one compiled function for all transformer blocks (much shorter compile, same kernels inside
    the blocks).
Both compile in place (`nn.Module.compile`), so diffusers' hooks, `cache_context` and the pipeline
keep working; leaving the context restores eager execution and clears dynamo's caches, so one
variant's graphs never count against the next one's recompile limit.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field

import torch

COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")
SCOPES = ("full", "blocks")


@dataclass(frozen=True)
class CompileSettings:
    mode: str = "default"
    scope: str = "full"

    def __post_init__(self):
        if self.mode not in COMPILE_MODES:
            raise ValueError(f"compile mode must be one of {COMPILE_MODES}, got {self.mode!r}")
        if self.scope not in SCOPES:
            raise ValueError(f"compile scope must be one of {SCOPES}, got {self.scope!r}")

    @property
    def warm_calls(self) -> int:
        """Calls before a compiled forward is steady: the compiling one, and with CUDA graphs
        (reduce-overhead) the recording one after it."""
        return 3 if self.mode == "reduce-overhead" else 1


@dataclass
class DynamoReport:
    """What dynamo did inside one `compiled(...)` context."""

    graphs: int = 0
    graph_breaks: int = 0
    graph_break_reasons: list = field(default_factory=list)
    warnings: list = field(default_factory=list)  # dynamo's own warnings, e.g. recompile-limit hits

    def as_dict(self) -> dict:
        return {"graphs": self.graphs, "graph_breaks": self.graph_breaks,
                "graph_break_reasons": self.graph_break_reasons, "warnings": self.warnings}


class _Collect(logging.Handler):
    def __init__(self, sink):
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record):
        self.sink.append(record.getMessage().splitlines()[0][:300])


def _uncompile(module: torch.nn.Module) -> None:
    for m in module.modules():
        if getattr(m, "_compiled_call_impl", None) is not None:
            m._compiled_call_impl = None


@contextlib.contextmanager
def compiled(transformer: torch.nn.Module, settings: CompileSettings):
    """Compile `transformer` in place for the duration; yields a DynamoReport filled on exit."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    report = DynamoReport()
    handler = _Collect(report.warnings)
    dynamo_log = logging.getLogger("torch._dynamo")
    dynamo_log.addHandler(handler)
    kwargs = {} if settings.mode == "default" else {"mode": settings.mode}
    try:
        if settings.scope == "full":
            transformer.compile(**kwargs)
        else:
            transformer.compile_repeated_blocks(**kwargs)
        yield report
    finally:
        dynamo_log.removeHandler(handler)
        _uncompile(transformer)
        breaks = counters["graph_break"]
        report.graphs = int(counters["stats"]["unique_graphs"])
        report.graph_breaks = int(sum(breaks.values()))
        report.graph_break_reasons = [reason.splitlines()[0][:300] for reason in list(breaks)[:5]]
        torch._dynamo.reset()


def time_compiled(transformer, inputs: dict, settings: CompileSettings, *, timer, warmup: int, repeats: int,
                  progress=None) -> tuple[dict, torch.Tensor]:
    """Compile `transformer` in place, time its forwards, undo. Returns the result dict (forward
    times in ms, the first call's wall time in s, which includes compiling, and the DynamoReport)
    and the first steady forward's output (on the CPU, float32) for drift."""
    import statistics
    import time

    with compiled(transformer, settings) as report:
        timer.sync()
        t0 = time.perf_counter()
        transformer(**inputs)
        timer.sync()
        first_s = time.perf_counter() - t0
        for _ in range(max(warmup, settings.warm_calls - 1)):
            transformer(**inputs)
        output = transformer(**inputs)[0].float().cpu()  # a copy: CUDA graphs reuse their outputs
        handles = []
        for _ in range(repeats):
            t0 = timer.start()
            transformer(**inputs)
            handles.append(timer.stop(t0))
            if progress is not None:
                progress.update()
        timer.sync()
    ms = [timer.elapsed_ms(h) for h in handles]
    result = {"forward_ms": {"median": statistics.median(ms), "min": min(ms), "max": max(ms), "all": ms},
              "first_call_s": first_s, "mode": settings.mode, "scope": settings.scope, "dynamo": report.as_dict()}
    return result, output
