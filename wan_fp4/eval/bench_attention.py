"""Attention speed of our kernels next to the peers, in one run on one GPU (`wan-fp4 bench attention`).

For each shape it draws fresh N(0,1) BF16 q, k, v, checks every kernel of ours against the
reference on a slice of query rows (full keys), then times ours and every peer that imports
here with triton.testing.do_bench (median, after warm-up). TFLOP/s counts 4 B H S^2 D.
Where nvidia-smi runs, it samples the board throughout, and each timing records the SM clock
(median and lowest), power and clock-event reasons of its own window, so that a slow reading can be
told from a slow clock. Prints a Markdown table and writes a JSON with every number and the
environment.

    wan-fp4 bench attention --json bench_attention.json     (or python scripts/bench_attention.py)
    wan-fp4 bench attention --sm90-configs '{"f16_bytes": true}' --prebuilt-dir DIR   (sm90 variants,
        next to the defaults, built by scripts/build_prebuilt.py --only sm90 --out DIR --sm90-config ...)
    wan-fp4 bench attention --length-sweep --graph-spans   (also each call's span from a CUDA graph,
        replayed and with its inputs just written: graph_spans.py; what short calls are read by)
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch

import wan_fp4
from wan_fp4 import reference
from wan_fp4.dispatch import kernel_available
from wan_fp4.kernels import registry
from wan_fp4.eval.graph_spans import CALLS, graphed, spans_us
from wan_fp4.eval.metrics import rel_l2
from wan_fp4.eval.peers import PEER_LABELS, available_peers
from wan_fp4.eval.power import board_sampler, clock_during, clock_text

WAN_SHAPES = ["1x12x32760x128", "1x40x32760x128", "1x40x75600x128"]
# --length-sweep: where the lead over cuDNN FP8 begins and ends (H40 D128, B1), from the paper's
# Wan geometry (7,680) and shorter clips up to 131,072 tokens.
LENGTH_SWEEP = (1024, 4096, 7680, 16384, 32760, 75600, 131072)
# Peers the table states ratios against, when they ran: the BF16 state of the art and the FP8 peer.
RATIO_PEERS = (("fa4", "FA4"), ("cudnn-fp8-kernel", "cuDNN FP8"))
OUR_KERNELS = list(registry.NAMES)


def parse_shape(text):
    try:
        b, h, s, d = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be BxHxSxD, e.g. 1x40x32760x128, got {text!r}")
    return b, h, s, d


def tflops(b, h, s, d, ms):
    return 4 * b * h * s * s * d / (ms * 1e-3) / 1e12


def check_against_reference(fn, q, k, v, mode, rows):
    """Relative L2 of our kernel vs the reference (same mode) and vs exact attention, on rows."""
    out = fn(q, k, v)[:, :rows]
    qs = q[:, :rows]
    ref = reference.attention(qs, k, v, mode)
    exact = reference.attention(qs.float(), k.float(), v.float(), "bf16")
    return {"vs_reference": rel_l2(out, ref), "vs_exact": rel_l2(out, exact),
            "reference_vs_exact": rel_l2(ref, exact), "finite": bool(torch.isfinite(out).all())}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="wan-fp4 bench attention", description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=parse_shape, nargs="+", default=[parse_shape(s) for s in WAN_SHAPES])
    ap.add_argument("--length-sweep", action="store_true",
                    help=f"time B1 H40 D128 at S = {', '.join(map(str, LENGTH_SWEEP))} instead of --shapes")
    ap.add_argument("--modes", nargs="+", default=["direct-p", "fp8"], choices=wan_fp4.MODES[1:])
    ap.add_argument("--kernels", nargs="+", default=OUR_KERNELS, choices=OUR_KERNELS,
                    help="which of our kernels to time (default: every one that runs here)")
    ap.add_argument("--peers", nargs="*", default=list(PEER_LABELS))
    ap.add_argument("--qk-gain", type=float, default=1.0,
                    help="multiply q and k by this (6 ** 0.5: logits of std ~6, peaky attention, where a "
                         "row's maximum keeps rising); default 1: N(0,1) inputs")
    ap.add_argument("--check-rows", type=int, default=256, help="query rows checked against the reference")
    ap.add_argument("--rep-ms", type=int, default=1500)
    ap.add_argument("--json", type=Path, default=None)
    add_sm90_variant_args(ap, "time")
    ap.add_argument("--breakdown", action="store_true",
                    help="also time the sm90 kernel's parts per call: pre-pass, kernel launch alone, whole call")
    ap.add_argument("--graph-spans", action="store_true",
                    help="also time each call from a CUDA graph by its launches' span, replayed on the same inputs "
                         "and with its inputs just written by a launch before it, as in a model (us)")
    args = ap.parse_args(argv)
    check_sm90_variant_args(ap, args)
    if not (args.qk_gain > 0 and math.isfinite(args.qk_gain)):
        ap.error(f"--qk-gain must be a positive finite number, got {args.qk_gain}")
    if args.length_sweep:
        args.shapes = [(1, 40, length, 128) for length in LENGTH_SWEEP]
    if not torch.cuda.is_available():
        print("wan-fp4 bench attention needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference's FP32 products stay FP32
    from triton.testing import do_bench

    use_prebuilt_dir(args.prebuilt_dir)
    peers, missing = available_peers(args.peers)
    for name, why in missing.items():
        print(f"peer {name} unavailable: {why}", flush=True)
    sampler = board_sampler(torch.cuda.current_device())
    with sampler if sampler is not None else contextlib.nullcontext():
        results = measure(args, peers, missing, do_bench, sampler)
    print(markdown_table(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
    return 0


def timed(fn, rep_ms: int, do_bench, sampler) -> tuple[float, dict | None]:
    """(median ms by do_bench, the board during it: power.clock_during)."""
    t0 = time.time()
    ms = do_bench(fn, warmup=300, rep=rep_ms, return_mode="median")
    return ms, clock_during(sampler, t0, time.time())


def measure(args, peers: dict, missing: dict, do_bench, sampler) -> dict:
    """Every shape's checks and timings (see the module docstring) -> the results' JSON object."""
    results = {"env": environment(), "missing_peers": missing, "shapes": [],
               "fp8_gemm_tflops": fp8_gemm_tflops(do_bench)}
    print(f"cuBLAS FP8 GEMM 8192^3 (the tensor-core rate a plain FP8 product reaches here): "
          f"{results['fp8_gemm_tflops']:.0f} TFLOP/s", flush=True)
    for b, h, s, d in args.shapes:
        torch.manual_seed(s + h)
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        if args.qk_gain != 1.0:
            q, k = ((t.float() * args.qk_gain).bfloat16() for t in (q, k))
        entry = {"shape": [b, h, s, d], "qk_gain": args.qk_gain, "kernels": {}}
        kernels = {}
        for mode in args.modes:
            for name in args.kernels:
                ok, why = kernel_available(name, q, k, v, mode)
                if ok:
                    kernels[f"wan_fp4 {mode} [{name}]"] = (mode, lambda q, k, v, m=mode, n=name: wan_fp4.attention(q, k, v, m, kernel=n))
                else:
                    entry["kernels"][f"wan_fp4 {mode} [{name}]"] = {"skipped": why}
            kernels.update(sm90_variants(args.sm90_configs, q, k, v, mode))
        for label, (mode, fn) in kernels.items():
            t0 = time.time()
            check = check_against_reference(fn, q, k, v, mode, args.check_rows)
            ms, clock = timed(lambda: fn(q, k, v), args.rep_ms, do_bench, sampler)
            entry["kernels"][label] = {"ms": ms, "tflops": tflops(b, h, s, d, ms), "check": check, "clock": clock}
            print(f"{label} {b}x{h}x{s}x{d}: {ms:.3f} ms {tflops(b, h, s, d, ms):.0f} TFLOP/s "
                  f"check {check} ({time.time() - t0:.0f} s){clock_text(clock)}", flush=True)
            if args.graph_spans:
                spans = spans_us(lambda: fn(q, k, v), (q, k, v))
                entry["kernels"][label]["graph_us"] = spans
                print(f"{label} {b}x{h}x{s}x{d} {_spans_text(spans)}", flush=True)
            if args.breakdown and label.endswith("[sm90-cute]"):
                parts = sm90_breakdown(q, k, v, mode, do_bench, args.rep_ms)
                entry["kernels"][label]["breakdown_ms"] = parts
                print(f"{label} {b}x{h}x{s}x{d} per call: "
                      + ", ".join(f"{part} {t:.3f} ms" for part, t in parts.items()), flush=True)
        for name, fn in peers.items():
            try:
                out = getattr(fn, "to_output", lambda o: o)(fn(q, k, v))
                err = rel_l2(out[:, :args.check_rows],
                             reference.attention(q[:, :args.check_rows].float(), k.float(), v.float(), "bf16"))
                ms, clock = timed(lambda: fn(q, k, v), args.rep_ms, do_bench, sampler)
                entry["kernels"][PEER_LABELS[name]] = {"ms": ms, "tflops": tflops(b, h, s, d, ms),
                                                       "check": {"vs_exact": err}, "clock": clock}
                print(f"{name} {b}x{h}x{s}x{d}: {ms:.3f} ms {tflops(b, h, s, d, ms):.0f} TFLOP/s vs_exact {err:.4f}"
                      f"{clock_text(clock)}", flush=True)
            except Exception as exc:  # a peer that fails at a shape is reported, not fatal
                entry["kernels"][PEER_LABELS[name]] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                print(f"{name} failed: {exc}", flush=True)
            else:
                if args.graph_spans:
                    try:
                        spans = spans_us(lambda: fn(q, k, v), (q, k, v))
                    except Exception as exc:  # e.g. a peer that cannot be captured in a graph
                        spans = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                    entry["kernels"][PEER_LABELS[name]]["graph_us"] = spans
                    print(f"{name} {b}x{h}x{s}x{d} {_spans_text(spans)}", flush=True)
            torch.cuda.empty_cache()
        results["shapes"].append(entry)
        del q, k, v
        torch.cuda.empty_cache()
    return results


def _spans_text(spans: dict) -> str:
    if "error" in spans:
        return f"from a CUDA graph: failed, {spans['error']}"
    return "from a CUDA graph: " + ", ".join(f"{cond} {us:.1f} us" for cond, us in spans.items())


def add_sm90_variant_args(ap, verb):
    """--sm90-configs and --prebuilt-dir: sm90 kernels of other configs beside the defaults (the
    attention and power benches share them)."""
    ap.add_argument("--sm90-configs", nargs="+", type=json.loads, default=[], metavar="JSON",
                    help=f"also {verb} these sm90 kernel configs (options over each mode's default), in "
                         "the modes they apply to")
    ap.add_argument("--prebuilt-dir", type=Path, default=None,
                    help="load the sm90 prebuilt kernels, defaults included, from DIR "
                         "(scripts/build_prebuilt.py --only sm90 --out DIR --sm90-config ...)")


def check_sm90_variant_args(ap, args):
    for cfg in args.sm90_configs:
        if not isinstance(cfg, dict):
            ap.error(f"--sm90-configs takes JSON objects, got {cfg!r}")


def use_prebuilt_dir(directory):
    """Load the sm90 prebuilt kernels from `directory` (None: the package's own)."""
    if directory is not None:
        from wan_fp4.kernels.sm90 import aot

        aot.PREBUILT.directory = Path(directory).resolve()


def sm90_variants(configs, q, k, v, mode):
    """{label: (mode, fn)} of the sm90 kernel in each config that applies to `mode`. Without the DSL
    (no JIT) each must be prebuilt: a missing one raises instead of timing something else."""
    import importlib.util

    from wan_fp4.kernels import sm90
    from wan_fp4.kernels.sm90.aot import kernel_name

    if not configs or not kernel_available("sm90-cute", q, k, v, mode)[0]:
        return {}
    prebuilt = None if importlib.util.find_spec("cutlass") is not None else True
    d = q.shape[-1]
    base = kernel_name(mode, d)
    return {f"wan_fp4 {mode} [sm90-cute{kernel_name(mode, d, cfg)[len(base):]}]":
            (mode, lambda q, k, v, m=mode, c=cfg: sm90.sm90_attention(q, k, v, m, config=c, prebuilt=prebuilt))
            for cfg in configs  # each that applies and is not the default (timed already)
            if sm90.applies(mode, cfg) and kernel_name(mode, d, cfg) != base}


def sm90_breakdown(q, k, v, mode, do_bench, rep_ms):
    """Per-call times of the sm90 path's parts (median ms): the pre-pass alone, the pre-pass with
    the score-range check started and finished (its wait included), the kernel launch alone on
    prepared operands, the whole call, and the whole call replayed from a CUDA graph; what the
    whole call takes beyond its replay is host work the GPU waited for."""
    from wan_fp4.kernels.prepare import prepare_fp8
    from wan_fp4.kernels.sm90.config import length_config
    from wan_fp4.kernels.sm90.host import kernel_makes_q, launch
    from wan_fp4.kernels.sm90.layout import v_layout_args
    from wan_fp4.modes import default_scale

    d = q.shape[-1]
    # the parts as the call runs them: Q's codes in the pre-pass or in the kernel
    quant = kernel_makes_q(q, mode, length_config(mode, d, q.shape[1], k.shape[1]))
    layout = {**v_layout_args(mode), "quantise_q": not quant}
    ops = prepare_fp8(q, k, v, **layout)

    def checked():
        prepare_fp8(q, k, v, **layout).start_score_range_check(mode, default_scale(d)).finish()

    def call():
        return wan_fp4.attention(q, k, v, mode, kernel="sm90-cute")

    parts = {"pre-pass": lambda: prepare_fp8(q, k, v, **layout), "pre-pass + check": checked,
             "kernel": lambda: launch(ops, mode, d), "call": call}
    times = {name: do_bench(fn, warmup=100, rep=rep_ms, return_mode="median") for name, fn in parts.items()}
    replay = graphed(call, CALLS)
    times["call, CUDA graph"] = do_bench(replay, warmup=10, rep=rep_ms, return_mode="median") / CALLS
    return times


def fp8_gemm(n: int = 8192):
    """(run, flops): one cuBLAS E4M3 x E4M3 -> BF16 GEMM of n^3 on fresh random operands. What the
    FP8 tensor cores deliver on a large plain product is the practical ceiling any FP8 attention
    kernel sits under."""
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    return (lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16, use_fast_accum=True)), 2 * n ** 3


