"""Evaluation: latent drift per attention mode (drift), report writing (report).

Latency benchmarks live in `wan_fp4.eval.latency` when installed (GPU only); `wan-fp4 bench`
imports it lazily.
"""
from .drift import DriftConfig, RunResult, compare, run_drift

__all__ = ["DriftConfig", "RunResult", "compare", "run_drift"]
