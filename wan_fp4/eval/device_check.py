"""Correctness of the attention kernels against `wan_fp4.reference` on one device (`wan-fp4 check`).

A `Case` is one check: a kernel family, a mode, an input recipe (shape, seed, gains, which query
rows are compared), the probe that measures it and the bounds its metrics must meet. `run` draws
fresh inputs per case, asks whether the family can run on this device at all (if not, the case is
skipped and the line says why), runs the probe and prints one line per case:

    ok   / FAIL   every bounded metric within / outside its bound (the line names what failed)
    skip          the family cannot run here (wrong device, missing software stack)
    info          a measurement with no bound

A family that is offered on this device but refuses or errs is a FAIL, never a skip. The attention
probe runs each family's own launch on outputs poisoned with NaN where its API takes output
buffers (sm90, Triton, sm100), else its entry point; the reference runs in torch on the same device
(TF32 off) and every distance is `metrics.rel_l2`. Suites: quick (small shapes, every family; runs
on CPU under TRITON_INTERPRET=1 for the Triton families), full (awkward and Wan shapes) and large
(the sm90 B6 H40 S75600 batch whose output passes 2^31 elements).
"""
from __future__ import annotations

import dataclasses
import faulthandler
import importlib.util
import json
import math
import time
import unittest.mock
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from .. import reference
from ..kernels import registry
from ..kernels.sm90.config import applies as sm90_applies
from ..modes import AFFINE_GENERIC, DIRECT_P_HEADROOM, DIRECT_P_SLOPE, FP4Params
from .metrics import max_abs, rel_l2

SUITES = ("quick", "full", "large")
SM90_TOL = {"rel_l2": 1e-2, "nan": 0}  # the FP8 wgmma's accumulation floor is ~5e-3 (docs/NUMERICS.md)
TRITON_TOL = {"rel_l2": 1e-2, "nan": 0}  # same tensor cores, same floor
# Exact products on both sides, only the FP32 summation order differs (tests/test_fp4_emulation.py).
FP4_EMU_TOL = {"float32": {"rel_l2": 1e-5, "lse_abs": 1e-4, "lse_inf_disagree": 0, "nan": 0},
               "bfloat16": {"rel_l2": 4e-3, "differing": 0.01, "nan": 0}}
FP4_CODE_TOL = {"unwritten": 0, "code_mismatch": 1e-4, "exponent_mismatch": 1e-4}
# Same codes and scales, exact division on both sides: only the FP32 summation order and the BF16
# rounding of O differ (BF16 rounding alone gives ~2e-3).
SM100_TOL = {"rel_l2": 4e-3, "max_abs_over_ref_max": 2e-2, "lse_abs": 1e-3, "nonfinite": 0,
             "nonfinite_denominator": 0, "pv_qk_sync_differing": 0}
SM100_GUARD = 110.0  # the paper's M for Wan 1.3B layers 27-29


class Skip(Exception):
    """A probe cannot run here (e.g. no DSL to JIT against); the message says why."""


@dataclass(frozen=True)
class Case:
    """kernel: a family of kernels/registry.py; probe: a key of PROBES; shape: (B, Sq, Skv, H, D);
    rows: query row ranges compared (empty: all); inputs: "randn" N(0,1), "kmean" (k * 1.5 plus a
    per-head mean, as real K has), "subnormal" (kmean, then q, k, v scaled per head to the dtype's
    smallest normal, 2^-7 of it on odd heads: mostly subnormal values) or "self" (k = q); gains:
    q, k multipliers ("near": just inside the FP8 modes' score range); tol: metric -> largest value
    allowed (empty: a measurement); options: probe settings (sm90 config, Triton converts, FP4
    codes variant)."""

    kernel: str
    name: str
    probe: str = "attention"
    mode: str | None = None
    shape: tuple = (1, 128, 128, 1, 128)
    rows: tuple = ()
    inputs: str = "randn"
    gains: tuple = (1.0, 1.0)
    dtype: str = "bfloat16"
    fp4: FP4Params | None = None
    tol: dict = field(default_factory=dict, hash=False)
    options: dict = field(default_factory=dict, hash=False)
    seed: int = 0
    cuda_only: bool = False
    timeout_s: int = 120


@dataclass
class Context:
    device: torch.device
    prebuilt: bool | None = None  # sm90/sm100 launch's prebuilt: None = AOT if usable, True = required
    notes: list = field(default_factory=list)

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"     {text}", flush=True)


# ----------------------------------------------------------------------------------------- inputs
def kmean_inputs(b: int, sq: int, skv: int, h: int, d: int, device, seed: int) -> tuple:
    """BF16 (B, S, H, D) q, k, v of the "kmean" recipe (k with a per-head mean, as real K has): the
    inputs the device benches time."""
    return make_inputs(Case(kernel="bench", name="kmean", shape=(b, sq, skv, h, d), inputs="kmean", seed=seed),
                       device)


