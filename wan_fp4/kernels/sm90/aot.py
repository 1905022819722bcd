"""The sm90 kernel's prebuilt (ahead-of-time) sm90a kernels: the sm90 entries of the general
mechanism in wan_fp4/kernels/aot.py (export, C shim, manifest/hash check, first-use link, ctypes,
JIT fallback). The launch options they are named by live in config.py.

Artifacts: wan_fp4/kernels/prebuilt/sm90a/ (scripts/build_prebuilt.py --only sm90), one kernel per
(mode, D) with its default_config, keyed by the hash of SOURCES and the constants kernel.py imports
from wan_fp4.modes.
Other configs get their own names (kernel_name), so experiments can be built ahead of time too
(build_prebuilt.py --sm90-config ... --out DIR) and loaded from another folder.
WAN_FP4_SM90_PREBUILT=0 (or WAN_FP4_PREBUILT=0) disables the prebuilt path.
"""
from __future__ import annotations

from pathlib import Path

from ..aot import Prebuilt, bind, cuda_home, link_shim, modes_key  # noqa: F401 - re-exported for callers/tests
from .config import default_config

PKG = Path(__file__).resolve().parent
# the sources whose change invalidates a prebuilt kernel
# config.py: the defaults baked in; split.py: the split CTAs' work (cta_work), traced into the kernel
SOURCES = ("kernel.py", "ptx.py", "compile.py", "layout.py", "config.py", "split.py")
# the wrapper's parameters as host.launch passes them: q, k, vt, o, lse, sq, sk, sv, split workspace,
# tickets, range statistics; b, h, s_q, s_kv, split, segments; c; stream
SIGNATURE = ("void*",) * 11 + ("int32_t",) * 6 + ("float", "stream")
# the wan_fp4.modes constants the kernels (kernel.py, split.py) bake into their cubins are part of
# the key
PREBUILT = Prebuilt(arch="sm90a", gpu_arch="sm_90a", family="sm90", src_dir=PKG, sources=SOURCES,
                    extra_key=modes_key("DIRECT_P_HEADROOM", "DIRECT_P_ONE", "DIRECT_P_SLOPE", "DIRECT_P_TOP",
                                        "E4M3_MAX", "E4M3_ONE", "LOG2_P_SCALE", "LN2", "QK_SCALE_BLOCK", "TILE_M",
                                        "TILE_N"),
                    signature=SIGNATURE)


def kernel_name(mode: str, head_dim: int, config: dict | None = None) -> str:
    """wanfp4_sm90_<mode>_d<D>, plus a tag of the options that differ from (mode, D)'s default."""
    base = default_config(mode, head_dim)
    cfg = default_config(mode, head_dim, config)
    tag = "".join(f"_{key}{int(val)}" for key, val in sorted(cfg.items()) if base.get(key) != val)
    return f"wanfp4_sm90_{mode.replace('-', '')}_d{head_dim}{tag}"


def source_hash() -> str:
    return PREBUILT.source_hash()


def find(mode: str, head_dim: int, config: dict | None = None, *, directory: Path | None = None,
         build: bool = True):
    """The shim library for (mode, D, config) (see Prebuilt.find), or None with one logged reason."""
    return PREBUILT.find(kernel_name(mode, head_dim, config), directory=directory, build=build)
