"""The `wan-fp4` command line: generate a video, measure drift, run GPU benchmarks.

    wan-fp4 generate --prompt TEXT --out video.mp4 [--model tiny|PATH] [--attention MODE] ...
    wan-fp4 drift --out DIR [--model tiny|PATH] [--modes bf16,fp8,direct-p,direct-p-fp4] [--steps 1,4,20]
                  [--peers cudnn-fp8|none] [--policies ...] [--capture-steps first,last] [--decode-steps max]
                  [--accuracy auto] ...
    wan-fp4 bench attention|e2e|power [ARGS...]    (CUDA GPU; see wan_fp4.eval.latency, .power)
    wan-fp4 check [--kernels sm90-cute,triton,...] [--suite quick|full|large] [--json PATH]
                  (kernels vs the reference on this device; see wan_fp4.eval.device_check)

Nothing is ever downloaded: --model is a registered name or a local diffusers Wan2.1 directory. The
default, `tiny`, is the embedded model trained on wan-fp4's procedural world of coloured balls and
squares; `tiny-random` is a random-weight pipeline for smoke tests.

Nothing heavy is imported before the arguments are checked: `--help` and argument errors cost no
torch or diffusers import.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import sys
from pathlib import Path

# Defaults for real Wan2.1 checkpoints: the pipeline's own for generate; for drift the paper's
# protocol geometry, 512x768 and 17 frames (7,680 tokens).
# A model may override them: a registered one in its ModelSpec (the embedded models use the small
# geometry they were made for), a local directory in its wan_fp4_defaults.json (pipelines.write_defaults).
GENERATE_DEFAULTS = {"height": 480, "width": 832, "frames": 81, "steps": 50}
DRIFT_DEFAULTS = {"height": 512, "width": 768, "frames": 17}
DTYPES = ("bfloat16", "float16", "float32")
VIDEO_SUFFIXES = (".mp4", ".mkv", ".mov", ".avi")  # what imageio-ffmpeg writes from a file name
# `wan-fp4 bench KIND ARGS` calls BENCH_ENTRY[KIND]'s main(ARGS) -> exit code.
BENCH_ENTRY = {"attention": "wan_fp4.eval.bench_attention", "e2e": "wan_fp4.eval.latency",
               "power": "wan_fp4.eval.power"}
BENCH_KINDS = tuple(BENCH_ENTRY)


def _csv(kind):
    def parse(text):
        items = [t.strip() for t in text.split(",")]
        if not any(items):
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {kind}, got {text!r}")
        if not all(items):  # "1,,4" is likely a typo for three items, not a request for two
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {kind}, got {text!r} "
                                             "(an empty item)")
        return items
    return parse


def _mode_list(text):
    from .modes import MODES

    modes = _csv("modes")(text)
    for mode in modes:
        if mode not in MODES:
            raise argparse.ArgumentTypeError(f"unknown mode {mode!r}; modes: {', '.join(MODES)}")
    return _unique(modes, "mode")


def _step_list(text):
    steps = []
    for item in _csv("step counts")(text):
        try:
            steps.append(_positive_int(item))
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}") from None
    return _unique(steps, "step count")


def _unique(items, what):
    """A repeated item of a list flag is a typo, not a second run (or a double weight)."""
    for item in items:
        if items.count(item) > 1:
            raise argparse.ArgumentTypeError(f"{what} {item!r} is listed twice")
    return items


def _int_list(text):
    items = []
    for item in _csv("integers")(text):
        try:
            items.append(int(item))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    return tuple(items)


def _none_or(parse, default_word=None, default=None):
    """'none' -> (), `default_word` -> `default`, else parse(text)."""
    def run(text):
        if text.strip() == "none":
            return ()
        if default_word is not None and text.strip() == default_word:
            return default
        return parse(text)
    return run


def _capture_steps(text):
    steps = []
    for item in _csv("steps")(text):
        if item in ("first", "last"):
            steps.append(item)
            continue
        try:
            steps.append(int(item))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected first, last or integers, got {item!r}") from None
    return tuple(steps)


def _number(convert, ok, want):
    """An argparse type: `convert(text)`, accepted when `ok(value)`; errors say `expected <want>`."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"expected {want}, got {text}")
        return value
    return parse