def make_inputs(case: Case, device) -> tuple:
    b, sq, skv, h, d = case.shape
    g = torch.Generator(device=device).manual_seed(case.seed)
    rand = lambda s: torch.randn(b, s, h, d, generator=g, device=device)  # noqa: E731
    # BF16-exact values, also for float32 cases; each converted at once (the large case's FP32
    # draws are 9 GB apiece)
    q = rand(sq).bfloat16()
    if case.inputs == "self":
        k = q.clone()
    elif case.inputs in ("kmean", "subnormal"):
        k = (rand(skv) * 1.5 + torch.randn(b, 1, h, d, generator=g, device=device)).bfloat16()
    else:
        k = rand(skv).bfloat16()
    v = rand(skv).bfloat16()
    gq, gk = case.gains
    if "near" in (gq, gk):
        from ..modes import MAX_SCORE_LOG2, default_scale

        c = reference.log2_scale(default_scale(d))
        norm_q, norm_k = (t.float().norm(dim=-1).max().item() for t in (q, k))
        near = (0.9 * MAX_SCORE_LOG2 / (c * norm_q * norm_k)) ** 0.5  # |m| ~ 0.9 2^19
        gq, gk = (near if x == "near" else x for x in (gq, gk))
    q, k = ((t.float() * gain).bfloat16() if gain != 1.0 else t for t, gain in ((q, gq), (k, gk)))
    poison = case.options.get("poison")  # "<tensor> nan|inf": one element of q, k or v made non-finite
    if poison:
        name, value = poison.split()
        x = {"q": q, "k": k, "v": v}[name]
        x[0, x.shape[1] - 1, h - 1, d // 2] = float(value)  # the last block, as a tail is
    dtype = getattr(torch, case.dtype)
    if case.inputs == "subnormal":  # for BF16 and FP32 these are FP32 subnormals
        tiny = torch.finfo(dtype).tiny
        gain = torch.tensor([tiny, tiny * 2**-7], device=device)[torch.arange(h, device=device) % 2]
        q, k, v = (t.float() * gain.view(1, 1, h, 1) for t in (q, k, v))
    return q.to(dtype), k.to(dtype), v.to(dtype)


def subnormal_count(t: torch.Tensor) -> int:
    """Nonzero elements of t below its dtype's smallest normal."""
    return int(((t.abs() < torch.finfo(t.dtype).tiny) & (t != 0)).sum())


def _rows(case: Case, device):
    if not case.rows:
        return None
    return torch.cat([torch.arange(a, b) for a, b in case.rows]).to(device)


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _nan_like(shape, dtype, device):
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def _out_lse(b, s, h, d, device, dtype=torch.bfloat16):
    """A launch's (B, S, H, D) output and (B, H, S) LSE, NaN until it writes them (so that an
    element it misses shows)."""
    return _nan_like((b, s, h, d), dtype, device), _nan_like((b, h, s), torch.float32, device)


def _config_text(config: dict) -> str:
    """A config as the check's lines name it: compact JSON with its keys sorted."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


# ------------------------------------------------------------------------- each family's launch
def _sm90_operands(q, k, v, mode: str, config: dict):
    """The operands a plain call (sm90 host.run) gives a launch of `config` (options over the
    defaults): Q's codes left to the kernel where the config has quant_q and q allows it
    (host.kernel_makes_q), else made by the pre-pass. So the check runs the kernels a user's call
    runs (quant_q, and persistent, which needs it)."""
    from ..kernels.prepare import prepare_fp8
    from ..kernels.sm90.host import kernel_makes_q
    from ..kernels.sm90.layout import v_layout_args

    return prepare_fp8(q, k, v, quantise_q=not kernel_makes_q(q, mode, config), **v_layout_args(mode))


def _launch_sm90(q, k, v, case, ctx):
    from ..kernels import sm90
    from ..kernels.prepare import prepare_fp8
    from ..kernels.sm90.config import length_config
    from ..kernels.sm90.layout import v_layout_args

    b, sq, h, d = q.shape
    # an empty config is the package's own launch: its lengths take their options (length_config),
    # named on the case's line so that the output says which kernel ran
    config = case.options.get("config") or None
    length = length_config(case.mode, d, sq, k.shape[1]) if config is None else {}
    ops = _sm90_operands(q, k, v, case.mode, length if config is None else config)
    out, lse = _out_lse(b, sq, h, d, q.device)
    sm90.launch(ops, case.mode, d, config=config, out=out, lse=lse, prebuilt=ctx.prebuilt)
    _sync(q.device)
    if ops.q8 is not None:
        length.pop("persistent", None)  # a kernel that reads Q's codes ran (host.launch)
    extra = {"length": _config_text(length)} if length else {}
    # the reference adds back the K-smoothing shift, which reads Q's codes: where the kernel made
    # them, the pre-pass's (the same bits) give it
    coded = ops if ops.q8 is not None else prepare_fp8(q, k, v, **v_layout_args(case.mode))
    return out, lse + sm90.lse_shift(coded, d), extra


def _launch_triton(q, k, v, case, ctx):
    from ..kernels import prepare
    from ..kernels.triton import attention as tri

    b, sq, h, d = q.shape
    prep = prepare.prepare_fp8(q, k, v, backend="triton")
    out, lse = _out_lse(b, sq, h, d, q.device, q.dtype)
    tri.attention_prepared(prep, case.mode, 1 / math.sqrt(d), out, lse)
    return out, lse, {}


def _launch_sm100(q, k, v, case, ctx):
    """The default kernel and its debug build (pv_qk_sync: each PV waits for the next QK of its
    stage) on the same operands: they must agree bit for bit, else the tensor core did not run the
    MMA warp's MMAs in issue order (tmem_plan.MMA_ISSUE_ORDER, which the default kernel relies on)."""
    from ..kernels import sm100
    from ..kernels.sm100.launch import launch

    b, sq, h, d = q.shape
    fp4 = case.fp4 or FP4Params()
    ops = sm100.prepare_operands(q, k, v, guard_margin=fp4.guard_margin)
    args = sm100.build_launch_args(ops, 1 / math.sqrt(d), fp4, torch.cuda.get_device_properties(q.device).multi_processor_count)
    outs = []
    for sync in (False, True):
        out, denom = _nan_like(q.shape, torch.bfloat16, q.device), _nan_like((b * h, sq), torch.float32, q.device)
        launch(ops, args, out, denom, pv_qk_sync=sync)  # the debug build is JIT
        outs.append((out, denom))
    _sync(q.device)
    (out, denom), (out_s, denom_s) = outs
    m = None if ops.m is None else ops.m.view(b, h, sq)
    lse = sm100.lse_from_denominator(denom.view(b, h, sq), m, 1 / math.sqrt(d))
    extra = {"nonfinite_denominator": int((~torch.isfinite(denom)).sum()),
             "pv_qk_sync_differing": int((out != out_s).sum() + (denom != denom_s).sum())}
    return out, lse, extra


def _launch_fp4_emulation(q, k, v, case, ctx):
    from ..kernels import fp4_emulation as emu

    out, lse = emu.fp4_emulation_attention(q, k, v, case.mode, fp4=case.fp4, return_lse=True)
    return out, lse, {}


LAUNCH: dict[str, Callable] = {"sm90-cute": _launch_sm90, "triton": _launch_triton,
                               "sm100-cute": _launch_sm100, "fp4-emulation": _launch_fp4_emulation}


# ------------------------------------------------------------------------------------------ probes
def probe_attention(case, ctx):
    q, k, v = make_inputs(case, ctx.device)
    out, lse, extra = LAUNCH[case.kernel](q, k, v, case, ctx)
    _sync(ctx.device)
    idx = _rows(case, ctx.device)
    pick = (lambda t, dim: t) if idx is None else (lambda t, dim: t.index_select(dim, idx))
    qr, o, lo = pick(q, 1), pick(out, 1), pick(lse, 2)
    ref, ref_lse = case_reference(qr, k, v, case, rows=idx, s_q=q.shape[1])
    exact = reference.attention(qr.float(), k.float(), v.float(), "bf16")
    finite = torch.isfinite(ref_lse)
    mx, ref_max = max_abs(o, ref), ref.double().abs().max().item()
    m = {"rel_l2": rel_l2(o, ref), "max_abs": mx, "max_abs_over_ref_max": mx / ref_max if ref_max else math.inf,
         "differing": (o != ref).float().mean().item(),
         "lse_abs": (lo - ref_lse)[finite].abs().max().item() if finite.any() else 0.0,
         "lse_rel_l2": rel_l2(lo[finite], ref_lse[finite]) if finite.any() else 0.0,
         "lse_inf_disagree": int((torch.isfinite(lo) != finite).sum()),
         "nan": int(torch.isnan(out).sum() + torch.isnan(lse).sum()),
         "nonfinite": int((~torch.isfinite(out)).sum()),
         "kernel_vs_exact": rel_l2(o, exact), "reference_vs_exact": rel_l2(ref, exact), **extra}
    detail = (f"relL2={m['rel_l2']:.3e} maxabs={mx:.3e} (ref max {ref_max:.2f}) differ={m['differing']:.2e} "
              f"lse={m['lse_abs']:.1e} lse_relL2={m['lse_rel_l2']:.3e} nan={m['nan']}"
              + "".join(f" {key}={val}" for key, val in extra.items())
              + f" | vs exact: kernel {m['kernel_vs_exact']:.4f} ref {m['reference_vs_exact']:.4f}")
    return m, detail


def case_reference(q, k, v, case, rows=None, s_q=None):
    """(out, LSE) of the reference the case's kernel follows: the mode's, or for an sm90 config
    with another `headroom` (codes; 8 per log2 unit; 0 = the running max) the direct-p reference
    under that row reference, and where the kernel's config (the case's over the default) has
    `split_tail` with the split rows' keys in the kernel's segments (kernels/sm90/split.py). rows:
    the query rows q holds of the call's s_q (None: all)."""
    config = case.options.get("config") or {}
    segments = None
    if case.kernel == "sm90-cute":
        from ..kernels.sm90 import default_config
        from ..kernels.sm90.split import row_segments

        b, _, h, d = q.shape
        cfg = default_config(case.mode, d, config)
        if cfg["split_tail"]:
            s_q = q.shape[1] if s_q is None else s_q
            segments = row_segments(b, h, s_q, k.shape[1], cfg["cluster"])
            segments = segments if rows is None else segments[:, :, rows.cpu()]
    codes = config.get("headroom", DIRECT_P_HEADROOM)
    if case.mode != "direct-p" or codes == DIRECT_P_HEADROOM:
        return reference.attention(q, k, v, case.mode, fp4=case.fp4, return_lse=True, segments=segments)
    return reference.direct_p_headroom(q, k, v, codes / DIRECT_P_SLOPE if codes else None, segments=segments)


def _outcome(fn):
    """("error", message) for a ValueError, else ("out", output)."""
    try:
        return "out", fn()
    except ValueError as exc:
        return "error", str(exc)


def probe_score_range(case, ctx):
    """Huge but finite scores: the reference's error, or a finite output that matches it (the FP8
    modes' FMA fold holds only for row maxima |m| < 2^19, modes.MAX_SCORE_LOG2); non-finite
    inputs: the reference's error."""
    import wan_fp4

    q, k, v = make_inputs(case, ctx.device)
    want, ref = _outcome(lambda: reference.attention(q, k, v, case.mode))
    got, out = _outcome(lambda: wan_fp4.attention(q, k, v, case.mode, kernel=case.kernel))
    if want == "error" or got == "error":
        m = {"error_mismatch": int(want != got), "nonfinite": None, "rel_l2": None}
        return m, f"reference: {want}, kernel: {got} ({(out if got == 'error' else '')[:60]})"
    m = {"error_mismatch": 0, "nonfinite": int((~torch.isfinite(out)).sum()), "rel_l2": rel_l2(out, ref)}
    return m, f"finite {m['nonfinite'] == 0}, relL2 vs reference {m['rel_l2']:.3e}"


def probe_v_layout(case, ctx):
    """The pre-pass's sm90 V^T layout equals its definition (the torch gather)."""
    from ..kernels.prepare import prepare_fp8
    from ..kernels.sm90.layout import sm90_v_layout, v_layout_args

    q, k, v = make_inputs(case, ctx.device)
    ops = prepare_fp8(q, k, v, **v_layout_args(case.mode))
    want = sm90_v_layout(prepare_fp8(q, k, v).v8t, case.mode == "direct-p")
    return {"differing_bytes": int((ops.v8t.view(torch.uint8) != want.view(torch.uint8)).sum())}, ""


def _dsl_installed() -> bool:
    return importlib.util.find_spec("cutlass") is not None


def probe_prebuilt_jit(case, ctx):
    """The prebuilt (AOT, C shim) sm90 kernels equal the JIT ones bit for bit: the defaults' and,
    where the case's lengths take options of their own (config.length_config: the short and the
    persistent kernels), those, on the operands a plain call gives them (_sm90_operands), so that
    every kernel a plain call may run is compared."""
    from ..kernels import sm90
    from ..kernels.sm90.config import length_config

    if not _dsl_installed():
        raise Skip("nvidia-cutlass-dsl is not installed: no JIT kernel to compare the prebuilt one with")
    q, k, v = make_inputs(case, ctx.device)
    b, sq, h, d = q.shape
    short = length_config(case.mode, d, sq, k.shape[1])
    ops = _sm90_operands(q, k, v, case.mode, short)
    configs = [{}] + ([short] if short else [])
    m, said = {"differing": 0, "nan": 0}, []
    for config in configs:
        outs = []
        for pb in (True, False):
            out, lse = _out_lse(b, sq, h, d, q.device)
            sm90.launch(ops, case.mode, d, config=config, out=out, lse=lse, prebuilt=pb)
            outs.append((out, lse))
        _sync(ctx.device)
        (o1, l1), (o2, l2) = outs
        differing, nan = int((o1 != o2).sum() + (l1 != l2).sum()), int(torch.isnan(o1).sum())
        m["differing"] += differing
        m["nan"] += nan
        said.append(f"{_config_text(config) if config else 'defaults'}: differing={differing} nan={nan}")
    return m, "(bitwise) " + "; ".join(said)


def probe_large(case, ctx):
    """The batch whose output passes 2^31 elements: dispatch must pick sm90-cute; the whole batch,
    then each element alone (B=1, the same prepared operands sliced) must give bit-identical output
    and LSE (only the batch offsets differ), no NaN; the last element's first and last query blocks
    match the reference."""
    from .. import dispatch
    from ..kernels import sm90
    from ..kernels.prepare import prepare_fp8
    from ..kernels.sm90 import aot
    from ..kernels.sm90.layout import v_layout_args
    from .timing import Timer

    b, s, _, h, d = case.shape
    mode = case.mode
    # resolve (and link on first use) the prebuilt kernel first: without the DSL, is_supported
    # accepts only a prebuilt kernel that is already linked
    run = aot.PREBUILT.launcher(aot.kernel_name(mode, d)) if ctx.prebuilt is not False else None
    if ctx.prebuilt and run is None:
        raise RuntimeError(f"no usable prebuilt sm90 kernel for {mode} D{d} (see the log)")
    ctx.note(f"sm90 kernel {aot.kernel_name(mode, d)} runs {'prebuilt (AOT)' if run else 'JIT'}")
    q, k, v = make_inputs(case, ctx.device)
    name = dispatch.kernel_for(q, mode, k, v)
    ok_sup, why = sm90.is_supported(q, k, v, mode)
    ctx.note(f"B{b} H{h} S{s} D{d} {mode}: B*S*H*D = {b * s * h * d} (2^31 = {2**31}); dispatch picks {name!r}; "
             f"sm90 is_supported={ok_sup} {why}")
    m = {"dispatch_not_sm90": int(name != "sm90-cute" or not ok_sup)}
    ops = prepare_fp8(q, k, v, **v_layout_args(mode))
    last = (s - 1) // 128 * 128  # whole 128-row Q scale blocks, so the reference quantises them alike
    rows = torch.cat([torch.arange(0, 128), torch.arange(last, s)]).to(ctx.device)
    q_last, k_last, v_last = q[b - 1:, rows].clone(), k[b - 1:].clone(), v[b - 1:].clone()
    del q, k, v
    out, lse = _out_lse(b, s, h, d, ctx.device)
    sm90.launch(ops, mode, d, out=out, lse=lse, prebuilt=ctx.prebuilt)
    _sync(ctx.device)
    m["nan"] = int(torch.isnan(out).sum() + torch.isnan(lse).sum())
    timer = Timer(ctx.device)
    t0 = timer.start()
    sm90.launch(ops, mode, d, out=torch.empty_like(out), lse=torch.empty_like(lse), prebuilt=ctx.prebuilt)
    handle = timer.stop(t0)
    timer.sync()
    ms = timer.elapsed_ms(handle)
    ctx.note(f"{'ok  ' if m['nan'] == 0 else 'FAIL'} B{b} launch nan={m['nan']}; second launch {ms:.1f} ms, "
             f"{4 * b * h * s * s * d / ms / 1e9:.0f} TFLOP/s")
    m["elements_differing"] = 0
    for i in range(b):
        one = dataclasses.replace(
            ops, q8=ops.q8[i:i + 1], k8=ops.k8[i:i + 1], v8t=ops.v8t[i:i + 1], q_scale=ops.q_scale[i:i + 1],
            k_scale=ops.k_scale[i:i + 1], v_scale=ops.v_scale[i:i + 1], k_mean=ops.k_mean[i:i + 1])
        o1, l1 = _out_lse(1, s, h, d, ctx.device)
        sm90.launch(one, mode, d, out=o1, lse=l1, prebuilt=ctx.prebuilt)
        _sync(ctx.device)
        same = torch.equal(out[i:i + 1], o1) and torch.equal(lse[i:i + 1], l1)
        m["elements_differing"] += int(not same)
        diff = (out[i:i + 1].float() - o1.float()).abs().max().item()
        ctx.note(f"{'ok  ' if same else 'FAIL'} batch element {i} (O offset {i * s * h * d}): B{b} == B1 bitwise "
                 f"(max |diff| {diff:.3e})")
        del o1, l1
    m["rel_l2"] = rel_l2(out[b - 1:, rows], reference.attention(q_last, k_last, v_last, mode))
    return m, (f"dispatch {name!r}, nan={m['nan']}, {m['elements_differing']} of {b} elements differ from B1; "
               f"element {b - 1} rows 0..127, {last}..{s - 1} vs reference: relL2={m['rel_l2']:.3e}")


def probe_accum(case, ctx):
    """Error of the FP8 tensor-core accumulation itself: torch._scaled_mm with use_fast_accum on
    and off vs FP32 on the same E4M3 operands, K = 128 (one key tile); docs/NUMERICS.md cites it."""
    g = torch.Generator(device=ctx.device).manual_seed(case.seed)
    a = (torch.rand(4096, 128, generator=g, device=ctx.device) * 256).to(torch.float8_e4m3fn)  # P-like, >= 0
    b = (torch.randn(128, 256, generator=g, device=ctx.device) * 100).to(torch.float8_e4m3fn)  # V-like
    exact = a.float() @ b.float()
    one = torch.ones((), device=ctx.device)
    m = {f"use_fast_accum={fast}": rel_l2(torch._scaled_mm(a, b.t().contiguous().t(), one, one, out_dtype=torch.float32,
                                                           use_fast_accum=fast), exact) for fast in (True, False)}
    return m, "_scaled_mm e4m3 K=128 relL2 vs fp32: " + ", ".join(f"{k_} {v_:.3e}" for k_, v_ in m.items())


def probe_convert(case, ctx):
    """The kernels' FP32 -> E4M3 convert (options["hw"]: hardware or bit arithmetic) equals
    formats.e4m3_encode, ties and saturation included."""
    import triton
    import triton.language as tl

    from .. import formats
    from ..kernels import prepare

    @triton.jit
    def enc(x_ptr, y_ptr, n, HW: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(y_ptr + offs, prepare.e4m3_rne_sat(x, HW).to(tl.uint8, bitcast=True), mask=offs < n)

    grid_vals = formats.e4m3_decode(torch.arange(0, 127, dtype=torch.uint8))
    mids = (grid_vals[:-1] + grid_vals[1:]) / 2
    g = torch.Generator().manual_seed(case.seed)
    pos = torch.cat([grid_vals, mids, torch.nextafter(mids, torch.tensor(math.inf)),
                     torch.nextafter(mids, torch.tensor(0.0)), torch.exp2(torch.rand(100000, generator=g) * 34 - 24),
                     torch.tensor([447.9, 448.0, 463.99, 464.0, 480.0, 1000.0, 3.0e38, 2.0**-10])])
    x = torch.cat([pos, -pos]).to(ctx.device)
    want = formats.e4m3_encode(x.cpu())
    y = torch.empty(x.numel(), dtype=torch.uint8, device=ctx.device)
    enc[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), HW=case.options["hw"], BLOCK=1024)
    bad = y.cpu() != want
    detail = f"{int(bad.sum())} / {x.numel()} differ"
    if bad.any():
        detail += f" e.g. {x.cpu()[bad][:4].tolist()} -> {y.cpu()[bad][:4].tolist()} want {want[bad][:4].tolist()}"
    return {"mismatches": int(bad.sum())}, detail


def probe_prepare(case, ctx):
    """prepare_fp8 (Triton; options["hw_cvt"]) equals reference.quantize_fp8: every code and scale."""
    from ..kernels import prepare

    q, k, v = make_inputs(case, ctx.device)
    ref = reference.quantize_fp8(q, k, v)
    extra = {}
    if case.inputs == "subnormal" and ctx.device.type != "cpu":
        # the contract is IEEE arithmetic with subnormals kept: take the CPU reference, and say
        # whether this device's torch kernels agree with it
        on_device = ref
        ref = reference.quantize_fp8(q.cpu(), k.cpu(), v.cpu())
        extra["reference_device_vs_cpu"] = max(mismatch(getattr(on_device, f.name).cpu(), getattr(ref, f.name))
                                                for f in dataclasses.fields(ref))
    prep = prepare.prepare_fp8(q, k, v, backend="triton", hw_cvt=case.options["hw_cvt"])
    mism = {}
    for name, t in prep.reference_layout().items():
        mism[name] = mismatch(t.to(ref.q8.device), getattr(ref, name))
    worst = max(mism.values())
    detail = f"worst mismatch fraction {worst:.3g}  {mism}"
    if case.inputs == "subnormal":
        detail += "  subnormal q/k/v elements: " + "/".join(str(subnormal_count(t)) for t in (q, k, v))
        detail += "".join(f"  {key} {val:.3g}" for key, val in extra.items())
    return {"worst_mismatch": worst, **extra}, detail


def probe_padding(case, ctx):
    """prepare_fp8's Triton launches, their FP8 outputs' memory filled with 0x7F first (an E4M3 NaN
    that no encoder writes for finite inputs, so a byte left unwritten shows), equal the torch
    path's buffers byte for byte, the padding rows and columns past S included; in the sm90
    kernel's V^T layout."""
    from ..kernels import prepare
    from ..kernels.sm90.layout import v_layout_args

    q, k, v = make_inputs(case, ctx.device)
    layout = v_layout_args(case.mode)
    empty = torch.empty

    def filled(*args, **kwargs):
        t = empty(*args, **kwargs)
        if t.dtype == torch.float8_e4m3fn:
            t.view(torch.uint8).fill_(0x7F)
        return t

    with unittest.mock.patch.object(torch, "empty", filled):
        got = prepare.prepare_fp8(q, k, v, backend="triton", **layout)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    _sync(ctx.device)
    fields = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean")
    m = {name: mismatch(getattr(got, name), getattr(want, name).to(getattr(got, name).device)) for name in fields}
    unwritten = sum(int((getattr(got, f).view(torch.uint8) == 0x7F).sum()) for f in ("q8", "k8", "v8t"))
    detail = f"differing fractions {m}, 0x7F bytes {unwritten}"
    return {"worst_mismatch": max(m.values()), "unwritten": unwritten}, detail


def mismatch(got: torch.Tensor, want: torch.Tensor) -> float:
    """Fraction of elements whose bits differ (FP8 codes compared as bytes); 1.0 if shapes differ."""
    if want.dtype == torch.float8_e4m3fn:
        got, want = got.view(torch.uint8), want.view(torch.uint8)
    return 1.0 if got.shape != want.shape else (got != want).float().mean().item()


def probe_hw_vs_bitarith(case, ctx):
    """The Triton kernel with bit-arithmetic converts (what the CPU interpreter runs) equals the
    one with hardware converts on this GPU."""
    from ..kernels import prepare
    from ..kernels.triton import attention as tri

    q, k, v = make_inputs(case, ctx.device)
    prep = prepare.prepare_fp8(q, k, v, backend="triton")
    scale = 1 / math.sqrt(q.shape[-1])
    o_hw, o_sw = (tri.attention_prepared(prep, case.mode, scale, torch.empty_like(q), hw_cvt=hw) for hw in (True, False))
    frac = (o_hw != o_sw).float().mean().item()
    return {"differing": frac}, f"hardware vs bit-arithmetic converts: {frac:.2e} of outputs differ"


def probe_fp4_codes(case, ctx):
    """The emulation's E2M1 codes and block exponents (its debug output) equal reference.fp4_p_codes
    on the same scores; options: guard margin and launch variant (ladder, reshape)."""
    from ..kernels import fp4_emulation as emu

    q, k, v = make_inputs(case, ctx.device)
    b, sq, skv, h, d = case.shape
    guard = case.options.get("guard")
    variant = case.options.get("variant", {})
    qh, kh, vh, m = emu.prepare_operands(q, k, v, guard)
    pq = _nan_like((b, h, sq, kh.shape[2]), torch.float32, ctx.device)
    pe = torch.full_like(pq, float("nan"))
    out, lse = torch.empty(b, sq, h, d, device=ctx.device), torch.empty(b, h, sq, device=ctx.device)
    scale = 1 / math.sqrt(d)
    affine = FP4Params().affine
    emu.launch(qh, kh, vh, m, out, lse, skv=skv, d=d, scale=scale, affine=affine, debug_p=(pq, pe), **variant)
    s = torch.matmul(qh.float(), kh.float().transpose(-1, -2))
    s[..., skv:] = -math.inf
    code, e = reference.fp4_p_codes(s, m.unsqueeze(-1), reference.log2_scale(scale), affine)
    e = e.repeat_interleave(32, dim=-1)
    met = {"unwritten": int((~torch.isfinite(pq)).sum()), "code_mismatch": (pq != code).float().mean().item(),
           "exponent_mismatch": (pe != e).float().mean().item()}
    return met, " ".join(f"{key}={val:.3g}" for key, val in met.items())


def probe_fp4_range_warning(case, ctx):
    """Scores beyond the map's range (q, k * 8): the kernel warns FP4RangeWarning exactly when the
    reference does; options["must_warn"]: the reference's warning is expected here."""
    from ..kernels import fp4_emulation as emu
    from ..modes import FP4RangeWarning

    q, k, v = make_inputs(case, ctx.device)
    warned = []
    for fn in (reference.attention, emu.fp4_emulation_attention):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FP4RangeWarning)
            fn(q, k, v, "direct-p-fp4", fp4=case.fp4)
        warned.append(any(issubclass(w.category, FP4RangeWarning) for w in caught))
    m = {"warn_disagree": int(warned[0] != warned[1]),
         "kernel_silent": int(not warned[1]) if case.options.get("must_warn") else None}
    return m, f"reference warns {warned[0]}, kernel warns {warned[1]}"


