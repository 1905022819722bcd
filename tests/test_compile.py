"""torch.compile of Wan transformers with wan_fp4 attention, on the dispatch path a GPU takes.

On a CPU, dispatch answers "reference" before looking at any kernel; on an H200 it asks the device,
imports the kernel families' specs (kernels/registry.py) and asks their `supports`. The
`gpu_dispatch` fixture makes selection here take that GPU path (capability (9, 0), the real
registry imports), with the chosen kernels' `run` running the reference. Each test then counts with dynamo's
own counters: graphs compiled, graph breaks, and so recompiles.
"""
from collections import Counter
from dataclasses import replace

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounterWithBackend
from torch._dynamo.utils import counters

from wan_fp4 import backend, dispatch, reference
from wan_fp4.kernels import registry
from wan_fp4.eval.compiled import POLICY_CASES, CompileSettings, check_policies, expected_graphs
from wan_fp4.processor import enable

LAYERS = 12
STEPS = 3

POLICIES = POLICY_CASES


@pytest.fixture
def gpu_dispatch(monkeypatch):
    """Kernel selection as on an H200 (sm_90): returns a Counter of kernel runs by name."""
    ran = Counter()

    def stand_in(name):
        def run(q, k, v, mode, scale, fp4, return_lse):
            ran[name] += 1
            out, lse = reference.attention(q, k, v, mode, scale, fp4=fp4, return_lse=True)
            return out, (lse if return_lse else None)
        return run

    def supports(modes):
        return lambda q, k, v, mode, fp4=None: (mode in modes, "" if mode in modes else f"not {mode!r}")

    # the real registry (its imports and specs), with these two kernels' questions and runs stood in
    specs = tuple(replace(s, supports=supports(s.modes), run=stand_in(s.name))
                  if s.name in ("sm90-cute", "fp4-emulation") else s for s in registry.specs())
    monkeypatch.setattr(dispatch, "_capability", lambda device: (9, 0))
    monkeypatch.setattr(registry, "_SPECS", specs)
    return ran


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return dict(hidden_states=torch.randn(1, 16, 3, 8, 8, generator=g), timestep=torch.tensor([500]),
                encoder_hidden_states=torch.randn(1, 16, 32, generator=g), return_dict=False)


@torch.no_grad()
def denoise(model, call, kw, steps=STEPS):
    outs = []
    for step in range(steps):
        with model.cache_context("cond", step_index=step, num_inference_steps=steps):
            outs.append(call(**kw)[0])
    return outs


def graph_breaks():
    return {**counters["graph_break"], **counters["unimplemented"]}


def test_fixture_takes_the_gpu_selection_path(gpu_dispatch):
    q = torch.randn(1, 64, 2, 32)
    assert dispatch.kernel_for(q, "direct-p") == "sm90-cute"
    assert dispatch.kernel_for(q, "fp8") == "sm90-cute"
    assert dispatch.kernel_for(q, "direct-p-fp4") == "fp4-emulation"
    dispatch.attention(q, q, q, mode="direct-p")
    assert gpu_dispatch == Counter({"sm90-cute": 1})


def test_kernel_selection_is_not_traced(gpu_dispatch, monkeypatch):
    """Selection runs inside the op: a traced call never reaches it, the run does."""
    q = torch.randn(1, 64, 2, 32)
    seen = []
    select = dispatch._choose
    monkeypatch.setattr(dispatch, "_choose", lambda *a, **k: seen.append(torch.compiler.is_compiling()) or select(*a, **k))
    compiled = torch.compile(lambda q: dispatch.attention(q, q, q, mode="direct-p") + 1, fullgraph=True,
                             backend="aot_eager")
    compiled(q)
    assert seen == [False] and gpu_dispatch["sm90-cute"] == 1


