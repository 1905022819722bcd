"""Board power and SM clock while a kernel runs back to back (`wan-fp4 bench power`).

The FP8 tensor cores of an H200 run into the board's power limit before their clock limit: a
kernel that keeps them busier gets a lower clock. So at the attention kernels' rates the useful
figure beside TFLOP/s is the work done per joule, and whether the power cap is what holds the
clock down. For each workload (our sm90 kernels, the peers that import here, and the cuBLAS FP8
GEMM that sets the tensor-core ceiling) this runs it back to back for a few seconds while
`nvidia-smi` samples power, SM clock and the active clock-event reasons, and reports the medians
of the samples taken while it ran.

    wan-fp4 bench power --shape 1x40x75600x128 --seconds 8 --json power.json
    wan-fp4 bench power --modes direct-p --sm90-configs '{"cluster": 2}' --prebuilt-dir DIR
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import torch

# nvidia-smi's clock-event reason bits (nvml.h, nvmlClocksEventReason*)
EVENT_REASONS = {0x1: "idle", 0x2: "application clocks", 0x4: "power cap (software)",
                 0x8: "hardware slowdown", 0x10: "sync boost", 0x20: "thermal (software)",
                 0x40: "thermal (hardware)", 0x80: "power brake (hardware)", 0x100: "display clocks"}
QUERY = "timestamp,power.draw,clocks.sm,clocks_event_reasons.active"


def reasons_text(mask: int) -> str:
    """The clock-event reason names in a bitmask ('none' when no bit is set)."""
    names = [name for bit, name in EVENT_REASONS.items() if mask & bit]
    return ", ".join(names) or "none"


def parse_samples(text: str) -> list[dict]:
    """nvidia-smi's CSV lines (QUERY, noheader, nounits) -> samples with their host time (`t`,
    seconds since the epoch: nvidia-smi prints the machine's local time); lines it could not fill
    ('[N/A]', a partial last line) are dropped."""
    samples = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            continue
        try:
            t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append({"t": t, "power_w": float(parts[1]), "sm_mhz": float(parts[2]),
                            "reasons": int(parts[3], 16)})
        except ValueError:
            continue
    return samples


def summarise(samples: list[dict], skip: float = 0.2) -> dict:
    """Medians (and the lowest SM clock) over the samples after the first `skip` share (the clock
    settles after a ramp)."""
    if not samples:
        raise RuntimeError("nvidia-smi returned no samples while the workload ran")
    kept = samples[int(len(samples) * skip):] or samples
    mask = 0
    for s in kept:
        mask |= s["reasons"]
    return {"samples": len(kept), "power_w": statistics.median(s["power_w"] for s in kept),
            "sm_mhz": statistics.median(s["sm_mhz"] for s in kept), "sm_mhz_min": min(s["sm_mhz"] for s in kept),
            "reasons_mask": mask, "reasons": reasons_text(mask)}


class Sampler:
    """One nvidia-smi process sampling the board for a whole run (it takes seconds to start, so
    not one per workload); `between(t0, t1)` gives the samples taken in a host-time window."""

    def __init__(self, device_index: int = 0, interval_ms: int = 50):
        self.cmd = ["nvidia-smi", "-i", str(device_index), f"--query-gpu={QUERY}",
                    "--format=csv,noheader,nounits", f"-lms={interval_ms}"]
        self.lines: list[str] = []
        self.samples: list[dict] = []  # self.lines[:self.parsed], parsed (a long run asks many windows)
        self.parsed = 0

    def __enter__(self):
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.reader.join(timeout=30)

    def between(self, t0: float, t1: float) -> list[dict]:
        n = len(self.lines)  # the reader appends whole lines
        self.samples += parse_samples("".join(self.lines[self.parsed:n]))
        self.parsed = n
        return [s for s in self.samples if t0 <= s["t"] <= t1]


def board_sampler(device_index: int = 0) -> Sampler | None:
    """A Sampler where nvidia-smi is on the PATH, else None (what a timing then records: no clock)."""
    return Sampler(device_index) if shutil.which("nvidia-smi") else None


def clock_during(sampler: Sampler | None, t0: float, t1: float) -> dict | None:
    """The board while something was timed between host times t0 and t1: the SM clock's median and
    lowest sample, the median power and every clock-event reason seen; None without a sampler or
    samples (a window shorter than nvidia-smi's interval, or its first second)."""
    samples = sampler.between(t0, t1) if sampler is not None else []
    return summarise(samples, skip=0.0) if samples else None


def clock_text(clock: dict | None) -> str:
    """' (SM clock <median> MHz, lowest <min>, <power> W, clock-event reasons: ...)' for a timing's
    line; '' without a reading."""
    if clock is None:
        return ""
    return (f" (SM clock {clock['sm_mhz']:.0f} MHz, lowest {clock['sm_mhz_min']:.0f}, "
            f"{clock['power_w']:.0f} W, clock-event reasons: {clock['reasons']})")


def run_sampled(fn, flops: float, seconds: float, sampler: Sampler) -> dict:
    """Run fn back to back for `seconds` (after a second of warm-up) while the sampler watches the
    board; returns the rate, the medians of the samples in that window and the work per joule."""
    end = time.time() + 1.0
    while time.time() < end:
        fn()
    torch.cuda.synchronize()
    start_ev, stop_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls = 0
    t0 = time.time()
    start_ev.record()
    while time.time() < t0 + seconds:
        fn()
        calls += 1
        if calls % 4 == 0:
            torch.cuda.synchronize()  # keep the host within a few calls of the GPU
    stop_ev.record()
    torch.cuda.synchronize()
    t1 = time.time()
    time.sleep(0.5)  # the sampler's last lines of the window
    ms = start_ev.elapsed_time(stop_ev) / calls
    result = summarise(sampler.between(t0, t1))
    tflops = flops / ms / 1e9
    result.update(calls=calls, ms=ms, tflops=tflops, tflop_per_joule=tflops / result["power_w"])
    return result


def board_limits(device_index: int = 0) -> dict:
    """The board's power limit and highest SM clock, as nvidia-smi reports them."""
    out = subprocess.run(["nvidia-smi", "-i", str(device_index), "--query-gpu=name,power.limit,clocks.max.sm",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True, check=True).stdout
    name, limit, max_mhz = [p.strip() for p in out.strip().split(",")]
    return {"name": name, "power_limit_w": float(limit), "max_sm_mhz": float(max_mhz)}


def table(limits: dict, rows: dict) -> str:
    lines = [f"{limits['name']}: power limit {limits['power_limit_w']:.0f} W, highest SM clock "
             f"{limits['max_sm_mhz']:.0f} MHz", "",
             "| workload | TFLOP/s | power (W, median) | SM clock (MHz, median) | TFLOP/J | clock-event reasons |",
             "|---|---|---|---|---|---|"]
    for label, r in rows.items():
        if "error" in r:
            lines.append(f"| {label} | failed: {r['error']} | | | | |")
            continue
        lines.append(f"| {label} | {r['tflops']:.0f} | {r['power_w']:.0f} | {r['sm_mhz']:.0f} | "
                     f"{r['tflop_per_joule']:.2f} | {r['reasons']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from wan_fp4.eval.bench_attention import (add_sm90_variant_args, check_sm90_variant_args, fp8_gemm,
                                              parse_shape, sm90_variants, use_prebuilt_dir)
    from wan_fp4.eval.peers import PEER_LABELS, available_peers

    ap = argparse.ArgumentParser(prog="wan-fp4 bench power", description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=parse_shape, default=parse_shape("1x40x75600x128"), help="BxHxSxD")
    ap.add_argument("--modes", nargs="*", default=["direct-p", "fp8"])
    ap.add_argument("--peers", nargs="*", default=["cudnn-fp8-kernel", "sdpa-cudnn"])
    ap.add_argument("--seconds", type=float, default=8.0, help="per workload, after a second of warm-up")
    ap.add_argument("--json", type=Path, default=None)
    add_sm90_variant_args(ap, "run")
    args = ap.parse_args(argv)
    if args.seconds <= 0:
        ap.error(f"--seconds must be positive, got {args.seconds}")
    check_sm90_variant_args(ap, args)
    if not torch.cuda.is_available():
        print("wan-fp4 bench power needs a CUDA GPU", file=sys.stderr)
        return 2
    import wan_fp4

    b, h, s, d = args.shape
    flops = 4.0 * b * h * s * s * d
    torch.manual_seed(s + h)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    workloads = {}
    use_prebuilt_dir(args.prebuilt_dir)
    for mode in args.modes:
        workloads[f"wan_fp4 {mode} [sm90-cute]"] = (lambda m=mode: wan_fp4.attention(q, k, v, m, kernel="sm90-cute"), flops)
        for label, (_, fn) in sm90_variants(args.sm90_configs, q, k, v, mode).items():
            workloads[label] = (lambda f=fn: f(q, k, v), flops)
    peers, missing = available_peers(args.peers)
    for name, why in missing.items():
        print(f"peer {name} unavailable: {why}", flush=True)
    for name, fn in peers.items():
        workloads[PEER_LABELS[name]] = (lambda f=fn: f(q, k, v), flops)
    gemm, gemm_flops = fp8_gemm()
    workloads["cuBLAS FP8 GEMM 8192^3"] = (gemm, gemm_flops)

    limits = board_limits(torch.cuda.current_device())
    rows = {}
    with Sampler(torch.cuda.current_device()) as sampler:
        for label, (fn, work) in workloads.items():
            try:
                rows[label] = run_sampled(fn, work, args.seconds, sampler)
            except Exception as exc:  # a peer that fails here is reported, not fatal
                rows[label] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
            r = rows[label]
            print(f"{label}: " + (r["error"] if "error" in r else
                                  f"{r['tflops']:.0f} TFLOP/s, {r['power_w']:.0f} W, {r['sm_mhz']:.0f} MHz, "
                                  f"{r['tflop_per_joule']:.2f} TFLOP/J, {r['reasons']}"), flush=True)
    print(table(limits, rows))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"shape": list(args.shape), "limits": limits, "rows": rows}, indent=1))
    return 0
