"""Policy: per-layer / per-step mode resolution and argument validation."""
import pytest

from wan_fp4.modes import FP4Params
from wan_fp4.policy import Policy


def test_layer_and_cross_resolution():
    p = Policy.build("direct-p", 6, bf16_layers=(0, -1), layer_modes={1: "fp8"}, guard_layers=(2,), guard_margin=112)
    assert [p.mode_for(i, False)[0] for i in range(6)] == ["bf16", "fp8", "direct-p-fp4", "direct-p", "direct-p", "bf16"]
    assert p.mode_for(2, False)[1] == FP4Params(guard_margin=112.0)
    assert p.mode_for(3, False)[1].guard_margin is None
    assert all(p.mode_for(i, True)[0] == "bf16" for i in range(6))
    q = Policy.build("fp8", 2, cross_attention=True)
    assert q.mode_for(1, True)[0] == "fp8" and q.mode_for(None, False)[0] == "fp8"


def test_call_modes_share_one_value_per_mode():
    """What a processor stores at enable(): equal (and for guards, the same) values for layers of
    one mode, so a compiled block function does not tell layers apart."""
    p = Policy.build("direct-p", 6, guard_layers=(4, 5), guard_margin=110, cross_attention=True)
    assert p.call_modes(0) == p.call_modes(3) == (("direct-p", p.fp4), ("direct-p", p.fp4))
    assert p.call_modes(4)[0][1] is p.call_modes(5)[0][1]
    assert p.call_modes(4)[1] == ("direct-p-fp4", FP4Params(guard_margin=110.0))
    assert Policy.build("fp8", 2).call_modes(1) == (("fp8", FP4Params()), ("bf16", FP4Params()))


def test_steps_count_from_the_end():
    p = Policy.build("direct-p", 2, bf16_steps=(0, -1))
    flags = []
    for step in range(5):
        p.set_step(step, 5)
        flags.append((p.step_known, p.step_bf16, p.mode_for(0, False)[0]))
    assert flags == [(True, True, "bf16")] + [(True, False, "direct-p")] * 3 + [(True, True, "bf16")]
    p.set_step(None, None)
    assert (p.step_known, p.step_bf16) == (False, False)
    with pytest.raises(RuntimeError, match="no num_inference_steps"):
        p.set_step(0, None)
    p = Policy.build("direct-p", 2, bf16_steps=(1,))
    p.set_step(1, None)
    assert p.step_bf16


def test_steps_outside_the_run_are_reported_once(caplog):
    p = Policy.build("direct-p", 2, bf16_steps=(0, 7, -9))
    with caplog.at_level("WARNING", logger="wan_fp4"):
        for step in range(5):
            p.set_step(step, 5)
    warnings = [r.getMessage() for r in caplog.records if "bf16_steps" in r.getMessage()]
    assert len(warnings) == 1 and "[-4, 7]" in warnings[0] and "5 steps" in warnings[0]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"bf16_layers": (-3,)}, ValueError, "bf16_layers: layer -3 is out of range"),
    ({"bf16_layers": (True,)}, TypeError, "bf16_layers must hold int"),
    ({"layer_modes": {0: "fp8", -2: "bf16"}}, ValueError, "names layer 0 twice"),
    ({"bf16_layers": (1,), "layer_modes": {1: "fp8"}}, ValueError, "both bf16_layers and layer_modes"),
    ({"guard_layers": (0,), "guard_margin": 110, "layer_modes": {0: "fp8"}}, ValueError, "both guard_layers and layer_modes"),
    ({"guard_layers": (0,), "guard_margin": "110"}, TypeError, "guard_margin must be a number"),
    ({"cross_attention": "yes"}, TypeError, "cross_attention must be True or False"),
    # a bare index used to fail inside Python ("'int' object is not iterable")
    ({"bf16_steps": -1}, TypeError, r"bf16_steps must be a sequence of int step indices such as \(0, -1\), got -1"),
    ({"bf16_layers": 1}, TypeError, "bf16_layers must be a sequence of int layer indices"),
    ({"guard_layers": 0, "guard_margin": 110}, TypeError, "guard_layers must be a sequence"),
    ({"layer_modes": [(0, "fp8")]}, TypeError, "layer_modes must be a dict"),
    # a NaN margin ran the shiftless map, an infinite one clamped every row
    ({"guard_layers": (0,), "guard_margin": float("nan")}, ValueError, "guard_margin must be finite"),
    ({"guard_layers": (0,), "guard_margin": float("inf")}, ValueError, "guard_margin must be finite"),
    ({"guard_layers": (0,), "guard_margin": True}, TypeError, "guard_margin must be a number"),
])
def test_build_rejects(kwargs, error, message):
    with pytest.raises(error, match=message):
        Policy.build("direct-p", 2, **kwargs)


def test_none_means_no_indices():
    p = Policy.build("direct-p", 2, bf16_steps=None, bf16_layers=None, guard_layers=None)
    assert (p.bf16_steps, p.bf16_layers, p.guard_layers) == ((), frozenset(), frozenset())
