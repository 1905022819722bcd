"""Ahead-of-time (prebuilt) CuTe DSL kernels, for any arch: export, C shim, link, manifest, load.

One mechanism serves sm90a and sm100a. Per arch family, wan_fp4/kernels/prebuilt/<arch>/ holds
(written by scripts/build_prebuilt.py, no GPU needed):

    <name>.h, <name>.o   `export_to_c` output: host launch code with the cubin embedded (committed)
    manifest.json        {"arch", "source_hash", "dsl_version", "kernels": {name: meta}} (committed)
    lib<name>.so         the C shim linked with <name>.o (git-ignored: built, not committed)

The exported wrapper `cute_dsl_<name>_wrapper(module, args..., cudaStream_t)` is `static inline`
in the header, so no loader can resolve it. `shim_source` reads its parameter list from the header
and writes a C shim exporting plain functions: `<name>_shim_load()` (loads the cubin on every
device, returns the CUDA error), `<name>_shim_run(args..., void *stream)` (the wrapper) and the
string `<name>_shim_signature` (the parameter C types, so `bind` sets ctypes argtypes from the
library itself). `link_shim` links it statically against cudart and the DSL's CUDA-dialect
runtime: the .so needs only libc (and the driver at run time).

`Prebuilt` is one arch family's loader. A kernel is used only when the manifest lists it and its
`source_hash` equals the hash of this package's kernel sources (so a kernel edit without a
rebuild can never run stale code). The .so is taken from the prebuilt folder, else from the user
cache (~/.cache/wan_fp4/<arch>/<hash>-shim<N>/, or $WAN_FP4_CACHE/...), else linked there on first use
from the committed .o (needs a C compiler, the CUDA headers + cudart_static and the DSL's static
runtime library). Whenever anything is missing or fails, the loader returns None with one logged
reason and the caller JIT-compiles the same kernel. WAN_FP4_PREBUILT=0 (all archs) or
WAN_FP4_<FAMILY>_PREBUILT=0 (e.g. WAN_FP4_SM100_PREBUILT=0) disables the prebuilt path.

Exporting without a GPU: the object dump resolves the DSL runtime's `_cuda*` wrapper symbols in
the running process; with no driver nothing has loaded `libcute_dsl_runtime.so` ("JIT session
error: Symbols not found"). `export` loads it RTLD_GLOBAL first (the in-process equivalent of
LD_PRELOAD=<that library>, which also works).
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

PREBUILT_ROOT = Path(__file__).resolve().parent / "prebuilt"
# bump when shim_source changes: first-use links in the user cache are keyed by it
SHIM_VERSION = 2

# C parameter types the exported wrapper may take (pointer/scalar arguments only), as ctypes.
C_TYPES = {
    "void*": ctypes.c_void_p,
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "stream": ctypes.c_void_p,  # cudaStream_t, passed as the raw handle
}


# ---------------------------------------------------------------------------------- export
def runtime_library() -> Path:
    """libcute_dsl_runtime.so of the installed nvidia-cutlass-dsl (newest CUDA flavour first)."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia_cutlass_dsl")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("nvidia-cutlass-dsl is not installed")
    root = Path(list(spec.submodule_search_locations)[0])
    libs = sorted(root.glob("cu*/lib/libcute_dsl_runtime.so"), reverse=True)
    if not libs:
        raise RuntimeError(f"libcute_dsl_runtime.so not found under {root}")
    return libs[0]


_runtime_handle = None


def load_runtime() -> None:
    """Make the DSL runtime's symbols global in this process (what LD_PRELOAD would do)."""
    global _runtime_handle
    if _runtime_handle is None:
        _runtime_handle = ctypes.CDLL(str(runtime_library()), mode=ctypes.RTLD_GLOBAL)


