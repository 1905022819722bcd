"""A call's GPU time from a CUDA graph, read launch by launch (`wan-fp4 bench attention --graph-spans`).

A short attention call is a few launches, and a graph replay removes the host's share. Each call's
span runs from its first launch's start to its last launch's end, as CUPTI timestamps them (through
torch.profiler), so launches before and after a call are not counted in it. Two conditions:

- replayed: the same call again and again on the same inputs. A call whose own traffic exceeds L2
  (a pre-pass's codes and the output) finds its inputs evicted and reads them from DRAM, while a
  call with less traffic finds them in L2 from the call before.
- inputs written: each call follows a launch per input tensor that writes it (the same values, from
  a copy), as a model's projections and RoPE leave Q, K and V in L2 just before attention.
"""
from __future__ import annotations

import statistics

import torch
from torch.profiler import ProfilerActivity, profile

CALLS = 10  # calls per captured graph (a span's median drops the first call's: the graph's own start)


def call_spans(events, launches: int, before: int = 0) -> list[float]:
    """Each call's span (the events' time unit) from the events of a graph's runs in start order:
    each run is `before` launches (an input writer's) and then the call's `launches`."""
    run = before + launches
    if launches < 1 or before < 0 or len(events) % run:
        raise ValueError(f"{len(events)} launches do not split into runs of {before} + {launches}")
    calls = [events[i + before:i + run] for i in range(0, len(events), run)]
    return [max(e.time_range.end for e in c) - c[0].time_range.start for c in calls]


def input_writer(*tensors):
    """A callable writing each tensor from a copy of its present values, one elementwise launch per
    tensor: the inputs stay the same, and they are fresh in L2 when the call after it starts."""
    copies = [t.clone() for t in tensors]

    def write():
        for t, c in zip(tensors, copies):
            torch.mul(c, 1.0, out=t)
    return write


def graphed(fn, calls: int):
    """A callable replaying `calls` calls of fn from one CUDA graph: the GPU's share of a call, no
    host work (what torch.compile's mode="reduce-overhead" gives; the score check is skipped
    under capture)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside capture (allocations, compilation)
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph.replay


def _replayed_events(body, calls: int) -> list:
    """The GPU events of one replay of a graph of `calls` runs of body, in start order."""
    replay = graphed(body, calls)
    for _ in range(3):
        replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        replay()
        torch.cuda.synchronize()
    return sorted((e for e in prof.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)


def median_span_us(fn, writer=None, calls: int = CALLS) -> float:
    """fn's median span in us over a replayed graph of `calls` calls (the first dropped), each call
    after writer's launches where a writer is given (`input_writer`)."""
    if calls < 2:
        raise ValueError(f"calls must be at least 2 (the first call's span is dropped), got {calls}")
    before = len(_replayed_events(writer, 1)) if writer is not None else 0
    launches = len(_replayed_events(fn, 1))

    def body():
        if writer is not None:
            writer()
        fn()
    return statistics.median(call_spans(_replayed_events(body, calls), launches, before)[1:])


def spans_us(fn, inputs, calls: int = CALLS) -> dict:
    """{"replayed": us, "inputs written": us} for fn (no arguments) reading the tensors `inputs`."""
    return {"replayed": median_span_us(fn, None, calls),
            "inputs written": median_span_us(fn, input_writer(*inputs), calls)}
