"""Prebuilt (ahead-of-time) sm90a kernels: a C shim over the DSL's exported header, loaded by ctypes.

Artifacts live in wan_fp4/kernels/prebuilt/sm90a/ (written by scripts/build_prebuilt.py, no GPU
needed):
    <name>.h, <name>.o     export_to_c output: host launch code with the cubin embedded (committed)
    manifest.json          {"source_hash": ..., "kernels": {name: {"mode", "head_dim", "config"}}}
    lib<name>.so           the shim linked with <name>.o (git-ignored: built, not committed)

The exported wrapper `cute_dsl_<name>_wrapper` is `static inline` in the header, so it has no
symbol a loader could resolve. The shim (SHIM_C below) is compiled against the header and exports
two plain C functions, `<name>_shim_load()` and `<name>_shim_run(...)`.

Where the .so comes from (decided): build_prebuilt.py links it (wheel builds run it, so wheels
carry it); in a source checkout without it, the first call links it from the committed .o into
the user cache (~/.cache/wan_fp4/sm90a/<hash>/, or $WAN_FP4_CACHE), which needs a C compiler, the
CUDA headers/cudart_static and the DSL's static runtime library. Whenever any of that is missing,
or the artifacts were built from other kernel sources (manifest hash != hash of this package's
kernel sources), the loader returns None and the caller JIT-compiles: same kernel, same numerics,
only a few seconds of compile on first use. WAN_FP4_SM90_PREBUILT=0 disables the prebuilt path.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

log = logging.getLogger("wan_fp4.sm90")
PKG = Path(__file__).resolve().parent
PREBUILT = PKG.parent / "prebuilt" / "sm90a"
# the sources whose change invalidates a prebuilt kernel
SOURCES = ("kernel.py", "ptx.py", "compile.py", "layout.py")

SHIM_C = r"""
#include "{name}.h"
static {name}_Kernel_Module_t g_mod;
static int g_loaded = 0;
int {name}_shim_load(void) {{
    if (!g_loaded) {{ {name}_Kernel_Module_Load(&g_mod); g_loaded = 1; }}
    return (int)cudaGetLastError();
}}
int32_t {name}_shim_run(void *q, void *k, void *vt, void *o, void *lse, void *sq, void *sk, void *sv,
                        int32_t b, int32_t h, int32_t s_q, int32_t s_kv, float c, void *stream) {{
    return cute_dsl_{name}_wrapper(&g_mod, q, k, vt, o, lse, sq, sk, sv, b, h, s_q, s_kv, c,
                                   (cudaStream_t)stream);
}}
"""

_lock = threading.Lock()
_loaded: dict = {}
_warned: set = set()


def kernel_name(mode: str, head_dim: int) -> str:
    return f"wanfp4_sm90_{mode.replace('-', '')}_d{head_dim}"


def source_hash() -> str:
    h = hashlib.sha256()
    for f in SOURCES:
        h.update(f.encode())
        h.update((PKG / f).read_bytes())
    return h.hexdigest()[:16]


def read_manifest(directory: Path = PREBUILT) -> dict | None:
    try:
        return json.loads((directory / "manifest.json").read_text())
    except (OSError, ValueError):
        return None


def _cuda_home() -> Path:
    for cand in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if cand and (Path(cand) / "include" / "cuda_runtime.h").exists():
            return Path(cand)
    nvcc = shutil.which("nvcc")
    if nvcc:
        return Path(nvcc).resolve().parent.parent
    raise FileNotFoundError("CUDA toolkit headers (cuda_runtime.h) not found; set CUDA_HOME")


def _dsl_libdir() -> str:
    out = subprocess.run([sys.executable, "-m", "cutlass.cute.export.aot_config", "--libdir"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def link_shim(name: str, src_dir: Path, so_path: Path) -> Path:
    """Compile the shim for <name> (header and object in src_dir) and link lib<name>.so.

    Static against cudart and the DSL's CUDA-dialect runtime, so the .so needs only libc (and the
    driver at run time)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise FileNotFoundError("no C compiler (cc/gcc) to build the prebuilt-kernel shim")
    cuda = _cuda_home()
    so_path.parent.mkdir(parents=True, exist_ok=True)
    tmpdir = tempfile.mkdtemp(prefix="wan_fp4_shim_")
    shim = Path(tmpdir) / f"{name}_shim.c"
    shim.write_text(SHIM_C.format(name=name))
    lib64 = cuda / "lib64" if (cuda / "lib64").exists() else cuda / "lib"
    tmp = so_path.with_suffix(f".so.tmp{os.getpid()}")
    cmd = [cc, "-shared", "-fPIC", "-O2", f"-I{src_dir}", f"-I{cuda / 'include'}", "-o", str(tmp), str(shim),
           str(src_dir / f"{name}.o"), f"-L{_dsl_libdir()}", "-l:libcuda_dialect_runtime_static.a",
           f"-L{lib64}", "-lcudart_static", "-ldl", "-lpthread", "-lrt", "-lstdc++", "-Wl,--no-undefined"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    shutil.rmtree(tmpdir, ignore_errors=True)
    if run.returncode != 0:
        raise RuntimeError(f"linking {so_path.name} failed: {' '.join(cmd)}\n{run.stderr[-2000:]}")
    os.replace(tmp, so_path)  # atomic: concurrent first uses never load a half-written file
    return so_path


def _cache_dir(h: str) -> Path:
    base = os.environ.get("WAN_FP4_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "wan_fp4")
    return Path(base) / "sm90a" / h


def bind(so_path: Path, name: str):
    """ctypes handles (load, run) of a shim library; resolving both symbols is the CPU-side check."""
    lib = ctypes.CDLL(str(so_path))
    load = getattr(lib, f"{name}_shim_load")
    load.restype = ctypes.c_int
    load.argtypes = []
    run = getattr(lib, f"{name}_shim_run")
    run.restype = ctypes.c_int32
    run.argtypes = [ctypes.c_void_p] * 8 + [ctypes.c_int32] * 4 + [ctypes.c_float, ctypes.c_void_p]
    return lib, load, run


def find(mode: str, head_dim: int, *, directory: Path = PREBUILT, build: bool = True):
    """The shim library path for (mode, D), building it from the committed object if needed;
    None (with one logged reason) when no usable prebuilt kernel exists."""
    name = kernel_name(mode, head_dim)
    why = None
    man = read_manifest(directory)
    h = source_hash()
    if man is None or name not in man.get("kernels", {}):
        why = f"no prebuilt {name} in {directory}"
    elif man.get("source_hash") != h:
        why = f"prebuilt {name} was built from other kernel sources ({man.get('source_hash')} != {h})"
    else:
        for so in (directory / f"lib{name}.so", _cache_dir(h) / f"lib{name}.so"):
            if so.exists():
                return so
        if not build:
            why = f"lib{name}.so not built"
        else:
            try:
                return link_shim(name, directory, _cache_dir(h) / f"lib{name}.so")
            except Exception as e:  # noqa: BLE001 - any failure means: use the JIT kernel
                why = f"could not build lib{name}.so: {type(e).__name__}: {str(e)[:300]}"
    if why and name not in _warned:
        _warned.add(name)
        log.info("sm90 %s: JIT instead of prebuilt (%s)", mode, why)
    return None


def prebuilt_launcher(mode: str, head_dim: int):
    """A callable run(ptrs(8), sizes(4), c, stream_handle) -> int for the prebuilt kernel, or None."""
    if os.environ.get("WAN_FP4_SM90_PREBUILT", "1") == "0":
        return None
    key = (mode, head_dim)
    with _lock:
        if key in _loaded:
            return _loaded[key]
        fn = None
        so = find(mode, head_dim)
        if so is not None:
            try:
                lib, load, run = bind(so, kernel_name(mode, head_dim))
                err = load()
                if err != 0:
                    raise RuntimeError(f"module load returned cudaError {err}")

                def fn(ptrs, sizes, c, stream, _run=run, _lib=lib):
                    return _run(*ptrs, *sizes, c, stream)
            except Exception as e:  # noqa: BLE001
                log.warning("sm90 %s: prebuilt kernel %s unusable (%s); using JIT", mode, so, e)
                fn = None
        _loaded[key] = fn
        return fn
