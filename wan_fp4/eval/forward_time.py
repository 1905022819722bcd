"""Timing one variant: a budget probe (one attention call, scaled to a forward), its transformer
forwards with per-call attention times (and compiled, when asked), and whole pipeline calls."""
from __future__ import annotations

import contextlib
import math
import statistics

import torch

from . import capture
from .forward_inputs import Geometry
from .timing import CallTimer, Timer
from .variants import Applied, Skip, Variant

PROBE_QUERIES = 4096


def _probe_ms(transformer, variant: Variant, geom: Geometry, device, timer: Timer, peers, cross) -> float:
    """Estimated attention time of one forward for this variant: one self-attention call on a
    slice of PROBE_QUERIES queries against all keys, scaled to the full query count and layers
    (cross-attention is small and left out). Raises Skip when the variant cannot run."""
    from .. import dispatch

    cfg = transformer.config
    s = geom.tokens(transformer)
    h, d = cfg.num_attention_heads, cfg.attention_head_dim
    # Our kernels and SDPA take a query slice; peers get the real shape (cuDNN's FP8 graph is built
    # for equal q and k lengths).
    sq = s if variant.kind in ("peer", "fa4") else min(s, PROBE_QUERIES)
    g = torch.Generator("cpu").manual_seed(1)
    q = torch.randn(1, sq, h, d, generator=g).to(device, transformer.dtype)
    k = torch.randn(1, s, h, d, generator=g).to(device, transformer.dtype)
    v = torch.randn(1, s, h, d, generator=g).to(device, transformer.dtype)
    if variant.kind == "stock" or (variant.kind == "stack" and variant.mode is None):
        fn = lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
            a.transpose(1, 2), b.transpose(1, 2), c.transpose(1, 2)).transpose(1, 2)
    elif variant.kind == "fa4":
        fn = peers[variant.name]
    elif variant.kind == "peer":
        fn = peers[variant.peer]
    else:
        mode = variant.mode
        fn = lambda a, b, c: dispatch.attention(a, b, c, mode=mode)  # noqa: E731
    try:
        fn(q, k, v)  # first call: JIT compiles, graph builds
        timer.sync()
        t0 = timer.start()
        fn(q, k, v)
        handle = timer.stop(t0)
        timer.sync()
    except Exception as exc:  # a kernel stack that fails here would fail in the forward too
        raise Skip(f"attention probe failed: {type(exc).__name__}: {exc}") from exc
    return timer.elapsed_ms(handle) * (s / sq) * cfg.num_layers


def time_variant(transformer, variant: Variant, inputs: dict, *, geom: Geometry, timer: Timer, warmup: int,
                 repeats: int, cross_attention=False, policy_kwargs=None, peers=None, progress=None,
                 compile_settings=None) -> dict:
    """Forward times (ms), per-call attention times and kernels of one variant; with
    `compile_settings` also its compiled forward times (`res["compiled"]`). `res["outputs"]` holds
    the forward output, eager and compiled (CPU float32), for the caller's drift figures."""
    from .compiled import time_compiled

    res = {"label": variant.label}
    outputs = {}
    with torch.inference_mode(), Applied(transformer, variant, timer=timer, cross_attention=cross_attention,
                                         policy_kwargs=policy_kwargs, peers=peers) as applied:
        if applied.linears is not None:
            res["quantized_linears"] = applied.linears.count
        # Only variants that replace calls go through the tap; the others run untouched.
        tap = capture.AttentionTap(transformer, applied.handlers) if applied.handlers else contextlib.nullcontext()
        with tap:
            for _ in range(warmup):
                transformer(**inputs)
                _tick(progress)
            applied.reset_counts()
            ms, outputs["eager"] = timer.forwards(lambda: transformer(**inputs), repeats, progress)
        if applied.handlers:
            tap.check_seen()
        kernels = applied.kernels()
        # The instrumented forward: every attention call timed (a few extra events per call).
        ct = CallTimer(timer)
        with capture.AttentionTap(transformer, [ct] + applied.handlers):
            t0 = timer.start()
            transformer(**inputs)
            inst = timer.stop(t0)
            _tick(progress)
        calls = ct.summary()
        if compile_settings is not None:
            if variant.compilable:
                res["compiled"], outputs["compiled"] = time_compiled(
                    transformer, inputs, compile_settings, timer=timer, warmup=warmup, repeats=repeats,
                    progress=progress)
            else:
                res["compiled"] = {"skipped": "replaces attention calls through AttentionTap, which "
                                              "torch.compile does not trace"}
    inst_ms = timer.elapsed_ms(inst)
    attn_ms = sum(c["total_ms"] for c in calls.values())
    res.update(
        forward_ms={"median": statistics.median(ms), "min": min(ms), "max": max(ms), "all": ms},
        step_ms_cfg=2 * statistics.median(ms),
        attention={"per_kind": calls, "instrumented_forward_ms": inst_ms, "total_ms": attn_ms,
                   "share": attn_ms / inst_ms if inst_ms > 0 else math.nan,
                   "self_share": calls.get("self", {}).get("total_ms", 0.0) / inst_ms if inst_ms > 0 else math.nan},
        kernels=kernels, outputs=outputs)
    return res


def _tick(progress):
    if progress is not None:
        progress.update()


def time_pipeline(pipe, variant: Variant, *, geom: Geometry, steps: int, guidance: float, timer: Timer,
                  cross_attention=False, policy_kwargs=None, peers=None, seed=0, compile_settings=None,
                  scale_to=None) -> dict:
    """Wall time of one whole pipe(...) call (text encoding, `steps` denoising steps with CFG, VAE
    decode) with this variant, and its breakdown (`video_time.time_video`). With `compile_settings`
    the transformer is compiled in place, and a first 2-step call compiles before the timed one.
    Synchronised wall clock: it spans CPU work too."""
    from .compiled import compiled
    from .video_time import time_video

    run = dict(height=geom.height, width=geom.width, frames=geom.frames, guidance=guidance, sync=timer.sync,
               seed=seed)
    with torch.inference_mode(), Applied(pipe.transformer, variant, timer=timer, cross_attention=cross_attention,
                                         policy_kwargs=policy_kwargs, peers=peers) as applied:
        # Only variants that replace calls go through the tap (its per-layer hooks would also
        # give a compiled block one graph per layer).
        tap = capture.AttentionTap(pipe, applied.handlers) if applied.handlers else contextlib.nullcontext()
        with tap:
            if compile_settings is None:
                return time_video(pipe, steps=steps, scale_to=scale_to, **run)
            with compiled(pipe.transformer, compile_settings) as report:
                warm = time_video(pipe, steps=2, **run)
                out = time_video(pipe, steps=steps, scale_to=scale_to, **run)
            out.update(first_call_s=warm["seconds"], dynamo=report.as_dict())
            return out
