"""Pipelines: the embedded models ("tiny", trained; "tiny-random", built from code), local-weights
loading, and video export."""
from .registry import (DEFAULTS_FILE, MODELS, WAN_PIPELINE_CLASSES, ModelError, ModelInfo, ModelSpec,
                       load_pipeline, model_info, register_model, registered_models, write_defaults)
from .tiny import build_tiny_pipeline
from .video import export_video, read_video

__all__ = ["DEFAULTS_FILE", "MODELS", "WAN_PIPELINE_CLASSES", "ModelError", "ModelInfo", "ModelSpec", "build_tiny_pipeline",
           "export_video", "load_pipeline", "model_info", "read_video", "register_model",
           "registered_models", "write_defaults"]