PROBES: dict[str, Callable] = {
    "attention": probe_attention, "score-range": probe_score_range, "v-layout": probe_v_layout,
    "prebuilt-jit": probe_prebuilt_jit, "large": probe_large, "accum": probe_accum, "convert": probe_convert,
    "prepare": probe_prepare, "padding": probe_padding, "hw-vs-bitarith": probe_hw_vs_bitarith,
    "fp4-codes": probe_fp4_codes, "fp4-range-warning": probe_fp4_range_warning}


# ------------------------------------------------------------------------------------------ suites
# (B, Sq, Skv, H, D) of one token and of one key: Triton compiles an integer argument of 1 as a
# constant, so these are compiles of their own, checked in every family that runs Triton
ONE_TOKEN_SHAPES = ((1, 1, 1, 3, 64), (1, 300, 1, 2, 128))


def _modes(kernel):
    return registry.spec(kernel).modes if kernel != "sm90-cute" else ("direct-p", "fp8")


def _score_range(kernel, shape):
    """q * 1e8, k * 1e30, q, k * 1e19 (past the FP8 modes' score range: the reference's error) and
    q, k just inside it (|m| ~ 0.9 2^19, matching the reference). Keys equal queries: each row's
    largest score is its own key's, at the Cauchy-Schwarz bound, far above the rest (no near-ties
    to flip)."""
    out, tol = [], {"error_mismatch": 0, "nonfinite": 0, "rel_l2": 1e-2}
    for mode in ("direct-p", "fp8"):
        for name, gains in (("q*1e8", (1e8, 1.0)), ("k*1e30", (1.0, 1e30)), ("q,k*1e19", (1e19, 1e19)),
                            ("q,k*near (|m| < 2^19)", ("near", "near"))):
            out.append(Case(kernel, f"score range {name}", "score-range", mode, shape, inputs="self", gains=gains,
                            tol=tol, seed=20261130))
        # NaN or inf input: the reference's error (a plain GPU max drops NaN; the pre-pass's maxima keep it)
        for poison in ("q nan", "k inf", "v nan"):
            out.append(Case(kernel, f"non-finite {poison}", "score-range", mode, shape, options={"poison": poison},
                            tol=tol, seed=20261201))
    return out


