"""Timing on a device: CUDA events on a GPU, wall clock elsewhere (never a CPU figure to quote), and
an attention-call timer for `capture.AttentionTap`."""
from __future__ import annotations

import json
import statistics
import time
import traceback
from pathlib import Path

import torch

from . import capture


class Timer:
    """CUDA events on a CUDA device, else wall clock. `start()` returns a token, `stop(token)` a
    handle; `elapsed_ms(handle)` after `sync()`."""

    def __init__(self, device):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.method = "cuda-events" if self.cuda else "wall-clock (CPU: not a figure to quote)"

    def start(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def stop(self, token):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return (token, ev)
        return (token, time.perf_counter())

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def elapsed_ms(self, handle) -> float:
        a, b = handle
        return a.elapsed_time(b) if self.cuda else (b - a) * 1e3


    def forwards(self, fn, repeats: int, progress=None) -> tuple[list[float], object]:
        """Time `repeats` calls of `fn()` (ms each, after a sync) and return them with a CPU float32
        copy of the first call's first output, taken after its stop event (CUDA graphs reuse the
        output buffers)."""
        handles, first = [], None
        for i in range(repeats):
            t0 = self.start()
            out = fn()
            handles.append(self.stop(t0))
            if i == 0:
                first = out[0].float().cpu()
            if progress is not None:
                progress.update()
        self.sync()
        return [self.elapsed_ms(h) for h in handles], first


class CallTimer:
    """AttentionTap handler: times each attention call (outermost, so it includes a replacement)."""

    def __init__(self, timer: Timer):
        self.timer, self.records = timer, []

    def __call__(self, site, call, q, k, v):
        t0 = self.timer.start()
        out = call(q, k, v)
        self.records.append((site.kind, site.layer, self.timer.stop(t0)))
        return out

    def summary(self) -> dict:
        self.timer.sync()
        out = {}
        for kind in capture.KINDS:
            ms = [self.timer.elapsed_ms(h) for k, _, h in self.records if k == kind]
            if ms:
                out[kind] = {"calls": len(ms), "total_ms": sum(ms), "median_ms": statistics.median(ms),
                             "min_ms": min(ms), "max_ms": max(ms)}
        return out


def run_steps(steps, results: dict, path: Path, started: float, skip=None) -> None:
    """Run the (name, fn) steps of a device job in order. A step that raises is printed and listed
    in results["failures"], and the rest still run; `results` is written to `path` after every step,
    so a job cut short still returns what it measured. skip(name): a reason to skip it, or None."""
    for name, fn in steps:
        reason = skip(name) if skip else None
        if reason:
            print(f"[skip] {name}: {reason}")
            continue
        try:
            fn()
        except Exception:
            traceback.print_exc()
            results.setdefault("failures", []).append(name)
        print(f"  ({time.time() - started:.0f} s) {name}")
        path.write_text(json.dumps(results, indent=1, default=str))
