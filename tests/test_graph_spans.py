"""graph_spans: splitting a replayed graph's launches into calls, and the input writer (the replay
itself needs a CUDA GPU)."""
from types import SimpleNamespace

import pytest
import torch

from wan_fp4.eval import graph_spans as G


def _launch(name, start, end):
    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end))


def test_calls_span_their_own_launches_and_skip_the_writers():
    # two runs: a writer's two launches, then a call of three whose second outlasts its third
    events = [_launch("w", 0, 2), _launch("w", 2, 4), _launch("a", 5, 9), _launch("b", 8, 20), _launch("c", 12, 18),
              _launch("w", 21, 23), _launch("w", 23, 25), _launch("a", 26, 30), _launch("b", 29, 33),
              _launch("c", 31, 40)]
    assert G.call_spans(events, 3, before=2) == [15, 14]
    assert G.call_spans(events[2:5], 3) == [15]


def test_launches_that_do_not_split_into_runs_are_an_error():
    events = [_launch("a", 0, 1)] * 5
    with pytest.raises(ValueError, match="do not split into runs of 1 \\+ 3"):
        G.call_spans(events, 3, before=1)
    with pytest.raises(ValueError, match="runs of 0 \\+ 0"):
        G.call_spans(events, 0)


def test_the_writer_restores_each_tensor_with_the_values_it_had():
    q, k = torch.randn(2, 5, 3, 8), torch.randn(2, 5, 3, 8)
    want = q.clone(), k.clone()
    write = G.input_writer(q, k)
    q.zero_()
    k.fill_(float("nan"))
    write()
    assert torch.equal(q, want[0]) and torch.equal(k, want[1])


def test_a_median_needs_more_than_the_dropped_first_call():
    with pytest.raises(ValueError, match="calls must be at least 2"):
        G.median_span_us(lambda: None, calls=1)