def _sm90(suite, configs):
    cfgs = [{}] + list(configs)  # over each mode's default_config
    out = [Case("sm90-cute", "accum probe", "accum", cuda_only=True, seed=1)] if suite == "full" else []
    out += _score_range("sm90-cute", (1, 1000, 1000, 2, 128))
    dims = (128, 64) if suite == "full" else (128,)
    for d in dims:
        for mode in _modes("sm90-cute"):
            out.append(Case("sm90-cute", f"pre-pass V^T layout == definition D{d}", "v-layout", mode,
                            (2, 1000, 1000, 3, d), tol={"differing_bytes": 0}, seed=d))
            out.append(Case("sm90-cute", f"prebuilt == JIT D{d}", "prebuilt-jit", mode, (2, 1000, 1000, 3, d),
                            tol={"differing": 0, "nan": 0}, seed=d))
    # prepare_fp8's padding past S: at one token or key and at lengths that leave part of a block
    pads = [*ONE_TOKEN_SHAPES, (1, 1, 1, 3, 128), (2, 2, 2, 3, 64), (1, 77, 77, 5, 128), (1, 129, 129, 2, 128)]
    for b, sq, skv, h, d in (pads if suite == "full" else pads[:1]):
        for mode in _modes("sm90-cute"):
            out.append(Case("sm90-cute", f"prepare_fp8 == torch path, padding included, B{b} Sq{sq} Skv{skv} H{h} D{d}",
                            "padding", mode, (b, sq, skv, h, d), inputs="kmean",
                            tol={"worst_mismatch": 0, "unwritten": 0}, seed=sq + d))
    shapes = [("B2 H3 S1000", (2, 1000, 1000, 3, 128), ()),
              ("B1 H12 S4097", (1, 4097, 4097, 12, 128), ()),
              ("B1 H4 Sq4097 Skv512", (1, 4097, 512, 4, 128), ()),
              ("B1 H2 Sq100 Skv77", (1, 100, 77, 2, 128), ()),
              ("B1 H3 S1", (1, 1, 1, 3, 128), ()),
              ("B1 H2 Sq300 Skv1", (1, 300, 1, 2, 128), ()),
              ("B1 H12 S7680 rows", (1, 7680, 7680, 12, 128), ((0, 256), (7552, 7680))),
              ("B1 H12 S32760 rows", (1, 32760, 32760, 12, 128), ((0, 256), (32640, 32760))),
              ("D64 B2 H3 S700", (2, 700, 700, 3, 64), ()),
              # 6 and 11 key tiles: with the others' 1, 4, 8, 33, 60 and 256, the overlapped
              # schedule's tail runs every remainder of a fold group of four (fold=4), not only of two
              ("B1 H2 Sq200 Skv700", (1, 200, 700, 2, 128), ()),
              ("B1 H2 Sq200 Skv1300", (1, 200, 1300, 2, 128), ()),
              # direct-p's persistent grid (config.length_config) past its first units: 288 units
              # (12 query tiles, the last partial, of 24 heads) over 132 CTAs, handed out by the counter
              ("B1 H24 S1500", (1, 1500, 1500, 24, 128), ())]
    if suite == "quick":
        shapes = [shapes[3], ("D64 B1 H2 Sq100 Skv77", (1, 100, 77, 2, 64), ())]
    for mode in _modes("sm90-cute"):
        for i, (name, shape, rows) in enumerate(shapes):
            for cfg in (cfgs if shape[-1] == 128 else [{}]):
                if not sm90_applies(mode, cfg):
                    continue
                label = name if not cfg else f"{name} cfg={json.dumps(cfg, sort_keys=True)}"
                out.append(Case("sm90-cute", label, "attention", mode, shape, rows, tol=SM90_TOL,
                                options={"config": cfg}, seed=20261130 + i, timeout_s=90))
    return out


