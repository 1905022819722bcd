"""Evaluation: the drift report's runs (drift), its files (report), the metrics (metrics), latency
benchmarks (latency, GPU only; `wan-fp4 bench` imports it lazily) and prompt adherence (adherence).
"""
from .drift import DriftConfig, build_report
from .metrics import compare

__all__ = ["DriftConfig", "build_report", "compare"]
