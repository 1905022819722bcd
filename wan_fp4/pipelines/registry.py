"""Named models and local-path loading: `load_pipeline("tiny" | NAME | PATH, device, dtype)`.

"tiny" is the embedded trained model (its weights ship in the package, loaded like any local
directory); "tiny-random" is a pipeline of the same kind of classes with random weights, built from
code in a second, for smoke tests.

Names live in a small registry so other modules can add builders (e.g. `random:1.3b` in
`wan_fp4/pipelines/random.py`) without touching this file: they call `register_model` at import,
and the modules listed in `_BUILDER_MODULES` are imported the first time a name is looked up.
"""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from . import trained

# Modules that register builders when imported; a module that does not exist yet is skipped.
_BUILDER_MODULES = ("wan_fp4.pipelines.random",)
_loaded_builders = False

# Pipeline classes `load_pipeline` accepts from a local directory (text-to-video Wan2.1).
WAN_PIPELINE_CLASSES = ("WanPipeline",)
# Optional file in a local pipeline directory: the command line's defaults for that model (a
# saved small model is 128x128, not 480x832). Written by `write_defaults`.
DEFAULTS_FILE = "wan_fp4_defaults.json"
DEFAULT_KEYS = ("height", "width", "frames", "steps")


class ModelError(ValueError):
    """A model name or path that cannot be loaded; the message says why and what is accepted."""


@dataclass(frozen=True)
class ModelSpec:
    """A named model.

    build(device, dtype) -> WanPipeline. synthetic: random weights, so every output is a smoke
    test and drift is not a quality figure. defaults: CLI defaults suited to this model
    (height, width, frames, steps), overriding the real-model ones.
    """

    name: str
    build: Callable[[torch.device, torch.dtype], object]
    description: str
    synthetic: bool = True
    defaults: dict = field(default_factory=dict)


MODELS: dict[str, ModelSpec] = {}


def register_model(spec: ModelSpec, *, replace: bool = False) -> ModelSpec:
    if not isinstance(spec, ModelSpec):
        raise TypeError(f"spec must be a ModelSpec, got {type(spec).__name__}")
    if spec.name in MODELS and not replace:
        raise ValueError(f"model name {spec.name!r} is already registered")
    check_defaults(spec.defaults, f"model {spec.name!r} defaults")
    MODELS[spec.name] = spec
    return spec


def registered_models() -> dict[str, ModelSpec]:
    """All named models, after importing the builder modules that exist."""
    global _loaded_builders
    if not _loaded_builders:
        _loaded_builders = True
        for module in _BUILDER_MODULES:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name != module:  # the module exists but one of its imports is missing
                    raise
    return MODELS


@dataclass(frozen=True)
class ModelInfo:
    """What a `--model` argument refers to, for labels in outputs and reports. defaults_source
    says where `defaults` came from (or why there are none), for messages."""

    name: str
    synthetic: bool
    description: str
    defaults: dict
    defaults_source: str = ""


def model_info(model: str) -> ModelInfo:
    _check_model_arg(model)  # as load_pipeline: "" would otherwise describe the working directory
    models = registered_models()
    if model in models:
        spec = models[model]
        return ModelInfo(spec.name, spec.synthetic, spec.description, dict(spec.defaults),
                         f"model {spec.name!r}" if spec.defaults else f"model {spec.name!r} sets none")
    path = _check_local_dir(model)
    file = path / DEFAULTS_FILE
    defaults = read_defaults(file) if file.is_file() else {}
    source = str(file) if file.is_file() else f"{path} has no {DEFAULTS_FILE}"
    return ModelInfo(str(path), False, f"local diffusers Wan pipeline at {path}", defaults, source)


def check_defaults(defaults: dict, where: str) -> dict:
    """Defaults as ints, each a key of DEFAULT_KEYS with a value a pipeline call accepts."""
    from ..geometry import check_geometry

    unknown = sorted(set(defaults) - set(DEFAULT_KEYS))
    if unknown:
        raise ModelError(f"{where}: unknown keys {unknown}; allowed: {', '.join(DEFAULT_KEYS)}")
    for key, value in defaults.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ModelError(f"{where}: {key} must be a positive integer, got {value!r}")
    try:
        check_geometry(defaults.get("height"), defaults.get("width"), defaults.get("frames"))
    except ValueError as exc:
        raise ModelError(f"{where}: {exc}") from None
    return dict(defaults)