def _triton(suite):
    k = "triton"
    if suite == "full":
        shapes = [(2, 1000, 1000, 3, 128), (1, 4097, 4097, 12, 128), (1, 4097, 512, 12, 128), (2, 1000, 777, 3, 64),
                  (1, 32760, 32760, 12, 128)]
        attn = [(s, ()) for s in shapes[:-1]] + [(shapes[-1], (r,)) for r in ((0, 1024), (16384, 17408), (31744, 32760))]
        attn += [(s, ()) for s in ONE_TOKEN_SHAPES]
        bitarith, score_shape = (2, 1000, 1000, 3, 128), (1, 1000, 1000, 2, 128)
    else:
        shapes = [(1, 200, 333, 2, 64)]
        attn = [(shapes[0], ())]
        bitarith, score_shape = (1, 130, 140, 1, 64), (1, 130, 130, 1, 64)
    out = [Case(k, f"E4M3 encode ({'hw' if hw else 'bitarith'}) == formats.e4m3_encode", "convert",
                tol={"mismatches": 0}, options={"hw": hw}, cuda_only=True) for hw in (True, False)]
    for s in shapes:
        b, sq, skv, h, d = s
        for hw in (True, False):
            out.append(Case(k, f"prepare B{b} Sq{sq} Skv{skv} H{h} D{d} {'hw' if hw else 'bitarith'}", "prepare",
                            shape=s, inputs="kmean", tol={"worst_mismatch": 0}, options={"hw_cvt": hw},
                            seed=sq + skv + d, cuda_only=hw))
    # Subnormal Q, K, V: codes must still equal the reference's (no flush to zero anywhere). The
    # CPU interpreter misconverts BF16 subnormals (docs/NUMERICS.md), so the BF16 cases need CUDA.
    b, sq, skv, h, d = shapes[0]
    for dtype in ("bfloat16", "float32", "float16"):
        for hw in (True, False):
            out.append(Case(k, f"prepare subnormal {dtype} D{d} {'hw' if hw else 'bitarith'}", "prepare",
                            shape=(b, sq, skv, max(h, 2), d), inputs="subnormal", dtype=dtype,
                            tol={"worst_mismatch": 0}, options={"hw_cvt": hw}, seed=7,
                            cuda_only=hw or dtype == "bfloat16"))
    for mode in _modes(k):
        for s, rows in attn:
            b, sq, skv, h, d = s
            where = f" rows {rows[0][0]}:{rows[0][1]}" if rows else ""
            out.append(Case(k, f"B{b} Sq{sq} Skv{skv} H{h} D{d}{where}", "attention", mode, s, rows, "kmean",
                            tol=TRITON_TOL, seed=sq * 3 + skv + d))
        out.append(Case(k, "hw vs bitarith kernel", "hw-vs-bitarith", mode, bitarith, inputs="kmean",
                        tol={"differing": 0}, seed=5, cuda_only=True))
    return out + _score_range(k, score_shape)


