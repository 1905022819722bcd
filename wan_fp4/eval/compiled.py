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
    backend: str = "inductor"  # "eager": dynamo only, for checking what is traced without compiling

    def __post_init__(self):
        if self.mode not in COMPILE_MODES:
            raise ValueError(f"compile mode must be one of {COMPILE_MODES}, got {self.mode!r}")
        if self.scope not in SCOPES:
            raise ValueError(f"compile scope must be one of {SCOPES}, got {self.scope!r}")
        if self.backend != "inductor" and self.mode != "default":
            raise ValueError(f"compile mode {self.mode!r} is an inductor mode; backend {self.backend!r} takes none")

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


def _clone_tensors(out):
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, out)


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
    kwargs = {"backend": settings.backend}
    if settings.mode != "default":
        kwargs["mode"] = settings.mode
    hooks = []
    if settings.mode == "reduce-overhead":
        # CUDA graphs reuse their output buffers: each forward opens a new step, and returns a copy
        # (a pipeline holds the conditional prediction while it runs the unconditional one)
        hooks = [transformer.register_forward_pre_hook(lambda *_: torch.compiler.cudagraph_mark_step_begin()),
                 transformer.register_forward_hook(lambda _m, _a, out: _clone_tensors(out))]
    try:
        if settings.scope == "full":
            transformer.compile(**kwargs)
        else:
            transformer.compile_repeated_blocks(**kwargs)
        yield report
    finally:
        for hook in hooks:
            hook.remove()
        dynamo_log.removeHandler(handler)
        _uncompile(transformer)
        # a break dynamo cannot resume from ("skipping the function and falling back to eager") is
        # counted under "unimplemented", not "graph_break"; both leave code outside the graph
        breaks = {**counters["graph_break"], **counters["unimplemented"]}
        report.graphs = int(counters["stats"]["unique_graphs"])
        report.graph_breaks = int(sum(breaks.values()))
        report.graph_break_reasons = [reason.splitlines()[0][:300] for reason in list(breaks)[:5]]
        torch._dynamo.reset()


def time_compiled(transformer, inputs: dict, settings: CompileSettings, *, timer, warmup: int, repeats: int,
                  progress=None) -> tuple[dict, torch.Tensor]:
    """Compile `transformer` in place, time its forwards, undo. Returns the result dict (forward
    times in ms, the first call's wall time in s, which includes compiling, and the DynamoReport)
    and the first timed forward's output (on the CPU, float32) for drift."""
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
        ms, output = timer.forwards(lambda: transformer(**inputs), repeats, progress)
    result = {"forward_ms": {"median": statistics.median(ms), "min": min(ms), "max": max(ms), "all": ms},
              "first_call_s": first_s, "mode": settings.mode, "scope": settings.scope, "dynamo": report.as_dict()}
    return result, output


# Every policy enable() offers, alone and together, with layers given from the end so that one
# case list serves any depth (the test's 12 layers, Wan2.1's 30 and 40).
POLICY_CASES = {
    "direct-p": {},
    "bf16-steps": {"bf16_steps": (0, -1)},
    "bf16-layers": {"bf16_layers": (0, 5, -1)},
    "layer-modes": {"layer_modes": {2: "fp8", 3: "fp8"}},
    "guard-layers": {"guard_layers": (-4, -3, -2), "guard_margin": 110},
    "cross-attention": {"cross_attention": True},
    "all": {"bf16_steps": (0,), "bf16_layers": (0,), "layer_modes": {1: "fp8"}, "guard_layers": (-2, -1),
            "guard_margin": 110, "cross_attention": True},
}


def expected_graphs(policy, scope: str, bf16_steps_ran: set) -> int:
    """Graphs a clean compile of one input shape makes under `policy` (a wan_fp4.policy.Policy):
    on steps the policy runs, the whole forward compiles once and a block function once per distinct
    per-layer mode; steps forced to bf16 make one graph more. `bf16_steps_ran`: the values
    `policy.step_bf16` took over the run."""
    graphs = 1 if scope == "full" else len({policy.call_modes(i) for i in range(policy.num_layers)})
    return (graphs if False in bf16_steps_ran else 0) + (1 if True in bf16_steps_ran else 0)


def check_policies(transformer, inputs: dict, settings: CompileSettings, cases=None, steps: int = 3) -> list[dict]:
    """For each enable() policy case: enable, compile in place, run `steps` denoising steps (each in
    the transformer's cache_context), and compare dynamo's graphs with `expected_graphs`. A row is
    ok when graphs match, there is no graph break and no dynamo warning."""
    from ..processor import enable

    rows = []
    for name, kwargs in (cases or POLICY_CASES).items():
        handle = enable(transformer, **kwargs)
        try:
            (policy,) = [p for _, _, p, _ in handle.transformers]
            kinds = set()
            with torch.inference_mode(), compiled(transformer, settings) as report:
                for step in range(steps):
                    with transformer.cache_context("cond", step_index=step, num_inference_steps=steps):
                        kinds.add(policy.step_bf16)
                        transformer(**inputs)
        finally:
            handle.disable()
        want = expected_graphs(policy, settings.scope, kinds)
        ok = report.graphs == want and report.graph_breaks == 0 and not report.warnings
        rows.append({"policy": name, "kwargs": repr(kwargs), "expected_graphs": want, "ok": ok, **report.as_dict()})
    return rows