_positive_float = _number(float, lambda v: math.isfinite(v) and v > 0, "a positive number")
_nonnegative_int = _number(int, lambda v: v >= 0, "an integer >= 0")
_guidance = _number(float, lambda v: math.isfinite(v) and v >= 0,
                    "a finite number >= 0 (1 or less turns guidance off)")
_positive_int = _number(int, lambda v: v >= 1, "a positive integer")
_finite_float = _number(float, math.isfinite, "a finite number")
# torch.Generator.manual_seed takes -2**63..2**64-1 and maps a negative seed s to 2**64+s, so -1
# would silently be the same video as 18446744073709551615 (and mean "random" to many users).
_seed = _number(int, lambda v: 0 <= v < 2 ** 64, "a seed, an integer from 0 to 2**64-1")


def _seed_list(text):
    return tuple(_unique([_seed(item) for item in _csv("seeds")(text)], "seed"))


def _directory(text):
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not an existing directory")
    return text


def _add_common(p, *, modes_help):
    from .modes import MODES

    p.add_argument("--model", default="tiny",
                   help="registered model name or local diffusers Wan2.1 directory (default: tiny, the "
                        "embedded model trained on the procedural world of coloured balls and squares; "
                        "tiny-random: random weights, a smoke model)")
    p.add_argument("--prompt", help="text prompt")
    p.add_argument("--negative-prompt", default="", help="negative prompt (default: empty)")
    p.add_argument("--height", type=int, help="pixels, multiple of 16 (default: the model's)")
    p.add_argument("--width", type=int, help="pixels, multiple of 16 (default: the model's)")
    p.add_argument("--frames", type=int, help="frame count, 4k+1 (default: the model's)")
    p.add_argument("--guidance", type=_guidance, default=5.0,
                   help="classifier-free guidance scale, >= 0 (default 5.0)")
    p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16",
                   help="transformer and text-encoder dtype; the VAE stays float32 (default bfloat16)")
    p.add_argument("--cross-attention", action="store_true",
                   help="also run cross-attention in the low-precision mode (default: self-attention only)")
    p.epilog = f"modes: {', '.join(MODES)}. {modes_help}"