def _fp4_emulation(suite):
    k, wan, guard = "fp4-emulation", FP4Params(), FP4Params(guard_margin=110.0)
    small = (1, 300, 333, 2, 128) if suite == "full" else (1, 70, 150, 2, 64)
    out = [Case(k, f"codes B{small[0]} Sq{small[1]} Skv{small[2]} {name}", "fp4-codes", shape=small, inputs="kmean",
                tol=FP4_CODE_TOL, options={"variant": variant}, seed=99)
           for name, variant in (("", {}), ("ladder=False", {"ladder": False}), ("reshape=False", {"reshape": False}))]
    big = (1, 1000, 1000, 3, 128) if suite == "full" else (1, 130, 200, 2, 64)
    out.append(Case(k, f"codes B1 Sq{big[1]} guard110", "fp4-codes", shape=big, inputs="kmean", tol=FP4_CODE_TOL,
                    options={"guard": 110.0}, seed=99))
    if suite == "full":
        shapes = [("B1 H3 S1000 D128 wan", big, wan, ()),
                  ("B1 H3 S1000 D128 generic", big, FP4Params(affine=AFFINE_GENERIC), ()),
                  ("B1 H3 S1000 D128 guard110", big, guard, ()),
                  ("B1 H3 Sq4097 Skv512 D128", (1, 4097, 512, 3, 128), wan, ()),
                  ("B2 H3 Sq1000 Skv777 D64", (2, 1000, 777, 3, 64), wan, ()),
                  ("B1 H12 S7680 D128 rows 0:256", (1, 7680, 7680, 12, 128), wan, ((0, 256),))]
        shapes += [(f"B{b} H{h} Sq{sq} Skv{skv} D{d}", (b, sq, skv, h, d), wan, ())
                   for b, sq, skv, h, d in ONE_TOKEN_SHAPES]
    else:
        shapes = [("B1 H2 Sq130 Skv200 D64 wan", big, wan, ()), ("B1 H2 Sq130 Skv200 D64 guard110", big, guard, ())]
    for name, s, fp4, rows in shapes:
        for dtype in ("float32", "bfloat16"):
            out.append(Case(k, f"{name} {dtype}", "attention", "direct-p-fp4", s, rows, "kmean", dtype=dtype, fp4=fp4,
                            tol=FP4_EMU_TOL[dtype], seed=sum(s)))
    for name, gain, fp4, must in (("q,k*8 shiftless", 8.0, wan, True), ("q,k*8 guard110", 8.0, guard, False),
                                  ("N(0,1) shiftless", 1.0, wan, False)):
        out.append(Case(k, f"range warning {name}", "fp4-range-warning", "direct-p-fp4", big, inputs="kmean",
                        gains=(gain, gain), fp4=fp4, tol={"warn_disagree": 0, "kernel_silent": 0},
                        options={"must_warn": must}, seed=11))
    return out