def fp8_gemm_tflops(do_bench, n: int = 8192) -> float:
    """fp8_gemm's rate in this run, TFLOP/s."""
    run, flops = fp8_gemm(n)
    ms = do_bench(run, warmup=100, rep=500, return_mode="median")
    return flops / ms / 1e9


def markdown_table(results):
    shapes = results["shapes"]
    labels = []
    for e in shapes:
        labels += [k for k in e["kernels"] if k not in labels]
    head = "| kernel | " + " | ".join("B{} H{} S{} D{}".format(*e["shape"])
                                      + (f" (q, k x{e['qk_gain']:.3g})" if e.get("qk_gain", 1.0) != 1.0 else "")
                                      for e in shapes) + " |"
    lines = [head, "|---" * (len(shapes) + 1) + "|"]
    # a kernel that ran at no shape gets one line under the table, not a row of n/a cells
    idle = [label for label in labels if not any("tflops" in e["kernels"].get(label, {}) for e in shapes)]
    for label in labels:
        if label in idle:
            continue
        cells = []
        for e in shapes:
            r = e["kernels"].get(label, {})
            if "tflops" in r:
                ratios = "".join(f", {base / r['ms']:.2f}x {short}" for peer, short in RATIO_PEERS
                                 if (base := e["kernels"].get(PEER_LABELS[peer], {}).get("ms")))
                spans = r.get("graph_us", {})
                graph = ("" if "replayed" not in spans else
                         f"; from a graph {spans['replayed']:.1f} us, {spans['inputs written']:.1f} us with inputs written")
                cells.append(f"{r['ms']:.2f} ms, {r['tflops']:.0f} TFLOP/s{ratios}{graph}")
            else:
                cells.append("n/a: " + (r.get("skipped") or r.get("error") or "not run")[:60])
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for label in idle:
        r = next((e["kernels"][label] for e in shapes if label in e["kernels"]), {})
        lines.append(f"\nnot run: {label}: {r.get('skipped') or r.get('error') or 'not run'}")
    return "\n".join(lines)


def environment():
    env = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "python": platform.python_version(),
           "torch": torch.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name()
        env["capability"] = torch.cuda.get_device_capability()
    for pkg in ("triton", "flash_attn", "cudnn", "sageattention", "cutlass"):
        try:
            mod = __import__(pkg)
            env[pkg] = getattr(mod, "__version__", "installed")
        except Exception:
            env[pkg] = None
    try:
        env["cudnn_backend"] = torch.backends.cudnn.version()
    except Exception:
        pass
    return env
