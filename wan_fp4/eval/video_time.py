"""Wall time of a whole video: one `pipe(...)` call, with where the time goes.

The breakdown comes from timing the pipeline's own steps in place on the instance, each between
device synchronisations: `pipe.encode_prompt` (text encoding, prompt and negative prompt),
`pipe.vae.decode` (VAE decode) and `pipe.video_processor.postprocess_video` (to numpy). The rest of
the call is the denoising loop (two transformer forwards per step with CFG, the scheduler, the
latents' set-up). The transformer itself is not hooked, so a compiled one runs untouched.

A run of fewer steps than the schedule a user runs is scaled (`scaled_seconds`): text encoding,
decode and post-processing once, the denoising loop per step.
"""
from __future__ import annotations

import contextlib
import time

import torch

PROMPT = "a red vintage car on a coastal road"
PARTS = ("text_encoding_s", "vae_decode_s", "postprocess_s")


@contextlib.contextmanager
def _timed(obj, attr: str, totals: dict, key: str, sync):
    """Time every call of `obj.attr` (a bound method) into totals[key] while the context is open."""
    original, own = getattr(obj, attr), attr in vars(obj)

    def wrapper(*args, **kwargs):
        sync()
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            sync()
            totals[key] += time.perf_counter() - t0

    setattr(obj, attr, wrapper)
    try:
        yield
    finally:
        if own:
            setattr(obj, attr, original)
        else:
            delattr(obj, attr)  # the class's method shows through again


def time_video(pipe, *, height: int, width: int, frames: int, steps: int, guidance: float, sync,
               seed: int = 0, scale_to: int | None = None) -> dict:
    """One synchronised pipe(...) call of `steps` steps: total seconds and the breakdown; with
    `scale_to`, the same run's time scaled to that many steps."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    totals = dict.fromkeys(PARTS, 0.0)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_timed(pipe, "encode_prompt", totals, "text_encoding_s", sync))
        stack.enter_context(_timed(pipe.vae, "decode", totals, "vae_decode_s", sync))
        stack.enter_context(_timed(pipe.video_processor, "postprocess_video", totals, "postprocess_s", sync))
        sync()
        t0 = time.perf_counter()
        pipe(prompt=PROMPT, height=height, width=width, num_frames=frames, num_inference_steps=steps,
             guidance_scale=guidance, generator=torch.Generator("cpu").manual_seed(seed), output_type="np")
        sync()
        seconds = time.perf_counter() - t0
    denoise = seconds - sum(totals.values())
    out = {"seconds": seconds, "steps": steps, **totals, "denoise_s": denoise, "denoise_s_per_step": denoise / steps}
    if scale_to is not None and scale_to != steps:
        out["scaled_to_steps"] = scale_to
        out["scaled_seconds"] = seconds + denoise * (scale_to - steps) / steps
    return out
