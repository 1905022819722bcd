"""The sm90 kernel's launch options and its prebuilt (ahead-of-time) sm90a kernels: the sm90
entries of the general mechanism in wan_fp4/kernels/aot.py (export, C shim, manifest/hash check,
first-use link, ctypes, JIT fallback). The options live here because they name the artifacts.

Artifacts: wan_fp4/kernels/prebuilt/sm90a/ (scripts/build_prebuilt.py --only sm90), one kernel per
(mode, D) with the mode's default_config, keyed by the hash of kernel.py, ptx.py, compile.py and layout.py.
Other configs get their own names (kernel_name), so experiments can be built ahead of time too
(build_prebuilt.py --sm90-config ... --out DIR) and loaded from another folder.
WAN_FP4_SM90_PREBUILT=0 (or WAN_FP4_PREBUILT=0) disables the prebuilt path.
"""
from __future__ import annotations

from pathlib import Path

from ..aot import Prebuilt, bind, cuda_home, link_shim  # noqa: F401 - re-exported for callers/tests

DEFAULT_CONFIG = {"n_wg": 2, "stages": 2, "overlap": True, "fold": 2}
# Per-mode changes to DEFAULT_CONFIG, chosen by measurement (BENCHMARKS.md, sm90 config sweep):
# fp8's exp2 work overlaps its own PV product (intra); direct-p's cheaper codes gain nothing from it.
MODE_CONFIG = {"fp8": {"intra": True}}


def default_config(mode: str) -> dict:
    """The kernel options `host.launch` uses for `mode` unless told otherwise."""
    return {**DEFAULT_CONFIG, **MODE_CONFIG.get(mode, {})}


PKG = Path(__file__).resolve().parent
# the sources whose change invalidates a prebuilt kernel
SOURCES = ("kernel.py", "ptx.py", "compile.py", "layout.py")
# the wrapper's parameters as host.launch passes them: q, k, vt, o, lse, sq, sk, sv; b, h, s_q, s_kv; c; stream
SIGNATURE = ("void*",) * 8 + ("int32_t",) * 4 + ("float", "stream")
PREBUILT = Prebuilt(arch="sm90a", gpu_arch="sm_90a", family="sm90", src_dir=PKG, sources=SOURCES,
                    signature=SIGNATURE)


def kernel_name(mode: str, head_dim: int, config: dict | None = None) -> str:
    """wanfp4_sm90_<mode>_d<D>, plus a tag of the options that differ from the mode's default."""
    base = default_config(mode)
    cfg = {**base, **(config or {})}
    tag = "".join(f"_{key}{int(val)}" for key, val in sorted(cfg.items()) if base.get(key) != val)
    return f"wanfp4_sm90_{mode.replace('-', '')}_d{head_dim}{tag}"


def source_hash() -> str:
    return PREBUILT.source_hash()


def find(mode: str, head_dim: int, config: dict | None = None, *, directory: Path | None = None,
         build: bool = True):
    """The shim library for (mode, D, config) (see Prebuilt.find), or None with one logged reason."""
    return PREBUILT.find(kernel_name(mode, head_dim, config), directory=directory, build=build)