@pytest.mark.parametrize("policy", list(POLICIES))
def test_whole_transformer_compiles_once_per_step_kind(tiny_wan, gpu_dispatch, policy):
    """torch.compile(transformer) as users write it: no graph break, one graph, a second one only
    when a policy has bf16 steps (and never one per layer or per step)."""
    model = tiny_wan(num_layers=LAYERS)
    kw = inputs()
    handle = enable(model, **POLICIES[policy])
    eager = denoise(model, model, kw)
    assert gpu_dispatch["sm90-cute"] > 0  # the GPU path really ran
    cnt = CompileCounterWithBackend("eager")
    compiled = torch.compile(model, backend=cnt)
    got = denoise(model, compiled, kw)
    denoise(model, compiled, kw)  # a second video: nothing new to compile
    assert graph_breaks() == {}
    expected = 2 if "bf16_steps" in POLICIES[policy] else 1
    assert cnt.frame_count == expected, f"{cnt.frame_count} graphs for policy {policy}"
    assert all(torch.equal(a, b) for a, b in zip(got, eager))
    handle.disable()


@pytest.mark.parametrize("policy", list(POLICIES))
def test_regional_compile_shares_graphs_across_layers(tiny_wan, gpu_dispatch, policy):
    """diffusers' regional compilation (`compile_repeated_blocks`) compiles one block function for
    all layers: layers of one mode share a graph, so graphs = distinct per-layer modes (+ 1 for bf16
    steps), far below the layer count and dynamo's recompile limit."""
    model = tiny_wan(num_layers=LAYERS)
    kw = inputs()
    handle = enable(model, **POLICIES[policy])
    eager = denoise(model, model, kw)
    cnt = CompileCounterWithBackend("eager")
    model.compile_repeated_blocks(backend=cnt)
    got = denoise(model, model, kw)
    assert graph_breaks() == {}
    (pol,) = [p for _, _, p, _ in handle.transformers]
    modes = {pol.call_modes(i) for i in range(LAYERS)}
    # a forced-bf16 step: one more graph, shared by every layer (it reads no per-layer mode)
    expected = len(modes) + (1 if POLICIES[policy].get("bf16_steps") else 0)
    assert cnt.frame_count == expected < torch._dynamo.config.recompile_limit
    assert all(torch.equal(a, b) for a, b in zip(got, eager))
    handle.disable()


@pytest.mark.parametrize("regional", [False, True], ids=["whole", "regional"])
def test_direct_p_backend_route_compiles_once(tiny_wan, gpu_dispatch, regional):
    """The other route: stock WanAttnProcessor with the "direct_p" diffusers backend."""
    model = tiny_wan(num_layers=LAYERS)
    kw = inputs()
    backend.set_attention_backend(model, "direct_p")
    with backend.backend_mode("direct-p"):
        eager = denoise(model, model, kw)
        runs = gpu_dispatch["sm90-cute"]
        assert runs > 0
        cnt = CompileCounterWithBackend("eager")
        if regional:
            model.compile_repeated_blocks(backend=cnt)
            call = model
        else:
            call = torch.compile(model, backend=cnt)
        got = denoise(model, call, kw)
    assert graph_breaks() == {}
    assert cnt.frame_count == 1
    assert gpu_dispatch["sm90-cute"] == 2 * runs  # the compiled run took the same kernel
    assert all(torch.equal(a, b) for a, b in zip(got, eager))


@pytest.mark.parametrize("scope", ["full", "blocks"])
def test_policy_checker_of_the_device_script(tiny_wan, gpu_dispatch, scope):
    """`check_policies` (scripts/check_compile_device.py runs it on the real architectures) passes
    on this path, and counts what the tests above count."""
    model = tiny_wan(num_layers=LAYERS)
    cases = {k: POLICY_CASES[k] for k in ("all", "guard-layers")}
    rows = check_policies(model, inputs(), CompileSettings(scope=scope, backend="eager"), cases)
    assert [r["policy"] for r in rows] == list(cases) and all(r["ok"] for r in rows), rows
    assert rows[0]["graphs"] == (2 if scope == "full" else 5)  # "all": 4 layer modes + the bf16 steps
