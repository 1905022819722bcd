"""Capturing attention inputs from the tiny-random transformer and measuring per-layer error."""
import math

import pytest
import torch

from wan_fp4.eval import capture as C


@pytest.fixture(scope="module")
def pipe():
    from wan_fp4.pipelines import load_pipeline

    p = load_pipeline("tiny-random", "cpu", torch.float32)
    p.set_progress_bar_config(disable=True)
    return p


def _run(pipe, steps=2):
    return pipe("a cat", height=32, width=32, num_frames=5, num_inference_steps=steps, output_type="latent",
                generator=torch.Generator().manual_seed(0)).frames


def test_capture_selected_layers_steps_and_kinds(pipe):
    with C.capture_attention(pipe, layers=[1], steps=[1], kinds=("self", "cross")) as cap:
        _run(pipe)
    got = sorted((r.layer, r.kind, r.step) for r in cap.records)
    assert got == [(1, "cross", 1), (1, "self", 1)]
    self_rec = next(r for r in cap.records if r.kind == "self")
    cross_rec = next(r for r in cap.records if r.kind == "cross")
    assert self_rec.q.shape == self_rec.k.shape and self_rec.q.shape[1] == 8  # 2*16/2*16/2 tokens
    assert cross_rec.k.shape[1] == 512  # padded text context
    assert cap.nbytes == sum(r.nbytes for r in cap.records)


def test_capture_does_not_change_the_output_and_restores_the_dispatcher(pipe):
    from diffusers.models.transformers import transformer_wan

    before = transformer_wan.dispatch_attention_fn
    ref = _run(pipe)
    with C.capture_attention(pipe, steps=[0]):
        tapped = _run(pipe)
    assert torch.equal(ref, tapped)
    assert transformer_wan.dispatch_attention_fn is before


def test_capture_budget_skips_and_reports(pipe):
    with C.capture_attention(pipe, steps=[0], max_bytes=4000) as cap:
        _run(pipe)
    assert cap.nbytes <= 4000
    assert cap.skipped and "budget" in cap.skipped[0]["reason"]


def test_attention_errors_bf16_is_tiny_and_low_precision_is_not(pipe):
    with C.capture_attention(pipe, steps=[0]) as cap:
        _run(pipe)
    errs = C.attention_errors(cap.records, ["bf16", "fp8", "direct-p"], rows=4, progress=False)
    assert len(errs) == 3 * len(cap.records)
    by_mode = {m: [e["rel_l2"] for e in errs if e["mode"] == m] for m in ("bf16", "fp8", "direct-p")}
    assert max(by_mode["bf16"]) < 1e-5  # float32 pipeline: the bf16 mode is exact attention
    assert min(by_mode["direct-p"]) > 1e-4 and max(by_mode["direct-p"]) < 0.5
    assert all(e["rows"] == 4 and e["kernel"] for e in errs)


def test_plan_layers_fits_budget_and_keeps_must():
    assert C.plan_layers(30, 10, 2, 10_000) == list(range(30))
    chosen = C.plan_layers(40, 100, 2, 2000, must=(33, 34, 38, 39))  # room for 10 layers
    assert len(chosen) == 10 and {33, 34, 38, 39} <= set(chosen) and 0 in chosen
    with pytest.raises(ValueError, match="raise the capture budget"):
        C.plan_layers(40, 100, 2, 10)


def test_tap_refuses_nesting_and_non_wan_models(pipe):
    with C.AttentionTap(pipe):
        with pytest.raises(RuntimeError, match="another AttentionTap"):
            C.AttentionTap(pipe).__enter__()
    with pytest.raises(TypeError, match="Wan"):
        C.AttentionTap(torch.nn.Linear(2, 2))


def test_layer_error_plot_writes_png(tmp_path):
    errs = [{"layer": i, "kind": "self", "step": 0, "mode": "direct-p", "rel_l2": 0.01 * (i + 1)} for i in range(3)]
    errs.append({"layer": 0, "kind": "self", "step": 0, "mode": "direct-p-fp4", "rel_l2": math.nan})
    C.plot_layer_errors(errs, tmp_path / "l.png", title="t", smoke=True)
    assert (tmp_path / "l.png").stat().st_size > 1000