def _sm100(suite, affine):
    shapes = [(1, 128, 128, 1), (1, 1, 1, 1), (2, 300, 77, 3), (1, 1000, 512, 4), (1, 7680, 7680, 12),
              (1, 7680, 7680, 40)]
    if suite == "quick":
        shapes = shapes[:3]
    plain = FP4Params() if affine is None else FP4Params(affine=tuple(affine))
    guard = dataclasses.replace(plain, guard_margin=SM100_GUARD)
    runs = [(plain, 1.0, s) for s in shapes] + [(guard, 1.0, s) for s in shapes]
    runs += [(guard, 8.0, s) for s in shapes[:4]]  # logits far beyond the shiftless range
    out = []
    for i, (fp4, gain, (b, sq, skv, h)) in enumerate(runs):
        tag = "shiftless" if fp4.guard_margin is None else f"guard M={fp4.guard_margin:g} q*{gain:g}"
        out.append(Case("sm100-cute", f"{[b, sq, skv, h]} {tag}", "attention", "direct-p-fp4", (b, sq, skv, h, 128),
                        gains=(gain, 1.0), fp4=fp4, tol=SM100_TOL, seed=1234 + i % len(shapes)))
    return out


def _large():
    return [Case("sm90-cute", "large B6 H40 S75600 D128", "large", "direct-p", (6, 75600, 75600, 40, 128),
                 tol={"dispatch_not_sm90": 0, "nan": 0, "elements_differing": 0, "rel_l2": SM90_TOL["rel_l2"]},
                 seed=20261201, timeout_s=300)]


