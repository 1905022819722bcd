"""`wan-fp4 check` (wan_fp4.eval.device_check) on CPU: the Triton families run in Triton's
interpreter (conftest sets TRITON_INTERPRET=1 without a GPU), the CuTe families are skipped with
their reason; a kernel that disagrees with the reference fails the run."""
import json
import math

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed: the Triton kernels cannot run")

from wan_fp4 import cli  # noqa: E402
from wan_fp4.eval import device_check as D  # noqa: E402
from wan_fp4.kernels import registry  # noqa: E402


@pytest.mark.parametrize("suite", ["quick", "full"])
def test_every_kernel_family_has_cases(suite):
    cases = D.cases(suite)
    assert {c.kernel for c in cases} == set(registry.NAMES)
    for c in cases:
        assert c.probe in D.PROBES and c.kernel in registry.NAMES
    bounded = {c.kernel for c in cases if c.probe == "attention" and "rel_l2" in c.tol}
    assert bounded == set(registry.NAMES), "every family is compared with the reference"
    assert [c.probe for c in D.cases("large")] == ["large"]


def test_a_config_runs_in_the_modes_it_applies_to():
    """check --configs '[{"f16_bytes": true}]': direct-p cases only (the fp8 kernel refuses it)."""
    cfg = {"f16_bytes": True}
    modes = {c.mode for c in D.cases("full", ["sm90-cute"], configs=[cfg])
             if c.probe == "attention" and c.options.get("config") == cfg}
    assert modes == {"direct-p"}
    both = {c.mode for c in D.cases("full", ["sm90-cute"], configs=[{"fold": 1}])
            if c.probe == "attention" and c.options.get("config") == {"fold": 1}}
    assert both == {"direct-p", "fp8"}