def build_parser() -> argparse.ArgumentParser:
    from .modes import MODES

    parser = argparse.ArgumentParser(prog="wan-fp4", description="Direct-P low-precision attention for Wan2.1.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{generate,drift,bench,check}")

    g = sub.add_parser("generate", help="generate a video and write it as mp4")
    _add_common(g, modes_help="bf16 is exact attention (the control).")
    g.add_argument("--attention", default="direct-p", metavar="MODE",
                   help=f"self-attention mode, one of {', '.join(MODES)} (default direct-p)")
    g.add_argument("--steps", type=_positive_int,
                   help="denoising steps (default: the model's; 50 for a Wan2.1 directory)")
    g.add_argument("--seed", type=_seed, default=0, help="random seed, 0 to 2**64-1 (default 0)")
    g.add_argument("--fps", type=_positive_int, default=16, help="frames per second of the mp4 (default 16)")
    g.add_argument("--out", required=True, help="output video path (.mp4)")
    g.set_defaults(run=cmd_generate, subparser=g)

    d = sub.add_parser("drift", help="drift of each mode and policy against the BF16 control: latents, "
                                     "frames, per-layer attention error, speed, prompt accuracy")
    _add_common(d, modes_help="Each step count is a separate run from the same seed.")
    d.add_argument("--modes", type=_mode_list, default=list(MODES),
                   help=f"comma-separated modes (default {','.join(MODES)})")
    d.add_argument("--steps", type=_step_list, default=[1, 4, 20],
                   help="comma-separated step counts, one run each (default 1,4,20)")
    d.add_argument("--seed", type=_seed, default=None, help="random seed, 0 to 2**64-1 (default 20260805)")
    d.add_argument("--peers", type=_none_or(_csv("peers")), default=None,
                   help="attention kernels that are not ours, measured like a mode (e.g. cudnn-fp8: cuDNN FP8 "
                        "SDPA, CUDA sm90+ with cudnn-frontend), or 'none'; a peer named here must run here "
                        "(default: cudnn-fp8 where it runs, else the report says why it was skipped)")
    d.add_argument("--stacks", type=_none_or(_csv("stacks")), default=None,
                   help="speed-up stacks of the latency tool run like a mode: float8-linears, "
                        "direct-p+float8-linears (torchao float8 linears, CUDA sm89+); a stack named here must "
                        "run here (default: none)")
    d.add_argument("--policies", type=_none_or(_csv("policies")), default=None,
                   help="policies to measure for drift and speed, or 'none' (default: the four of "
                        "wan_fp4.eval.policies.DEFAULT_POLICIES)")
    d.add_argument("--policy-steps", type=_positive_int, help="steps of the policy runs (default: the largest --steps)")
    d.add_argument("--time-repeats", type=_nonnegative_int, default=2,
                   help="timed forwards per mode and policy; 0 skips timing (default 2)")
    d.add_argument("--capture-steps", type=_none_or(_capture_steps), default=("first", "last"),
                   help="denoising steps (0-based, or first/last) whose attention inputs are captured from the "
                        "control run with the largest step count for the per-layer error; 'none' to skip "
                        "(default first,last)")
    d.add_argument("--capture-layers", type=_none_or(_int_list, "auto", None), default=None,
                   help="layers to capture: 'auto' (all that fit --capture-gib, guard layers first) or a list")
    d.add_argument("--capture-kinds", type=_csv("attention kinds"), default=["self"],
                   help="self, cross or self,cross (default self)")
    d.add_argument("--capture-gib", type=_positive_float, default=4.0,
                   help="memory budget for captured q/k/v in GiB (default 4)")
    d.add_argument("--capture-rows", type=_positive_int, default=1024,
                   help="query rows compared with exact attention per captured call (default 1024)")
    d.add_argument("--decode-steps", type=_none_or(_int_list, "max", None), default=None,
                   help="step counts whose final latents are decoded for PSNR/SSIM: 'max' (default), 'none' or "
                        "a list")
    d.add_argument("--accuracy", choices=("auto", "on", "off"), default="auto",
                   help="prompt accuracy per mode over the procedural world's prompts; auto: on for the embedded "
                        "trained model only, where it means something (default auto)")
    d.add_argument("--accuracy-prompts", type=_positive_int,
                   help="how many of the world's prompts, spread evenly (default: all 32)")
    d.add_argument("--accuracy-seeds", type=_seed_list, default=None,
                   help="seeds per prompt for prompt accuracy (default 0,1)")
    d.add_argument("--out", required=True, help="output directory for drift.json, drift.md and the plots")
    d.set_defaults(run=cmd_drift, subparser=d)

    b = sub.add_parser("bench", help="latency benchmarks (needs a CUDA GPU)")
    b.add_argument("kind", choices=BENCH_KINDS, help="attention: per-call kernels; e2e: whole pipeline; power: board power and clock per kernel")
    b.add_argument("args", nargs=argparse.REMAINDER, help="passed on to the benchmark")
    b.set_defaults(run=cmd_bench, subparser=b)

    c = sub.add_parser("check", help="every kernel against the reference on this device: one ok/FAIL/skip line "
                                     "per case, exit status 1 on any FAIL")
    c.add_argument("--kernels", type=_kernel_list, default=None,
                   help="comma-separated kernel families (default: all, sm100-cute,sm90-cute,triton,fp4-emulation)")
    c.add_argument("--suite", choices=("quick", "full", "large"), default="full",
                   help="quick: small shapes; full: awkward and Wan shapes; large: the sm90 B6 H40 S75600 batch "
                        "past 2^31 output elements (default full)")
    c.add_argument("--json", help="write every case's metrics here (rewritten after each case)")
    c.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    c.add_argument("--configs", type=_json_configs, default=[],
                   help="extra sm90 kernel configs to check next to each mode's default, a JSON list of objects "
                        "(e.g. '[{\"pingpong\": true}]')")
    c.add_argument("--prebuilt-dir", type=_directory,
                   help="load the sm90 prebuilt kernels from DIR (scripts/build_prebuilt.py --out DIR)")
    c.add_argument("--affine", type=_finite_float, nargs=2, metavar=("A", "B"),
                   help="the sm100 cases' FP4 map affine")
    c.set_defaults(run=cmd_check, subparser=c)
    return parser


def _kernel_list(text):
    from .kernels.registry import NAMES

    names = _csv("kernel families")(text)
    for name in names:
        if name not in NAMES:
            raise argparse.ArgumentTypeError(f"unknown kernel {name!r}; kernel families: {', '.join(NAMES)}")
    return names