def cases(suite: str = "full", kernels=None, *, configs=(), affine=None) -> list[Case]:
    """The cases of `suite` for the kernel families `kernels` (None: all, registry.NAMES order)."""
    if suite not in SUITES:
        raise ValueError(f"suite must be one of {SUITES}, got {suite!r}")
    kernels = list(registry.NAMES) if kernels is None else list(kernels)
    for name in kernels:
        if name not in registry.NAMES:
            raise ValueError(f"unknown kernel {name!r}; kernel families: {', '.join(registry.NAMES)}")
    if suite == "large":
        every = _large()
    else:
        every = (_sm100(suite, affine) + _sm90(suite, configs) + _triton(suite) + _fp4_emulation(suite))
    return [c for name in kernels for c in every if c.kernel == name]


# ------------------------------------------------------------------------------------------ runner
def unavailable(case: Case, device: torch.device) -> str:
    """Why the case's kernel family cannot run on this device at all ("" if it can)."""
    if case.cuda_only and device.type != "cuda":
        return f"needs a CUDA device, this is {device}"
    spec = registry.spec(case.kernel)
    mode = case.mode or spec.modes[0]
    if device.type == "cuda":
        cap = torch.cuda.get_device_capability(device)
        if not spec.offered(cap, mode):
            gen = " (that GPU generation only)" if spec.same_major else " or newer"
            return (f"{case.kernel} runs on sm_{spec.capability[0]}{spec.capability[1]}{gen}; "
                    f"this device is sm_{cap[0]}{cap[1]}")
        return ""  # offered here: a refusal is a failure, not a skip
    if case.kernel == "fp4-emulation":  # off CUDA it runs only in Triton's interpreter
        from ..kernels import fp4_emulation as emu

        if emu.host.IMPORT_ERROR is not None:
            return f"triton is not importable ({emu.host.IMPORT_ERROR})"
        return "" if emu._interpreting() else f"on {device} only under TRITON_INTERPRET=1"
    probe = torch.zeros(1, 128, 1, case.shape[-1], dtype=torch.bfloat16, device=device)
    ok, why = spec.supports(probe, probe, probe, mode, case.fp4 or FP4Params())
    return "" if ok else why


def _judge(metrics: dict, tol: dict) -> list[str]:
    """The bounds `metrics` breaks; a bounded metric the probe did not report is a failure (None:
    reported as not applicable to this outcome)."""
    bad = []
    for key, bound in tol.items():
        if key not in metrics:
            bad.append(f"{key} not measured")
        elif metrics[key] is not None and not metrics[key] <= bound:  # NaN fails
            bad.append(f"{key} {metrics[key]:.3g} > {bound:g}")
    return bad


def environment(device: torch.device) -> dict:
    env = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "torch": torch.__version__,
           "device": torch.cuda.get_device_name(device) if device.type == "cuda" else str(device),
           "dsl_installed": _dsl_installed()}
    try:
        import triton
        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device.type == "cuda":
        env["capability"] = list(torch.cuda.get_device_capability(device))
    return env


def run(todo: list[Case], device, *, prebuilt: bool | None = None, json_path=None, header: dict | None = None) -> dict:
    """Run `todo` on `device`, printing one line per case; returns (and writes to json_path after
    every case, so a run cut short keeps what it measured) the summary; summary["ok"] is False on
    any FAIL."""
    device = torch.device(device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    summary = {**(header or {}), "env": environment(device), "cases": []}
    print(" ".join(f"{k}: {v}" for k, v in summary["env"].items()), flush=True)
    skipped: dict[tuple, str] = {}
    for case in todo:
        key = (case.kernel, case.mode, case.shape[-1], case.cuda_only)
        if key not in skipped:
            skipped[key] = unavailable(case, device)
        ctx = Context(device, prebuilt)
        row = {"kernel": case.kernel, "name": case.name, "mode": case.mode, "shape": list(case.shape),
               "tol": case.tol}
        t0 = time.perf_counter()
        why = skipped[key]
        metrics, detail, failed = {}, "", []
        if not why:
            if device.type == "cuda":
                faulthandler.dump_traceback_later(case.timeout_s, exit=True)  # a hung kernel ends the job
            try:
                metrics, detail = PROBES[case.probe](case, ctx)
                failed = _judge(metrics, case.tol)
            except Skip as exc:
                why = str(exc)
            except Exception as exc:  # reported as this case's failure; the other cases still run
                failed = [f"error {type(exc).__name__}: {str(exc)[:300]}"]
            finally:
                if device.type == "cuda":
                    faulthandler.cancel_dump_traceback_later()
        status = "skip" if why else "FAIL" if failed else "ok" if case.tol else "info"
        row.update(status=status, metrics=metrics, failed=failed, notes=ctx.notes,
                   seconds=round(time.perf_counter() - t0, 3))
        if why:
            row["skipped"] = why
        summary["cases"].append(row)
        text = f"skipped: {why}" if why else detail + (f"  [{'; '.join(failed)}]" if failed else "")
        print(f"{status:4s} {case.kernel:13s} {case.name:32s} {case.mode or '':12s} {text}", flush=True)
        if json_path is not None:
            write_json(summary, json_path)
    counts = {s: sum(r["status"] == s for r in summary["cases"]) for s in ("ok", "FAIL", "skip", "info")}
    failures = [f"{r['kernel']} {r['name']} {r['mode'] or ''}".strip() for r in summary["cases"] if r["status"] == "FAIL"]
    summary.update(counts=counts, failures=failures, ok=not failures)
    if json_path is not None:
        write_json(summary, json_path)
    if failures:
        print(f"failures: {failures}", flush=True)
    print(f"CHECK {'PASSED' if summary['ok'] else 'FAILED'}: " + ", ".join(f"{n} {s}" for s, n in counts.items()),
          flush=True)
    return summary


def write_json(summary: dict, path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1, default=str))


def main(kernels=None, suite="full", json_path=None, device=None, configs=(), prebuilt_dir=None, affine=None,
         command="") -> int:
    """`wan-fp4 check`: exit status 0 when no case failed, 1 otherwise."""
    todo = cases(suite, kernels, configs=configs, affine=affine)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if prebuilt_dir is not None:
        from ..kernels.sm90 import aot

        aot.PREBUILT.directory = Path(prebuilt_dir).resolve()
    # without the DSL every sm90 kernel must be prebuilt: fail loudly, never fall back
    prebuilt = True if device.type == "cuda" and not _dsl_installed() else None
    header = {"suite": suite, "kernels": kernels or list(registry.NAMES), "command": command}
    return 0 if run(todo, device, prebuilt=prebuilt, json_path=json_path, header=header)["ok"] else 1
