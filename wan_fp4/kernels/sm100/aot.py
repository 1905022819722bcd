"""Prebuilt (ahead-of-time) sm100a kernel: the sm100 entry of the general mechanism in
wan_fp4/kernels/aot.py (export, C shim, manifest/hash check, first-use link, ctypes, JIT fallback).

Artifacts: wan_fp4/kernels/prebuilt/sm100a/ (`python scripts/build_prebuilt.py --only sm100`, no
GPU needed): one kernel, `compile_kernel()` with its defaults, keyed by the hash of kernel.py,
ptx.py, compile.py, tmem_plan.py and the constants kernel.py imports from wan_fp4.modes. `sm100_attention`
uses it when the hash matches, JIT otherwise; WAN_FP4_SM100_PREBUILT=0 (or WAN_FP4_PREBUILT=0)
forces JIT. Like the kernel itself, the prebuilt launch has never run on a Blackwell GPU.

    python -m wan_fp4.kernels.sm100.aot [OUT_DIR]   # export .h/.o only (default: the prebuilt folder)
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..aot import Prebuilt, export as _export, modes_key

PKG = Path(__file__).resolve().parent
NAME = "wan_fp4_direct_p_fp4_sm100a"
SOURCES = ("kernel.py", "ptx.py", "compile.py", "tmem_plan.py")
# the wrapper's parameters as launch.py passes them: q, sfq, k, sfk, vt, sfv, out, denom, m;
# seq_q, seq_kv, batch, heads, sq_pad, skv_pad, guard; qk_log2, affine_ac, affine_a, affine_b;
# num_ctas; stream
SIGNATURE = ("void*",) * 9 + ("int32_t",) * 7 + ("float",) * 4 + ("int32_t", "stream")


# the wan_fp4.modes constants kernel.py bakes into the cubin
PREBUILT = Prebuilt(arch="sm100a", gpu_arch="sm_100a", family="sm100", src_dir=PKG, sources=SOURCES,
                    extra_key=modes_key("FP4_SCALE_SHIFT", "LOG2_6", "NEAREST_POW2_BIAS", "P_BLOCK", "TILE_M",
                                        "TILE_N"),
                    signature=SIGNATURE)
OUT_DIR = PREBUILT.directory


def source_hash() -> str:
    return PREBUILT.source_hash()


def export(out_dir: Path = OUT_DIR, name: str = NAME) -> list[Path]:
    """Compile for sm_100a and write `<name>.h` and `<name>.o` into out_dir; returns the paths."""
    from .compile import compile_kernel

    return _export(compile_kernel(), Path(out_dir), name)


def main() -> None:
    from .compile import ARCH

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT_DIR
    for p in export(out):
        print(f"{p}  {p.stat().st_size} bytes  ({ARCH})")


if __name__ == "__main__":
    main()
