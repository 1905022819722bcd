"""Ahead-of-time build of the CuTe DSL kernels into wan_fp4/kernels/prebuilt/<arch>/ (no GPU needed).

    LD_PRELOAD=<nvidia_cutlass_dsl>/cu13/lib/libcute_dsl_runtime.so python scripts/build_prebuilt.py [--only sm90]

Each entry compiles one kernel for its arch and exports it with `export_to_c` (a header plus an
object holding the host launch code and the cubin). Exporting on a machine without a GPU needs
the LD_PRELOAD above (otherwise: "JIT session error: Symbols not found"); the script re-executes
itself with it when it can find the library.

ENTRIES is the data: (name, arch family, output folder, build() -> compiled kernel, meta dict).
The sm100 half may add its own entries. For the sm90 family the script also writes
prebuilt/sm90a/manifest.json (the hash of the kernel sources; the loader ignores artifacts built
from other sources) and links lib<name>.so through the C shim of wan_fp4.kernels.sm90.aot, which
is what `sm90_attention` loads by ctypes (JIT otherwise). The .h/.o are small and committed;
the .so files are git-ignored and built here, by wheel builds, or at first use.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PREBUILT = ROOT / "wan_fp4" / "kernels" / "prebuilt"


def _sm90(mode, head_dim):
    def build():
        from wan_fp4.kernels.sm90 import DEFAULT_CONFIG
        from wan_fp4.kernels.sm90.compile import compile_kernel

        return compile_kernel(mode, head_dim, **DEFAULT_CONFIG)

    return build


def _sm90_entry(mode, head_dim):
    from wan_fp4.kernels.sm90.aot import kernel_name

    return (kernel_name(mode, head_dim), "sm90", PREBUILT / "sm90a", _sm90(mode, head_dim),
            {"mode": mode, "head_dim": head_dim})


ENTRIES = [
    # (name, arch family, output folder, build() -> compiled kernel, meta)
    _sm90_entry("direct-p", 128),
    _sm90_entry("fp8", 128),
    _sm90_entry("direct-p", 64),
    _sm90_entry("fp8", 64),
]


def _ensure_runtime_preloaded():
    if os.environ.get("_WAN_FP4_PRELOADED") or "libcute_dsl_runtime" in os.environ.get("LD_PRELOAD", ""):
        return
    import importlib.util

    spec = importlib.util.find_spec("nvidia_cutlass_dsl")
    if spec is None or not spec.submodule_search_locations:
        return
    base = Path(list(spec.submodule_search_locations)[0])
    libs = sorted(base.glob("cu*/lib/libcute_dsl_runtime.so"), reverse=True)
    if libs:
        env = dict(os.environ, LD_PRELOAD=str(libs[0]), _WAN_FP4_PRELOADED="1")
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def finish_sm90(out_dir: Path, built: list, link: bool) -> None:
    from wan_fp4.kernels.sm90 import DEFAULT_CONFIG
    from wan_fp4.kernels.sm90.aot import link_shim, read_manifest, source_hash

    man = read_manifest(out_dir) or {}
    kernels = man.get("kernels", {}) if man.get("source_hash") == source_hash() else {}
    for name, meta in built:
        kernels[name] = {**meta, "config": DEFAULT_CONFIG}
    (out_dir / "manifest.json").write_text(json.dumps(
        {"source_hash": source_hash(), "arch": "sm_90a", "kernels": kernels}, indent=1, sort_keys=True) + "\n")
    if link:
        for name, _ in built:
            link_shim(name, out_dir, out_dir / f"lib{name}.so")
            print(f"linked lib{name}.so", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None, help="arch family to build (sm90, sm100)")
    ap.add_argument("--no-link", action="store_true", help="export .h/.o (and the manifest) only")
    args = ap.parse_args()
    _ensure_runtime_preloaded()
    built: dict = {}
    for name, family, out_dir, build, meta in ENTRIES:
        if args.only and family != args.only:
            continue
        out_dir.mkdir(parents=True, exist_ok=True)
        build().export_to_c(str(out_dir), name)
        print(f"exported {out_dir.name}/{name}.h/.o", flush=True)
        built.setdefault((family, out_dir), []).append((name, meta))
    for (family, out_dir), items in built.items():
        if family == "sm90":
            finish_sm90(out_dir, items, not args.no_link)


if __name__ == "__main__":
    main()
