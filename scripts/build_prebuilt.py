"""Ahead-of-time build of the CuTe DSL kernels into wan_fp4/kernels/prebuilt/<arch>/ (no GPU needed).

    python scripts/build_prebuilt.py                 # every arch: sm90a and sm100a
    python scripts/build_prebuilt.py --only sm100    # one arch family (sm90, sm100)
    python scripts/build_prebuilt.py --no-link       # .h/.o + manifest only (what git tracks)
    python scripts/build_prebuilt.py --only sm90 --out DIR --sm90-config '{"pingpong": true}' ...
                                                     # experiments: D128 (--sm90-head-dims) kernels of other
                                                     # configs (plus the defaults) into DIR, for
                                                     # wan-fp4 check/bench attention --prebuilt-dir DIR

Each entry compiles one kernel for its arch and exports it with `export_to_c` (a header plus an
object holding the host launch code and the cubin; wan_fp4.kernels.aot.export loads the DSL
runtime so this works without a GPU). Then, per arch, the script writes manifest.json (the hash of
that arch's kernel sources: the loader ignores artifacts built from other sources, and CI fails
until they are rebuilt) and links lib<name>.so through the generated C shim, which is what
`sm90_attention` / `sm100_attention` load by ctypes (JIT otherwise). The .h/.o/manifest are
committed; the .so files are git-ignored and built here, by wheel builds, or at first use.

ENTRIES is the data: (name, arch family, build() -> compiled kernel, manifest meta). The
family names the loader (`wan_fp4.kernels.<family>.aot.PREBUILT`), which knows the output folder,
the source hash and the manifest format.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _sm90_entry(mode, head_dim, config=None):
    from wan_fp4.kernels.sm90 import default_config
    from wan_fp4.kernels.sm90.aot import kernel_name

    cfg = default_config(mode, head_dim, config)

    def build():
        from wan_fp4.kernels.sm90.compile import compile_kernel

        return compile_kernel(mode, head_dim, **cfg)

    return kernel_name(mode, head_dim, cfg), "sm90", build, {"mode": mode, "head_dim": head_dim, "config": cfg}


def _sm100_entry():
    from wan_fp4.kernels.sm100.aot import NAME

    def build():
        from wan_fp4.kernels.sm100.compile import compile_kernel

        return compile_kernel()

    return NAME, "sm100", build, {"mode": "direct-p-fp4", "head_dim": 128, "config": {"kv_stages": 3}}


def _sm90_default_entries():
    """Every kernel a launch with no config of its own may run at each (mode, D): the default, the
    one its launches run where the tail split's plan splits nothing, and short launches'
    (sm90.default_kernels)."""
    from wan_fp4.kernels.sm90 import default_kernels

    return [_sm90_entry(mode, d, cfg) for mode, d in (("direct-p", 128), ("fp8", 128), ("direct-p", 64), ("fp8", 64))
            for cfg in default_kernels(mode, d)]


ENTRIES = [
    # (name, arch family, build() -> compiled kernel, manifest meta)
    *_sm90_default_entries(),
    _sm100_entry(),
]


def sm90_variant_entries(configs, head_dims=(128,)):
    """Entries of the sm90 kernels a launch of each config may run (sm90.launch_configs) at each
    head dim, in every mode it applies to, but for one among ENTRIES already (a default's)."""
    from wan_fp4.kernels.sm90 import SUPPORTED_MODES, applies, launch_configs
    from wan_fp4.kernels.sm90.aot import kernel_name

    defaults = {e[0] for e in ENTRIES}
    return [_sm90_entry(mode, d, kern) for cfg in configs for d in head_dims for mode in SUPPORTED_MODES
            if applies(mode, cfg) for kern in launch_configs(mode, d, cfg) if kernel_name(mode, d, kern) not in defaults]


def prebuilt_of(family: str):
    return importlib.import_module(f"wan_fp4.kernels.{family}.aot").PREBUILT


def main():
    from wan_fp4.kernels.aot import export, link_shim

    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None, choices=sorted({e[1] for e in ENTRIES}), help="arch family to build")
    ap.add_argument("--no-link", action="store_true", help="export .h/.o (and the manifest) only")
    ap.add_argument("--sm90-config", action="append", default=[], type=json.loads,
                    help="JSON options of extra sm90 kernels, each mode they apply to (repeatable)")
    ap.add_argument("--sm90-head-dims", type=int, nargs="+", default=[128], choices=[64, 128],
                    help="head dims of the --sm90-config kernels (default: 128)")
    ap.add_argument("--out", type=Path, default=None, help="write into DIR instead of the package's prebuilt/")
    args = ap.parse_args()
    entries = ENTRIES + sm90_variant_entries(args.sm90_config, args.sm90_head_dims)
    built: dict = {}
    for name, family, build, meta in entries:
        if args.only and family != args.only:
            continue
        pb = prebuilt_of(family)
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            pb = dataclasses.replace(pb, directory=args.out)
        export(build(), pb.directory, name)
        print(f"exported {pb.arch}/{name}.h/.o", flush=True)
        built.setdefault(family, {})[name] = meta
    for family, kernels in built.items():
        pb = prebuilt_of(family)
        if args.out is not None:
            pb = dataclasses.replace(pb, directory=args.out)
        path = pb.write_manifest(kernels)
        print(f"wrote {pb.arch}/{path.name} (source hash {pb.source_hash()})", flush=True)
        if not args.no_link:
            for name in kernels:
                link_shim(name, pb.directory, pb.directory / f"lib{name}.so")
                print(f"linked {pb.arch}/lib{name}.so", flush=True)


if __name__ == "__main__":
    main()