def read_defaults(file: Path) -> dict:
    try:
        data = json.loads(Path(file).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"cannot read {file} ({exc})") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{file} must hold a JSON object like {{\"height\": 64, \"steps\": 8}}")
    return check_defaults(data, str(file))


def write_defaults(path, **defaults) -> Path:
    """Record the command line's defaults (height, width, frames, steps) in a saved pipeline
    directory, e.g. next to `pipe.save_pretrained(path)`; `model_info(path)` reads them back."""
    # model_info reads the file only in a pipeline directory: anywhere else it would go unused
    if not (Path(path) / "model_index.json").is_file():
        raise ModelError(f"write_defaults: {str(path)!r} is not a saved diffusers pipeline directory (no "
                         "model_index.json); call pipe.save_pretrained(path) first")
    file = Path(path) / DEFAULTS_FILE
    file.write_text(json.dumps(check_defaults(defaults, "write_defaults"), indent=1) + "\n")
    return file


def load_pipeline(model: str, device: str | torch.device = "cpu", dtype: torch.dtype = torch.bfloat16):
    """A WanPipeline on `device`: a registered name (e.g. "tiny", "tiny-random") or a local diffusers
    directory.

    dtype is the transformer's and text encoder's; the VAE is kept in float32 (the Wan2.1
    diffusers recipe: its decode is sensitive to bf16). Never downloads anything.
    """
    _check_model_arg(model)
    # diffusers turns a dtype that is not a torch.dtype (e.g. "bfloat16") into float32 with a log line
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype such as torch.bfloat16, got {dtype!r}")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be a torch device or its name (\"cpu\", \"cuda:0\"), got {device!r}: "
                         f"{str(exc).splitlines()[0]}") from None
    models = registered_models()
    if model in models:
        pipe = models[model].build(device, dtype)
    else:
        pipe = _load_local(_check_local_dir(model), device, dtype)
    return pipe.to(device)


def _check_model_arg(model) -> None:
    if not isinstance(model, str) or not model:
        raise ModelError(f"model must be a non-empty string, got {model!r}")


def _check_local_dir(model: str) -> Path:
    path = Path(model).expanduser()
    names = ", ".join(sorted(registered_models()))
    if not path.exists():
        raise ModelError(f"model {model!r} is neither a known name ({names}) nor an existing "
                         "local directory; wan-fp4 never downloads weights: pass the path of a "
                         "diffusers Wan2.1 pipeline saved on disk")
    index = path / "model_index.json"
    if not path.is_dir() or not index.is_file():
        raise ModelError(f"model path {str(path)!r} is not a diffusers pipeline directory "
                         "(no model_index.json)")
    try:
        cls = json.loads(index.read_text()).get("_class_name")
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"model path {str(path)!r}: cannot read model_index.json ({exc})") from exc
    if cls not in WAN_PIPELINE_CLASSES:
        raise ModelError(f"model path {str(path)!r} holds a {cls!r}, not a Wan text-to-video "
                         f"pipeline (expected one of {WAN_PIPELINE_CLASSES})")
    return path


def _load_local(path: Path, device: torch.device, dtype: torch.dtype):
    from diffusers import WanPipeline

    pipe = WanPipeline.from_pretrained(str(path), dtype={"default": dtype, "vae": torch.float32},
                                       local_files_only=True)
    if device.type == "cpu":
        _realign(pipe)
    return pipe


def _realign(pipe) -> None:
    """Copy weights out of the safetensors memory map. Mapped tensors can sit at unaligned
    addresses, and CPU GEMMs then take another (equally valid) path whose float rounding differs,
    so a reloaded pipeline would not reproduce the same weights held in ordinary memory."""
    for component in pipe.components.values():
        if isinstance(component, torch.nn.Module):
            for tensor in list(component.parameters()) + list(component.buffers()):
                tensor.data = tensor.data.clone()


def _build_trained(device, dtype):
    try:
        path = trained.trained_dir()
    except FileNotFoundError as exc:
        raise ModelError(f"model {trained.NAME!r}: {exc}") from None
    return _load_local(_check_local_dir(str(path)), device, dtype)


def _build_tiny_random(device, dtype):
    from .tiny import build_tiny_pipeline

    return build_tiny_pipeline(seed=0, dtype=dtype)


register_model(ModelSpec(
    name=trained.NAME, build=_build_trained, synthetic=False, defaults=dict(trained.DEFAULTS),
    description="embedded small Wan2.1-architecture model (real diffusers classes) trained by wan-fp4 on its "
                "procedural world of coloured balls and squares (wan_fp4/pipelines/world.py): it draws prompts "
                "like 'a red ball moving right' and nothing else; its drift is the real drift of a trained "
                "model, not Wan2.1-14B's"))
register_model(ModelSpec(
    name="tiny-random", build=_build_tiny_random, synthetic=True,
    description="embedded tiny Wan pipeline (random weights, built from code): a smoke model, "
                "not a video model",
    defaults={"height": 64, "width": 64, "frames": 17, "steps": 8}))