def test_a_configs_attention_cases_run_every_tail_of_a_fold_group_of_four():
    """check --configs '[{"fold": 4}]': the config's sm90 attention cases have key-tile counts of
    every remainder mod 4 (the overlapped schedule's tail runs 1 to 4 steps), in both modes."""
    cfg = {"fold": 4}
    for mode in ("direct-p", "fp8"):
        tiles = {-(-c.shape[2] // 128) for c in D.cases("full", ["sm90-cute"], configs=[cfg])
                 if c.probe == "attention" and c.mode == mode and c.options.get("config") == cfg}
        assert {n % 4 for n in tiles} == {0, 1, 2, 3}, (mode, sorted(tiles))


def test_bad_suite_and_kernel_are_refused():
    with pytest.raises(ValueError, match="suite"):
        D.cases("medium")
    with pytest.raises(ValueError, match="unknown kernel 'cuda'"):
        D.cases("quick", ["cuda"])


def test_quick_suite_on_cpu(tmp_path, capsys):
    path = tmp_path / "check.json"
    assert cli.main(["check", "--suite", "quick", "--device", "cpu", "--json", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    status = {}
    for line in lines:
        if line[:4].strip() in ("ok", "FAIL", "skip", "info"):
            status.setdefault(line.split()[1], set()).add(line[:4].strip())
    assert status["triton"] == {"ok", "skip"}  # the hardware-convert cases need CUDA
    assert status["fp4-emulation"] == {"ok"}
    assert status["sm90-cute"] == status["sm100-cute"] == {"skip"}
    assert any("skip sm90-cute" in line and "needs CUDA" in line for line in lines)
    assert lines[-1].startswith("CHECK PASSED")
    summary = json.loads(path.read_text())
    assert summary["ok"] and summary["counts"]["FAIL"] == 0 and summary["counts"]["ok"] >= 10
    attn = [r for r in summary["cases"] if r["status"] == "ok" and "kernel_vs_exact" in r["metrics"]]
    assert {r["kernel"] for r in attn} == {"triton", "fp4-emulation"}


def _triton_case():
    return next(c for c in D.cases("quick", ["triton"]) if c.probe == "attention" and c.mode == "direct-p")


def test_a_kernel_off_the_reference_fails(monkeypatch, capsys):
    real = D.LAUNCH["triton"]

    def off(q, k, v, case, ctx):  # 5% too large: far outside the 1e-2 bound
        out, lse, extra = real(q, k, v, case, ctx)
        return out * 1.05, lse, extra

    monkeypatch.setitem(D.LAUNCH, "triton", off)
    case = _triton_case()
    monkeypatch.setattr(D, "cases", lambda *a, **k: [case])
    assert D.main(["triton"], "quick", device="cpu") == 1
    out = capsys.readouterr().out
    fail = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(fail) == 1 and "triton" in fail[0] and "rel_l2" in fail[0] and "> 0.01" in fail[0]
    assert "CHECK FAILED" in out


def test_a_kernel_that_raises_or_writes_nan_fails(monkeypatch):
    def boom(q, k, v, case, ctx):
        raise RuntimeError("launch failed")

    monkeypatch.setitem(D.LAUNCH, "triton", boom)
    row = D.run([_triton_case()], "cpu")["cases"][0]
    assert row["status"] == "FAIL" and "RuntimeError: launch failed" in row["failed"][0]

    def unwritten(q, k, v, case, ctx):
        out = torch.full_like(q, math.nan)
        return out, torch.zeros(q.shape[0], q.shape[2], q.shape[1]), {}

    monkeypatch.setitem(D.LAUNCH, "triton", unwritten)
    row = D.run([_triton_case()], "cpu")["cases"][0]
    assert row["status"] == "FAIL" and any(f.startswith("nan") for f in row["failed"])


def test_unavailable_families_are_skipped_with_the_reason(monkeypatch):
    sm100 = D.cases("quick", ["sm100-cute"])[0]
    # on a GPU of another generation (an H200): offered only on sm_100
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    why = D.unavailable(sm100, torch.device("cuda"))
    assert "sm100-cute runs on sm_100" in why and "sm_90" in why
    assert D.unavailable(D.cases("quick", ["sm90-cute"])[0], torch.device("cuda")) == ""  # offered: runs or FAILs
    # a family whose software stack is missing
    gone = registry.unavailable("triton", ("fp8", "direct-p"), (8, 9), "triton could not be imported: test")
    monkeypatch.setattr(registry, "spec", lambda name: gone)
    row = D.run([_triton_case()], "cpu")["cases"][0]
    assert row["status"] == "skip" and "triton could not be imported: test" in row["skipped"]


def test_bounds_judge_every_bounded_metric():
    assert D._judge({"rel_l2": 5e-3, "nan": 0}, {"rel_l2": 1e-2, "nan": 0}) == []
    assert D._judge({"rel_l2": math.nan}, {"rel_l2": 1e-2}) == ["rel_l2 nan > 0.01"]
    assert D._judge({}, {"rel_l2": 1e-2}) == ["rel_l2 not measured"]
    assert D._judge({"rel_l2": None}, {"rel_l2": 1e-2}) == []  # not applicable to this outcome


def _subnormal_cases():
    return [c for c in D.cases("quick", ["triton"]) if c.inputs == "subnormal"]


def test_subnormal_pre_pass_cases_cover_q_k_v_in_every_input_dtype():
    cases = _subnormal_cases()
    assert {(c.dtype, c.options["hw_cvt"]) for c in cases} == {
        (dt, hw) for dt in ("bfloat16", "float32", "float16") for hw in (True, False)}
    assert {c.dtype for c in D.cases("full", ["triton"]) if c.inputs == "subnormal"} == {"bfloat16", "float32", "float16"}
    for c in cases:
        assert c.probe == "prepare" and c.tol == {"worst_mismatch": 0}
        q, k, v = D.make_inputs(c, torch.device("cpu"))
        assert q.dtype == getattr(torch, c.dtype)
        for t in (q, k, v):  # mostly subnormal, and not all zero
            assert D.subnormal_count(t) > t.numel() // 2 and bool((t != 0).any())


def _flush_subnormals(t):
    return torch.where(t.abs() < torch.finfo(t.dtype).tiny, torch.zeros_like(t), t)


@pytest.mark.parametrize("flush", [False, True])
def test_subnormal_pre_pass_case_fails_when_the_pre_pass_flushes_them(monkeypatch, flush):
    """Every subnormal case, its pre-pass stood in for by the torch path on CPU (the Triton path the
    case runs needs CUDA for BF16, see docs/NUMERICS.md): the reference's codes pass, and a pre-pass
    that flushes subnormal inputs to zero, as FTZ arithmetic would, fails."""
    import dataclasses

    from wan_fp4.kernels import prepare

    real = prepare.prepare_fp8

    def stand_in(q, k, v, backend, hw_cvt):
        if flush:
            q, k, v = (_flush_subnormals(t) for t in (q, k, v))
        return real(q, k, v, backend="torch")

    monkeypatch.setattr(prepare, "prepare_fp8", stand_in)
    todo = [dataclasses.replace(c, cuda_only=False) for c in _subnormal_cases()]
    rows = D.run(todo, "cpu")["cases"]
    assert [r["status"] for r in rows] == ["FAIL" if flush else "ok"] * len(todo)
    if flush:
        assert all(r["failed"][0].startswith("worst_mismatch") for r in rows)


def test_run_steps_records_a_failing_step_skips_on_request_and_writes_after_each(tmp_path, capsys):
    import json

    from wan_fp4.eval.timing import run_steps

    results, path, seen = {"job": "bench"}, tmp_path / "r.json", []

    def boom():
        raise RuntimeError("kernel fault")

    def after():
        seen.append(json.loads(path.read_text()))  # what the job had returned if cut short here
        results["timed"] = True

    run_steps([("first", boom), ("sweep", lambda: seen.append("never")), ("last", after)], results, path, 0.0,
              skip=lambda name: "past the budget" if name == "sweep" else None)
    assert seen == [{"job": "bench", "failures": ["first"]}]
    assert json.loads(path.read_text()) == {"job": "bench", "failures": ["first"], "timed": True}
    out = capsys.readouterr()
    assert "[skip] sweep: past the budget" in out.out and "kernel fault" in out.err


def _non_finite_cases(kernel):
    return [c for c in D.cases("quick", [kernel]) if c.name.startswith("non-finite")]


@pytest.mark.parametrize("skip_check", [False, True])
def test_non_finite_input_cases_pass_only_when_the_kernel_path_raises(monkeypatch, skip_check):
    """NaN in q or v, inf in k: every FP8 family has the cases; on the Triton kernels (under the
    interpreter here) they pass, and fail once the pre-pass's flags are not looked at."""
    from wan_fp4.kernels import prepare

    for kernel in ("sm90-cute", "triton"):
        assert {(c.mode, c.options["poison"]) for c in _non_finite_cases(kernel)} == {
            (m, p) for m in ("direct-p", "fp8") for p in ("q nan", "k inf", "v nan")}
    if skip_check:
        monkeypatch.setattr(prepare.ScoreRangeCheck, "finish", lambda self: None)
    rows = D.run(_non_finite_cases("triton"), "cpu")["cases"]
    assert len(rows) == 6
    assert {r["status"] for r in rows} == ({"FAIL"} if skip_check else {"ok"}), [r.get("detail") for r in rows]


def test_a_split_tail_config_is_checked_against_the_reference_in_the_kernels_segments():
    """check --configs '[{"split_tail": true}]': the sm90 cases' reference splits the rows the
    plan splits (kernels/sm90/split.py), also when the case checks a subset of the rows."""
    from wan_fp4 import reference
    from wan_fp4.kernels.sm90.split import row_segments

    g = torch.Generator().manual_seed(8)
    q = torch.randn(1, 1000, 3, 64, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(1, 8192, 3, 64, generator=g).to(torch.bfloat16) for _ in range(2))
    cases = [c for c in D.cases("full", ["sm90-cute"], configs=[{"split_tail": True}])
             if c.probe == "attention" and (c.options.get("config") or {}).get("split_tail")]
    assert {c.mode for c in cases} == {"direct-p", "fp8"}
    for mode in ("direct-p", "fp8"):
        case = next(c for c in cases if c.mode == mode)
        seg = row_segments(1, 3, 1000, 8192)  # D64: no clusters; 24 CTAs of 64 key tiles, each in halves
        assert bool((seg == 2).all())
        out, lse = D.case_reference(q, k, v, case)
        want, want_lse = reference.attention(q, k, v, mode, return_lse=True, segments=seg)
        assert torch.equal(out, want) and torch.equal(lse, want_lse)
        assert not torch.equal(out, reference.attention(q, k, v, mode))
        rows = torch.arange(896, 1000)  # a whole Q-scale block (the last), as the check's row cases are
        part = D.case_reference(q[:, rows], k, v, case, rows=rows, s_q=1000)[0]
        assert torch.equal(part, want[:, rows])


def test_the_plain_sm90_cases_launch_as_the_package_does(monkeypatch):
    """The check's cases with no config of their own run what a user's call runs: their lengths'
    kernels (config.length_config: short and persistent), elsewhere the defaults, on the operands
    host.run gives them (direct-p: Q's codes left to the kernel). An empty config would choose the
    defaults explicitly, and those kernels would never meet the reference. The case's line names
    the options it ran; the LSE's shift comes from Q's codes made by the pre-pass."""
    from types import SimpleNamespace

    from wan_fp4.kernels import prepare, sm90

    launched, prepared, shifted = [], [], []

    def prepare_fp8(q, k, v, quantise_q=True, **kw):
        prepared.append(quantise_q)
        return SimpleNamespace(seq_q=q.shape[1], seq_kv=k.shape[1], q8=q if quantise_q else None)

    monkeypatch.setattr(prepare, "prepare_fp8", prepare_fp8)
    monkeypatch.setattr(sm90, "launch", lambda ops, mode, d, config=None, **kw: launched.append((mode, d, config, ops)))
    monkeypatch.setattr(sm90, "lse_shift", lambda ops, d: shifted.append(ops) or 0.0)
    plain = [c for c in D.cases("full", ["sm90-cute"]) if c.probe == "attention" and not c.options.get("config")]
    for shape, named in (((1, 100, 77, 2, 128), {"direct-p": '{"fold":1}', "fp8": '{"fold":1}'}),
                         ((2, 700, 700, 3, 64), {"direct-p": '{"fold":1}', "fp8": None}),
                         ((1, 200, 1300, 2, 128), {"direct-p": None, "fp8": None}),
                         ((2, 1000, 1000, 3, 128), {"direct-p": '{"fold":1,"persistent":132}', "fp8": '{"fold":1}'}),
                         ((1, 1500, 1500, 24, 128), {"direct-p": '{"persistent":132}', "fp8": None})):
        for mode in ("direct-p", "fp8"):
            case = next(c for c in plain if c.mode == mode and c.shape == shape)
            q, k, v = (torch.randn(shape[0], s, shape[3], shape[4]).to(torch.bfloat16)
                       for s in (shape[1], shape[2], shape[2]))
            prepared.clear()
            extra = D._launch_sm90(q, k, v, case, type("Ctx", (), {"prebuilt": None})())[2]
            assert launched[-1][:3] == (mode, shape[4], None), case.name
            assert extra.get("length") == named[mode], case.name
            # direct-p's kernel makes Q's codes; its shift then reads the pre-pass's
            assert prepared == ([False, True] if mode == "direct-p" else [True]), case.name
            assert (launched[-1][3].q8 is None) == (mode == "direct-p") and shifted[-1].q8 is not None


def test_prebuilt_is_compared_with_jit_for_the_defaults_and_the_short_kernels(monkeypatch):
    """The prebuilt == JIT probe runs at a short length, where a plain call takes its lengths' kernel
    (short, and for direct-p D128 persistent): it compares that kernel and the defaults' (named
    explicitly), prebuilt and JIT each."""
    from types import SimpleNamespace

    from wan_fp4.kernels import prepare, sm90

    launched = []

    def launch(ops, mode, d, config=None, out=None, lse=None, prebuilt=None, **kw):
        launched.append((mode, d, config, prebuilt))
        out.zero_()
        lse.zero_()

    monkeypatch.setattr(D, "_dsl_installed", lambda: True)
    monkeypatch.setattr(prepare, "prepare_fp8", lambda q, k, v, quantise_q=True, **kw: SimpleNamespace(
        seq_q=q.shape[1], seq_kv=k.shape[1], q8=q if quantise_q else None))
    monkeypatch.setattr(sm90, "launch", launch)
    probes = {(c.mode, c.shape[-1]): c for c in D.cases("full", ["sm90-cute"]) if c.probe == "prebuilt-jit"}
    ctx = type("Ctx", (), {"device": torch.device("cpu")})()
    for (mode, d), short in ((("direct-p", 128), {"fold": 1, "persistent": 132}), (("fp8", 128), {"fold": 1}),
                             (("direct-p", 64), {"fold": 1}), (("fp8", 64), None)):
        launched.clear()
        metrics, detail = D.probe_prebuilt_jit(probes[mode, d], ctx)
        want = [{}] + ([short] if short else [])
        assert launched == [(mode, d, c, pb) for c in want for pb in (True, False)], (mode, d)
        assert metrics == {"differing": 0, "nan": 0}
        assert detail.count("differing=0") == len(want)


def test_a_default_that_splits_is_checked_against_the_reference_in_the_kernels_segments():
    """fp8's sm90 default splits its last partial wave (config.HEAD_DIM_CONFIG): the plain check's
    fp8 cases follow the plan too, direct-p's (no split) the mode's reference."""
    from wan_fp4 import reference
    from wan_fp4.kernels.sm90.split import row_segments

    g = torch.Generator().manual_seed(9)
    q = torch.randn(1, 1000, 3, 64, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(1, 8192, 3, 64, generator=g).to(torch.bfloat16) for _ in range(2))
    plain = {c.mode: c for c in D.cases("full", ["sm90-cute"]) if c.probe == "attention" and not c.options.get("config")}
    seg = row_segments(1, 3, 1000, 8192)  # fp8 at D64: cluster 1, every tile in halves
    assert bool((seg == 2).all())
    assert torch.equal(D.case_reference(q, k, v, plain["fp8"])[0], reference.attention(q, k, v, "fp8", segments=seg))
    assert torch.equal(D.case_reference(q, k, v, plain["direct-p"])[0], reference.attention(q, k, v, "direct-p"))


def test_a_headroom_config_is_checked_against_the_reference_under_its_rule():
    """check --configs '[{"headroom": 16}]': the sm90 cases compare with reference.direct_p_headroom
    (2 log2 units), the others with the mode's reference."""
    from wan_fp4 import reference

    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 300, 2, 64, generator=g) for _ in range(3))
    case = next(c for c in D.cases("full", ["sm90-cute"], configs=[{"headroom": 16}])
                if c.probe == "attention" and c.options.get("config") == {"headroom": 16})
    out, lse = D.case_reference(q, k, v, case)
    want, want_lse = reference.direct_p_headroom(q, k, v, 2.0)
    assert torch.equal(out, want) and torch.equal(lse, want_lse)
    today = reference.attention(q, k, v, "direct-p")
    assert not torch.equal(out, today)
    plain = next(c for c in D.cases("full", ["sm90-cute"]) if c.probe == "attention" and c.mode == "direct-p")
    assert torch.equal(D.case_reference(q, k, v, plain)[0], today)


@pytest.mark.parametrize("fault", [None, "unwritten"])
def test_padding_cases_fail_on_one_padding_byte_left_unwritten(monkeypatch, fault):
    """The padding probe on the CPU (Triton under the interpreter, which writes every byte): it
    passes, and fails when one byte of K's padding rows keeps the fill the probe gave the memory,
    as the one-token launch left them on the GPU."""
    import dataclasses

    from wan_fp4.kernels import prepare

    real = prepare._prepare_triton

    def faulty(*args, **kwargs):
        ops = real(*args, **kwargs)
        ops.k8.view(torch.uint8)[0, 0, -1, 0] = 0x7F
        return ops

    if fault:
        monkeypatch.setattr(prepare, "_prepare_triton", faulty)
    monkeypatch.setattr(D, "unavailable", lambda case, device: "")
    pads = [c for c in D.cases("full", ["sm90-cute"]) if c.probe == "padding"]
    todo = [dataclasses.replace(c, cuda_only=False) for c in pads if c.shape[1] <= 2 and c.shape[4] == 64]
    assert {c.shape[1] for c in todo} == {1, 2} and {c.mode for c in todo} == {"fp8", "direct-p"}
    rows = D.run(todo, "cpu")["cases"]
    assert [r["status"] for r in rows] == ["FAIL" if fault else "ok"] * len(todo), rows
    if fault:
        assert all(r["metrics"]["unwritten"] == 1 for r in rows)