def _json_configs(text):
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON list of objects, got {text!r}: {exc}") from None
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise argparse.ArgumentTypeError(f"expected a JSON list of objects, got {text!r}")
    return value


# --------------------------------------------------------------------------- shared helpers
def _device(args, parser):
    import torch

    name = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        parser.error(f"--device {name!r} is not a torch device: {exc}")
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {name!r}: CUDA is not available to this torch ({torch.__version__})")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        parser.error(f"--device {name!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s), "
                     f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    if device.type == "meta":
        parser.error(f"--device {name!r}: meta tensors hold no data; use cpu or cuda")
    try:  # a backend this torch lacks (mps on Linux, xpu) fails here, not with a traceback mid-load
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError) as exc:
        reason = str(exc).splitlines()[0].split(". ")[0]  # torch's first sentence; the rest is build advice
        parser.error(f"--device {name!r} cannot be used with this torch ({torch.__version__}): {reason}")
    return device


def _check_out_path(path, flag, parser, *, directory=False):
    """Refuse an output path that cannot be written, before any work: the writers make missing
    parent directories, but a parent that is a file, or a directory where a file goes (and back),
    failed only at the end of the run, with a traceback."""
    path = Path(path)
    if path.exists() and path.is_dir() != directory:
        parser.error(f"{flag} {str(path)!r} is {'a file' if directory else 'a directory'}; "
                     f"expected {'a directory' if directory else 'a file path'}")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        parser.error(f"{flag} {str(path)!r}: {str(parent)!r} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        parser.error(f"{flag} {str(path)!r}: {str(parent)!r} is not writable")


def _check_geometry_flags(args, parser):
    """The geometry flags that were given, before anything heavy is imported."""
    from .geometry import check_geometry

    try:
        check_geometry(args.height, args.width, args.frames)
    except ValueError as exc:
        parser.error(f"--{exc}")


def _resolve(args, parser, base_defaults):
    """Model info plus geometry/steps, each from the flag, else the model's default, else the base
    (real Wan2.1 checkpoints'); prints what was resolved and where each value came from."""
    from .pipelines import ModelError, model_info

    try:
        info = model_info(args.model)
    except ModelError as exc:
        parser.error(f"--model: {exc}")
    source = {}
    for key, base in base_defaults.items():
        if getattr(args, key, None) is not None:
            source[key] = "flags"
        elif key in info.defaults:
            setattr(args, key, info.defaults[key])
            source[key] = info.defaults_source
        else:
            setattr(args, key, base)
            source[key] = f"real Wan2.1 defaults ({info.defaults_source})"
    by_source = {}
    for key, where in source.items():
        by_source.setdefault(where, []).append(key)
    steps = f", {args.steps} steps" if "steps" in base_defaults else ""
    print(f"resolved: {args.height}x{args.width}, {args.frames} frames{steps}; "
          + "; ".join(f"{', '.join(keys)} from {where}" for where, keys in by_source.items()), flush=True)
    return info


def _load(args, parser, info, device):
    import torch

    from .pipelines import ModelError, load_pipeline

    print(f"model: {info.name} ({info.description})", flush=True)
    try:
        return load_pipeline(args.model, device, getattr(torch, args.dtype))
    except ModelError as exc:  # e.g. the embedded model's weights missing from this install
        parser.error(f"--model: {exc}")


@contextlib.contextmanager
def _vae_decode_progress(vae):
    """A progress bar over the VAE decoder's calls, one per latent frame: the pipeline's own bar
    ends with the last denoising step, and decoding many frames on a CPU takes minutes."""
    from tqdm.auto import tqdm

    if not (hasattr(vae, "post_quant_conv") and hasattr(vae, "decoder")):
        yield
        return
    bar = []

    def start(module, inputs):  # post_quant_conv sees the whole latent (B, C, T, H, W)
        bar.append(tqdm(total=inputs[0].shape[2], desc="VAE decode", unit="latent frame"))

    def advance(module, inputs):
        if bar:
            bar[-1].update()

    hooks = [vae.post_quant_conv.register_forward_pre_hook(start), vae.decoder.register_forward_pre_hook(advance)]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
        for b in bar:
            b.close()


def _smoke_note(info):
    if info.synthetic:
        print(f"note: model {info.name!r} has random weights: it is a smoke model, not a video model; "
              "its output checks that the pipeline runs, it is not meant to look like anything.")


def _command(argv):
    return "wan-fp4 " + shlex.join(argv)


# --------------------------------------------------------------------------- generate
def cmd_generate(args, parser, argv) -> int:
    from .modes import MODES

    if args.attention not in MODES:
        parser.error(f"--attention must be one of {', '.join(MODES)}, got {args.attention!r}")
    if not args.prompt or not args.prompt.strip():
        parser.error("--prompt is required and must not be empty")
    if Path(args.out).suffix.lower() not in VIDEO_SUFFIXES:
        # checked before the run: a bad path must not cost a whole generation
        parser.error(f"--out must be a video file ({', '.join(VIDEO_SUFFIXES)}), got {args.out!r}")
    _check_out_path(args.out, "--out", parser)
    _check_geometry_flags(args, parser)
    info = _resolve(args, parser, GENERATE_DEFAULTS)
    device = _device(args, parser)
    import torch

    from . import processor
    from .pipelines import export_video, read_video

    pipe = _load(args, parser, info, device)
    handle = processor.enable(pipe, mode=args.attention, cross_attention=args.cross_attention)
    try:
        with _vae_decode_progress(pipe.vae):
            video = pipe(prompt=args.prompt, negative_prompt=args.negative_prompt, height=args.height,
                         width=args.width, num_frames=args.frames, num_inference_steps=args.steps,
                         guidance_scale=args.guidance, generator=torch.Generator("cpu").manual_seed(args.seed),
                         output_type="np").frames[0]
        calls = handle.call_counts(by_kind=True)
    finally:
        processor.disable(pipe)
    for (mode, kernel, kind), n in sorted(calls.items(), key=lambda item: (item[0][2] != "self", item[0])):
        print(f"attention: {kind}-attention in mode {mode} ran on kernel {kernel} ({n} calls)")
    path = export_video(video, args.out, fps=args.fps)
    frames = read_video(path)  # read back: what a player will see
    if frames.shape[0] != args.frames or frames.shape[1:3] != (args.height, args.width):
        raise RuntimeError(f"{path} reads back as {frames.shape[0]} frames of {frames.shape[1]}x{frames.shape[2]}, "
                           f"expected {args.frames} of {args.height}x{args.width}")
    print(f"wrote {path} ({frames.shape[0]} frames, {args.height}x{args.width}, {args.fps} fps)")
    _smoke_note(info)
    _world_note(args, frames)
    return 0


def _world_note(args, frames) -> None:
    """On the embedded trained model: what the adherence detector reads back from the video, or
    that the prompt lies outside the only world the model knows."""
    from .pipelines import world
    from .pipelines.trained import DEFAULT_PROMPT, is_trained_model

    if not is_trained_model(args.model):
        return
    try:
        world.parse_prompt(args.prompt)
    except ValueError as exc:
        print(f"note: {exc}: model {args.model!r} knows only the prompts of the world it was trained on, "
              f"like {DEFAULT_PROMPT!r} (grammar: wan_fp4/pipelines/world.py)")
        return
    from .eval import adherence

    seen = adherence.read(frames)
    verdict = "matches the prompt" if seen.matches(args.prompt)["all"] else "does NOT match the prompt"
    print(f"read back: {seen.colour} {seen.shape} moving {seen.direction} ({verdict})")


# --------------------------------------------------------------------------- drift
def _drift_flag_error(message):
    """DriftConfig's errors name its fields (decode_steps); the user typed flags (--decode-steps)."""
    import dataclasses

    from .eval.drift import DriftConfig

    field = message.split(" ", 1)[0].rstrip(":")
    if field in {f.name for f in dataclasses.fields(DriftConfig)}:
        return "--" + field.replace("_", "-") + message[len(field):]
    return message


def cmd_drift(args, parser, argv) -> int:
    if args.prompt is not None and not args.prompt.strip():  # it used to fall back to the default silently
        parser.error("--prompt must not be empty (leave it out for the model's default prompt)")
    _check_out_path(args.out, "--out", parser, directory=True)
    _check_geometry_flags(args, parser)
    info = _resolve(args, parser, DRIFT_DEFAULTS)
    from .eval import drift as D
    from .eval import report as R
    from .pipelines.trained import DEFAULT_PROMPT as TRAINED_PROMPT
    from .pipelines.trained import is_trained_model

    device = _device(args, parser)
    trained = is_trained_model(args.model)
    accuracy = args.accuracy == "on" or (args.accuracy == "auto" and trained)
    # a flag for a part that does not run would be silently ignored
    given = [f for f, v in (("--accuracy-prompts", args.accuracy_prompts),
                            ("--accuracy-seeds", args.accuracy_seeds)) if v is not None]
    if given and not accuracy:
        why = ("--accuracy off" if args.accuracy == "off" else
               f"--accuracy auto turns it on for the embedded trained model only, not {args.model!r}")
        parser.error(f"{' and '.join(given)} given but prompt accuracy is off ({why}); add --accuracy on")
    if args.policy_steps is not None and args.policies == ():
        parser.error("--policy-steps given but --policies none runs no policy")
    default_prompt = TRAINED_PROMPT if trained else D.DEFAULT_PROMPT  # a prompt the model knows
    try:
        cfg = D.DriftConfig(
            modes=tuple(args.modes), steps=tuple(sorted(set(args.steps))),
            prompt=args.prompt if args.prompt else default_prompt, negative_prompt=args.negative_prompt,
            seed=D.DEFAULT_SEED if args.seed is None else args.seed, guidance=args.guidance,
            height=args.height, width=args.width, frames=args.frames, cross_attention=args.cross_attention,
            policies=D.DEFAULT_POLICIES if args.policies is None else tuple(args.policies),
            policy_steps=args.policy_steps, time_repeats=args.time_repeats, capture_steps=args.capture_steps,
            capture_layers=args.capture_layers, capture_kinds=tuple(args.capture_kinds),
            capture_gib=args.capture_gib, capture_rows=args.capture_rows, decode_steps=args.decode_steps,
            accuracy=accuracy, accuracy_prompts=args.accuracy_prompts,
            accuracy_seeds=D.DEFAULT_ACCURACY_SEEDS if args.accuracy_seeds is None else args.accuracy_seeds,
            peers=None if args.peers is None else tuple(args.peers), stacks=tuple(args.stacks or ()))
    except ValueError as exc:
        parser.error(_drift_flag_error(str(exc)))
    try:  # before the model loads: a peer or stack that cannot run here must not cost a load
        peers = D.select_peers(cfg.peers, device)
    except D.PeerUnavailable as exc:
        parser.error(f"--peers: {exc} (leave it out, or --peers none)")
    try:
        D.check_stacks(cfg.stacks, device)
    except D.StackUnavailable as exc:
        parser.error(f"--stacks: {exc}")
    pipe = _load(args, parser, info, device)
    try:
        report = D.build_report(pipe, cfg, info=info, device=device, dtype=args.dtype, command=_command(argv),
                                peers=peers)
    except D.PlanError as exc:  # a setting only checkable against the loaded model
        parser.error(str(exc))
    paths = R.write_drift_report(report, args.out)
    print(R.drift_summary(report))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


# --------------------------------------------------------------------------- bench
def cmd_bench(args, parser, argv) -> int:
    import importlib

    import torch

    # --help needs no GPU: a user on a CPU machine may read what the benchmark takes
    if not torch.cuda.is_available() and not {"-h", "--help"} & set(args.args):
        print(f"wan-fp4 bench {args.kind}: needs a CUDA GPU and torch {torch.__version__} sees none; latency "
              "is only measured on GPUs (figures in BENCHMARKS.md). On CPU, use `wan-fp4 generate` or "
              "`wan-fp4 drift`.", file=sys.stderr)
        return 2
    entry = importlib.import_module(BENCH_ENTRY[args.kind]).main
    return int(entry(list(args.args)) or 0)


# --------------------------------------------------------------------------- check
def cmd_check(args, parser, argv) -> int:
    if args.json is not None:
        _check_out_path(args.json, "--json", parser)
    device = _device(args, parser)
    from .eval import device_check

    return device_check.main(args.kernels, args.suite, args.json, device, args.configs, args.prebuilt_dir,
                             args.affine, command=_command(argv))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Nothing here may download: models are registered names or local directories.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    # Errors go through the subcommand's parser so the usage line shown is the right one.
    return args.run(args, args.subparser, argv)


if __name__ == "__main__":
    sys.exit(main())
