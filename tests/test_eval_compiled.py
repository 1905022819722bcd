"""The latency tool's compiled timings, whole-video breakdown and opt-in stacks, on the CPU with the
tiny-random model (wall clock: the code path, not figures)."""
import json
import sys
import types

import pytest
import torch

from wan_fp4.eval import latency as L
from wan_fp4.eval import stacks
from wan_fp4.eval.compiled import CompileSettings


def test_compile_times_variants_eager_and_compiled_with_both_ratios(tmp_path, capsys):
    out = tmp_path / "lat.json"
    rc = L.main(["--model", "tiny-random", "--height", "32", "--width", "32", "--frames", "5", "--warmup", "0",
                 "--repeats", "1", "--modes", "bf16,direct-p,direct-p+float8-linears,cudnn-fp8", "--compile",
                 "--compile-scope", "blocks", "--pipeline-steps", "1", "--steps", "3", "--json", str(out),
                 "--no-progress"])
    assert rc == 0
    d = json.loads(out.read_text())
    assert d["compile"] == {"mode": "default", "scope": "blocks"}
    base, dp = d["variants"]["bf16-sdpa"], d["variants"]["direct-p"]
    for r in (base, dp):
        c = r["compiled"]
        assert c["forward_ms"]["median"] > 0 and c["first_call_s"] > 0
        assert c["dynamo"] == {"graphs": 1, "graph_breaks": 0, "graph_break_reasons": [], "warnings": []}
    assert base["compiled"]["speedup_vs_stock_compiled"] == 1.0
    assert dp["compiled"]["speedup_vs_stock_compiled"] == pytest.approx(
        base["compiled"]["forward_ms"]["median"] / dp["compiled"]["forward_ms"]["median"])
    assert dp["compiled"]["speedup_vs_stock"] == pytest.approx(
        base["forward_ms"]["median"] / dp["compiled"]["forward_ms"]["median"])
    # drift against stock eager: none for stock eager itself, some for direct-p, both ways
    assert base["drift_vs_stock"]["eager"]["rel_l2"] == 0.0
    assert 0 < dp["drift_vs_stock"]["eager"]["rel_l2"] < 0.1 and 0 < dp["drift_vs_stock"]["compiled"]["rel_l2"] < 0.1
    assert "8.9" in d["skipped"]["direct-p+float8-linears"] and "cpu" in d["skipped"]["direct-p+float8-linears"]
    assert "cudnn-fp8" in d["skipped"]
    # the whole video: eager and compiled, each with its breakdown, scaled to --steps
    pipe = d["pipeline"]
    assert set(pipe["runs"]) == set(pipe["compiled_runs"]) == {"bf16-sdpa", "direct-p"}
    for run in list(pipe["runs"].values()) + list(pipe["compiled_runs"].values()):
        assert run["steps"] == 1 and run["scaled_to_steps"] == 3
        parts = run["text_encoding_s"] + run["denoise_s"] + run["vae_decode_s"] + run["postprocess_s"]
        assert run["text_encoding_s"] > 0 and run["vae_decode_s"] > 0 and run["denoise_s"] > 0
        assert parts == pytest.approx(run["seconds"])
        assert run["scaled_seconds"] == pytest.approx(run["seconds"] + 2 * run["denoise_s"])
    assert pipe["compiled_runs"]["direct-p"]["dynamo"]["graphs"] == 1
    printed = capsys.readouterr().out
    assert "vs compiled" in printed and "pipeline direct-p compiled" in printed


def test_variants_torch_compile_cannot_trace_say_so():
    assert not L.VARIANTS["cudnn-fp8"].compilable and not L.VARIANTS["bf16-fa4"].compilable
    assert all(L.VARIANTS[n].compilable for n in ("bf16-sdpa", "direct-p", "float8-linears",
                                                   "direct-p+float8-linears"))


@pytest.mark.parametrize("argv, message", [
    (["--compile-mode", "fast"], "--compile-mode"),
    (["--compile-scope", "layers"], "--compile-scope"),
])
def test_bad_compile_arguments_name_the_flag(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit):
        L.main(argv + ["--json", str(tmp_path / "x.json")])
    assert message in capsys.readouterr().err


def test_compile_settings_check_their_values():
    assert CompileSettings("reduce-overhead").warm_calls == 3 and CompileSettings().warm_calls == 1
    with pytest.raises(ValueError, match="compile mode"):
        CompileSettings("fast")
    with pytest.raises(ValueError, match="compile scope"):
        CompileSettings("default", "layers")