def export(compiled, out_dir: Path, name: str) -> list[Path]:
    """`compiled.export_to_c(out_dir, name)`, GPU or not; returns [<name>.h, <name>.o]."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    load_runtime()
    try:
        compiled.export_to_c(str(out_dir), name)
    except Exception as e:
        raise RuntimeError(f"export_to_c({name}) failed; on a machine without a GPU try "
                           f"LD_PRELOAD={runtime_library()}: {e}") from e
    paths = [out_dir / f"{name}.h", out_dir / f"{name}.o"]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise RuntimeError(f"export_to_c did not write {missing}")
    return paths


def dsl_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("nvidia-cutlass-dsl")
    except Exception:  # noqa: BLE001
        return None


# -------------------------------------------------------------------------------- the shim
def wrapper_signature(header: str, name: str) -> list[tuple[str, str]]:
    """[(C type, parameter name)] of `cute_dsl_<name>_wrapper` after its module argument, from
    the exported header text. Types are normalised to the keys of C_TYPES ("stream" last)."""
    m = re.search(rf"cute_dsl_{re.escape(name)}_wrapper\s*\(\s*{re.escape(name)}_Kernel_Module_t\s*\*\s*\w+\s*,"
                  r"([^)]*)\)", header)
    if m is None:
        raise ValueError(f"no cute_dsl_{name}_wrapper(...) in the exported header")
    params = []
    for raw in m.group(1).split(","):
        pm = re.fullmatch(r"\s*(.*?)\s*(\**)\s*(\w+)\s*", raw)
        if pm is None:
            raise ValueError(f"cannot parse wrapper parameter {raw!r}")
        ctype = (pm.group(1) + pm.group(2)).replace(" ", "")
        ctype = "stream" if ctype == "cudaStream_t" else ctype
        if ctype not in C_TYPES:
            raise ValueError(f"wrapper parameter {raw.strip()!r}: type {ctype} is not supported by the shim "
                             f"(export kernels with pointer and scalar arguments only)")
        params.append((ctype, pm.group(3)))
    if not params or params[-1][0] != "stream" or any(t == "stream" for t, _ in params[:-1]):
        raise ValueError(f"cute_dsl_{name}_wrapper must take the stream last, once")
    return params


def shim_source(name: str, header: str) -> str:
    """C source of the shim for <name>, from the exported header text."""
    params = wrapper_signature(header, name)
    decl = ", ".join(("void *" if t in ("void*", "stream") else t + " ") + p for t, p in params)
    call = ", ".join(f"(cudaStream_t){p}" if t == "stream" else p for t, p in params)
    sig = ",".join(t for t, _ in params)
    return (
        f'#include "{name}.h"\n'
        f"static {name}_Kernel_Module_t g_mod;\n"
        f"static int g_loaded = 0;\n"
        f'const char {name}_shim_signature[] = "{sig}";\n'
        f"int {name}_shim_load(void) {{\n"
        f"    if (!g_loaded) {{\n"
        # the exported loader ignores a failed cudaGetDeviceCount and then loops over an
        # uninitialised count (a crash with no driver): ask first, report the error instead
        f"        int n = 0;\n"
        f"        cudaError_t e = cudaGetDeviceCount(&n);\n"
        f"        if (e != cudaSuccess) return (int)e;\n"
        f"        if (n < 1) return (int)cudaErrorNoDevice;\n"
        f"        {name}_Kernel_Module_Load(&g_mod); g_loaded = 1;\n"
        f"    }}\n"
        f"    return (int)cudaGetLastError();\n"
        f"}}\n"
        f"int32_t {name}_shim_run({decl}) {{\n"
        f"    return cute_dsl_{name}_wrapper(&g_mod, {call});\n"
        f"}}\n"
    )


def cuda_home() -> Path:
    for cand in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if cand and (Path(cand) / "include" / "cuda_runtime.h").exists():
            return Path(cand)
    nvcc = shutil.which("nvcc")
    if nvcc:
        return Path(nvcc).resolve().parent.parent
    raise FileNotFoundError("CUDA toolkit headers (cuda_runtime.h) not found; set CUDA_HOME")


def dsl_libdir() -> str:
    out = subprocess.run([sys.executable, "-m", "cutlass.cute.export.aot_config", "--libdir"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def c_compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise FileNotFoundError("no C compiler (cc/gcc) to build the prebuilt-kernel shim")
    return cc


def link_shim(name: str, src_dir: Path, so_path: Path) -> Path:
    """Compile the shim for <name> (header and object in src_dir) and link it into so_path.

    Static against cudart and the DSL's CUDA-dialect runtime, so the .so needs only libc (and the
    driver at run time). Linked without its symbol table (-s; the dynamic symbols the loader binds
    stay): a quarter smaller, which matters where the shims travel to a device beside the package.
    The file appears atomically (concurrent first uses never load half of it)."""
    src_dir, so_path = Path(src_dir), Path(so_path)
    cc = c_compiler()
    cuda = cuda_home()
    source = shim_source(name, (src_dir / f"{name}.h").read_text())
    so_path.parent.mkdir(parents=True, exist_ok=True)
    tmpdir = tempfile.mkdtemp(prefix="wan_fp4_shim_")
    shim = Path(tmpdir) / f"{name}_shim.c"
    shim.write_text(source)
    lib64 = cuda / "lib64" if (cuda / "lib64").exists() else cuda / "lib"
    tmp = so_path.with_suffix(f".so.tmp{os.getpid()}")
    cmd = [cc, "-shared", "-fPIC", "-O2", "-s", f"-I{src_dir}", f"-I{cuda / 'include'}", "-o", str(tmp), str(shim),
           str(src_dir / f"{name}.o"), f"-L{dsl_libdir()}", "-l:libcuda_dialect_runtime_static.a",
           f"-L{lib64}", "-lcudart_static", "-ldl", "-lpthread", "-lrt", "-lstdc++", "-Wl,--no-undefined"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    shutil.rmtree(tmpdir, ignore_errors=True)
    if run.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"linking {so_path.name} failed: {' '.join(cmd)}\n{run.stderr[-2000:]}")
    os.replace(tmp, so_path)
    return so_path


@dataclass
class Shim:
    """ctypes handles of a linked shim library."""

    lib: ctypes.CDLL
    load: Callable[[], int]
    run: Callable[..., int]
    signature: tuple[str, ...]


def bind(so_path: Path, name: str) -> Shim:
    """Load a shim library and resolve its symbols (the CPU-side check); argtypes come from the
    signature string the shim carries."""
    lib = ctypes.CDLL(str(so_path))
    sig_addr = ctypes.addressof(ctypes.c_char.in_dll(lib, f"{name}_shim_signature"))  # a char array
    sig = ctypes.string_at(sig_addr).decode().split(",")
    load = getattr(lib, f"{name}_shim_load")
    load.restype = ctypes.c_int
    load.argtypes = []
    run = getattr(lib, f"{name}_shim_run")
    run.restype = ctypes.c_int32
    run.argtypes = [C_TYPES[t] for t in sig]
    return Shim(lib, load, run, tuple(sig))


def modes_key(*names: str) -> Callable[[], str]:
    """A Prebuilt.extra_key over wan_fp4.modes constants that a kernel bakes into its cubin (they
    live outside the hashed sources, so their values are part of the artifact's key)."""

    def key() -> str:
        from .. import modes

        return ";".join(f"{n}={getattr(modes, n)!r}" for n in names)

    return key


# ------------------------------------------------------------------------- one arch's loader
@dataclass
class Prebuilt:
    """The prebuilt kernels of one arch family.

    arch: folder name under prebuilt/ and in the cache ("sm90a"); gpu_arch: "sm_90a" (manifest);
    family: "sm90" (log name and the WAN_FP4_SM90_PREBUILT switch); src_dir + sources: the files
    whose bytes key the artifacts; extra_key: more key material (constants imported from
    elsewhere), "" for none; signature: the C types (C_TYPES keys) the family's launch passes, which
    a shim must declare to be used (None: not checked)."""

    arch: str
    gpu_arch: str
    family: str
    src_dir: Path
    sources: tuple[str, ...]
    extra_key: Callable[[], str] | None = None
    directory: Path | None = None
    signature: tuple[str, ...] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    _loaded: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _warned: set = field(default_factory=set, init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.directory is None:
            self.directory = PREBUILT_ROOT / self.arch
        self.directory = Path(self.directory)
        self.src_dir = Path(self.src_dir)

    @property
    def log(self) -> logging.Logger:
        return logging.getLogger(f"wan_fp4.{self.family}")

    @property
    def switch(self) -> str:
        return f"WAN_FP4_{self.family.upper()}_PREBUILT"

    def enabled(self) -> bool:
        return os.environ.get("WAN_FP4_PREBUILT", "1") != "0" and os.environ.get(self.switch, "1") != "0"

    def source_hash(self) -> str:
        h = hashlib.sha256()
        for f in self.sources:
            h.update(f.encode())
            h.update((self.src_dir / f).read_bytes())
        extra = self.extra_key() if self.extra_key else ""
        if extra:
            h.update(extra.encode())
        return h.hexdigest()[:16]

    def read_manifest(self, directory: Path | None = None) -> dict | None:
        try:
            return json.loads((Path(directory or self.directory) / "manifest.json").read_text())
        except (OSError, ValueError):
            return None

    def write_manifest(self, built: dict, directory: Path | None = None) -> Path:
        """Record `built` ({name: meta}) under the current source hash; entries of an older hash are
        dropped, entries of this hash not rebuilt now are kept."""
        directory = Path(directory or self.directory)
        h = self.source_hash()
        man = self.read_manifest(directory) or {}
        kernels = man.get("kernels", {}) if man.get("source_hash") == h else {}
        kernels.update(built)
        path = directory / "manifest.json"
        path.write_text(json.dumps({"arch": self.gpu_arch, "source_hash": h, "dsl_version": dsl_version(),
                                    "kernels": kernels}, indent=1, sort_keys=True) + "\n")
        return path

    def cache_dir(self, h: str) -> Path:
        base = os.environ.get("WAN_FP4_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "wan_fp4")
        return Path(base) / self.arch / f"{h}-shim{SHIM_VERSION}"

    def _note(self, name: str, why: str) -> None:
        if name not in self._warned:
            self._warned.add(name)
            self.log.info("%s %s: JIT instead of prebuilt (%s)", self.family, name, why)

    def check(self, name: str, directory: Path | None = None) -> str | None:
        """Why the prebuilt <name> must not be used (None: manifest lists it, hash matches)."""
        directory = Path(directory or self.directory)
        man = self.read_manifest(directory)
        h = self.source_hash()
        if man is None or name not in man.get("kernels", {}):
            return f"no prebuilt {name} in {directory}"
        if man.get("source_hash") != h:
            return (f"prebuilt {name} was built from other kernel sources ({man.get('source_hash')} != {h}); "
                    f"rebuild with: python scripts/build_prebuilt.py --only {self.family}")
        return None

    def find(self, name: str, *, directory: Path | None = None, build: bool = True) -> Path | None:
        """The shim library of <name>, linking it into the cache from the committed object if needed;
        None (with one logged reason) when no usable prebuilt kernel exists."""
        directory = Path(directory or self.directory)
        why = self.check(name, directory)
        if why is None:
            h = self.source_hash()
            for so in (directory / f"lib{name}.so", self.cache_dir(h) / f"lib{name}.so"):
                if so.exists():
                    return so
            if not build:
                why = f"lib{name}.so not built"
            else:
                try:
                    return link_shim(name, directory, self.cache_dir(h) / f"lib{name}.so")
                except Exception as e:  # noqa: BLE001 - any failure means: use the JIT kernel
                    why = f"could not build lib{name}.so: {type(e).__name__}: {str(e)[:300]}"
        self._note(name, why)
        return None

    def launcher(self, name: str, expect: tuple[str, ...] | None = None):
        """`run(*args, stream_handle) -> int` (CUDA error code) for the prebuilt <name>, or None
        (JIT). expect: the C types the caller passes (C_TYPES keys; default: `signature`); a
        mismatch refuses the artifact. Loads the module on every device once; the result is cached
        per name."""
        expect = self.signature if expect is None else expect
        if not self.enabled():
            return None
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            fn = None
            so = self.find(name)
            if so is not None:
                try:
                    shim = bind(so, name)
                    if expect is not None and tuple(expect) != shim.signature:
                        raise RuntimeError(f"signature {shim.signature} != expected {tuple(expect)}")
                    err = shim.load()
                    if err != 0:
                        raise RuntimeError(f"module load returned cudaError {err}")

                    def fn(*args, _run=shim.run, _shim=shim):
                        return _run(*args)
                except Exception as e:  # noqa: BLE001
                    self.log.warning("%s %s: prebuilt kernel %s unusable (%s); using JIT", self.family, name, so, e)
                    fn = None
            self._loaded[name] = fn
            return fn

    def run_or_jit(self, name: str, args: tuple, device, jit: Callable[[], None], prebuilt: bool | None = None,
                   missing: str = "") -> None:
        """Every family's launch: the prebuilt <name> when usable, else the same kernel JIT-compiled.

        prebuilt: None = prebuilt when `launcher(name)` gives a run function, else `jit()`; True =
        require the prebuilt kernel; False = always `jit()`. args: the run function's arguments
        (pointers as ints, scalars, the raw stream handle, as `signature` lists them), called on
        `device`. missing: what the error adds when no prebuilt kernel is usable."""
        run = self.launcher(name) if prebuilt is not False else None
        if prebuilt and run is None:
            raise RuntimeError(f"no usable prebuilt {self.family} kernel {name}{missing}")
        if run is None:
            jit()
            return
        import torch

        with torch.cuda.device(device):
            err = run(*args)
        if err != 0:
            raise RuntimeError(f"prebuilt {self.family} kernel {name} launch failed with error {err}")
