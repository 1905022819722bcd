"""Ahead-of-time export of the sm100a kernel (header + object with the cubin embedded).

Rebuild (from the repository root, no GPU needed):

    python -m wan_fp4.kernels.sm100.aot [OUT_DIR]   # default wan_fp4/kernels/prebuilt/sm100a/

On a machine without a CUDA driver the DSL's object dump needs its runtime library preloaded;
`main()` re-executes itself with LD_PRELOAD set when it is missing. The object can be linked
into a self-contained shared library with the command printed by `link_command()`.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .compile import ARCH, compile_kernel

NAME = "wan_fp4_direct_p_fp4_sm100a"
OUT_DIR = Path(__file__).resolve().parent.parent / "prebuilt" / "sm100a"


def runtime_library() -> Path:
    """libcute_dsl_runtime.so of the installed nvidia-cutlass-dsl (the cu13 flavour)."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia_cutlass_dsl")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("nvidia-cutlass-dsl is not installed")
    root = Path(list(spec.submodule_search_locations)[0])
    for flavour in ("cu13", "cu12"):
        lib = root / flavour / "lib" / "libcute_dsl_runtime.so"
        if lib.exists():
            return lib
    raise RuntimeError(f"libcute_dsl_runtime.so not found under {root}")


def export(out_dir: Path = OUT_DIR, name: str = NAME) -> list[Path]:
    """Compile for sm_100a and write `<name>.h` and `<name>.o` into out_dir; returns the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    compiled = compile_kernel()
    compiled.export_to_c(str(out_dir), name)
    paths = [out_dir / f"{name}.h", out_dir / f"{name}.o"]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise RuntimeError(f"export_to_c did not write {missing}")
    return paths


def link_command(out_dir: Path = OUT_DIR, name: str = NAME) -> list[str]:
    """g++ command that links the object into lib<name>.so (static CUDA runtime, needs libcudart_static)."""
    libdir = subprocess.run([sys.executable, "-m", "cutlass.cute.export.aot_config", "--libdir"],
                            check=True, capture_output=True, text=True).stdout.strip()
    return ["g++", "-shared", "-fPIC", "-o", str(Path(out_dir) / f"lib{name}.so"),
            str(Path(out_dir) / f"{name}.o"), f"-L{libdir}", "-l:libcuda_dialect_runtime_static.a",
            "-L/usr/local/cuda/lib64", "-lcudart_static", "-ldl", "-lpthread", "-lrt",
            "-Wl,--no-undefined"]


def main() -> None:
    lib = str(runtime_library())
    if lib not in os.environ.get("LD_PRELOAD", ""):
        env = dict(os.environ, LD_PRELOAD=lib)
        os.execve(sys.executable, [sys.executable, "-m", "wan_fp4.kernels.sm100.aot", *sys.argv[1:]], env)
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT_DIR
    for p in export(out):
        print(f"{p}  {p.stat().st_size} bytes  ({ARCH})")


if __name__ == "__main__":
    main()