# ----------------------------------------------------------------------------- stacks
def test_float8_stack_is_offered_as_opt_in_variants():
    for name, mode in (("float8-linears", None), ("direct-p+float8-linears", "direct-p")):
        v = L.VARIANTS[name]
        assert v.kind == "stack" and v.linears == "float8" and v.mode == mode
        assert name not in L.DEFAULT_VARIANTS


def test_float8_stack_refuses_clearly_without_an_sm89_gpu(monkeypatch):
    with pytest.raises(stacks.StackUnavailable, match=r"CUDA GPU of compute capability >= 8.9.*cpu"):
        stacks.check_available("float8", "cpu")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    with pytest.raises(stacks.StackUnavailable, match="sm_80"):
        stacks.check_available("float8", "cuda:0")
    with pytest.raises(ValueError, match="linears must be one of"):
        stacks.check_available("int4", "cpu")


def test_float8_config_is_rowwise_e4m3():
    pytest.importorskip("torchao")
    from torchao.quantization import PerRow

    cfg = stacks.float8_config()
    assert all(isinstance(g, PerRow) for g in cfg.granularity) and len(cfg.granularity) == 2
    assert cfg.activation_dtype == cfg.weight_dtype == torch.float8_e4m3fn
    assert cfg.set_inductor_config is False  # every compiled variant shares inductor's settings


def test_float8_targets_are_the_block_linears(tiny_wan):
    model = tiny_wan(num_layers=3).to(torch.bfloat16)
    targets = stacks.float8_targets(model)
    in_blocks = [m for m in model.blocks.modules() if isinstance(m, torch.nn.Linear)]
    assert [m for _, m in targets] == in_blocks and all(n.startswith("blocks.") for n, _ in targets)
    outside = [m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and not n.startswith("blocks")]
    assert outside and not set(outside) & {m for _, m in targets}
    assert stacks.float8_targets(tiny_wan(num_layers=1)) == []  # float32 weights: nothing to quantize


def _fake_torchao(monkeypatch, seen):
    def quantize_(root, config, filter_fn):
        for fqn, m in root.named_modules():
            if isinstance(m, torch.nn.Linear) and filter_fn(m, fqn):
                seen.append(fqn)
                m.weight = torch.nn.Parameter(torch.zeros_like(m.weight), requires_grad=False)
                m.extra_repr = lambda: "quantized"

    fake = types.ModuleType("torchao.quantization")
    fake.quantize_ = quantize_
    monkeypatch.setitem(sys.modules, "torchao.quantization", fake)
    monkeypatch.setattr(stacks, "float8_config", lambda: "config")


def test_linears_put_the_original_weights_back(tiny_wan, monkeypatch):
    """Quantization replaces weights (torchao: new Parameters, a per-instance repr); leaving the
    variant restores the very same bf16 weights. torchao's quantize_ is stood in for (float8 needs
    an sm89 GPU), with torchao's own contract: filter_fn(module, fqn) picks the modules."""
    model = tiny_wan(num_layers=2).to(torch.bfloat16)
    before = {n: m.weight for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    seen = []
    _fake_torchao(monkeypatch, seen)
    with stacks.Linears(model) as applied:
        assert applied.count == len(seen) > 0 and all(f.startswith("blocks.") for f in seen)
        assert all(model.get_submodule(f).weight.abs().sum() == 0 for f in seen)
    after = {n: m.weight for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert all(after[n] is w for n, w in before.items())
    assert all("extra_repr" not in vars(model.get_submodule(f)) for f in seen)


def test_a_stack_variant_that_fails_to_apply_leaves_the_weights(tiny_wan, monkeypatch):
    from wan_fp4.processor import enable

    model = tiny_wan(num_layers=2).to(torch.bfloat16)
    before = {n: m.weight for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    _fake_torchao(monkeypatch, [])
    enable(model)  # so the stack's own enable() refuses
    with pytest.raises(RuntimeError, match="already enabled"):
        with L.Applied(model, L.VARIANTS["direct-p+float8-linears"], timer=L.Timer("cpu")):
            pass
    assert all(m.weight is before[n] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear))


def test_reduce_overhead_opens_a_cudagraph_step_per_forward_and_returns_copies(monkeypatch):
    """CUDA graphs reuse output buffers: under reduce-overhead every forward marks a new step and
    hands back its own tensors (else a pipeline's conditional prediction is overwritten by the
    unconditional call); the hooks go with the compile."""
    from wan_fp4.eval.compiled import compiled

    marks = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    model = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    with compiled(model, CompileSettings("reduce-overhead", "full")):
        a, b = model(x), model(x)
    assert len(marks) == 2 and torch.equal(a, b) and a.data_ptr() != b.data_ptr()
    model(x)
    assert len(marks) == 2 and not model._forward_pre_hooks and not model._forward_hooks
