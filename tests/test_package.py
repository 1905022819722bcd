"""The public package: the kernels and the reference import without diffusers."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

WITHOUT_DIFFUSERS = r'''
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "diffusers":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
import torch, wan_fp4
q = torch.randn(1, 40, 2, 64)
out = wan_fp4.attention(q, q, q, mode="direct-p")
assert out.shape == q.shape and torch.isfinite(out).all()
try:
    wan_fp4.enable
except ImportError as exc:
    assert "diffusers" in str(exc)
    print("ok")
'''


def test_kernels_and_reference_import_without_diffusers():
    done = subprocess.run([sys.executable, "-c", WITHOUT_DIFFUSERS], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")


def test_public_names():
    import wan_fp4

    for name in ("MODES", "FP4Params", "attention", "kernel_for", "reference", "WanDirectPAttnProcessor",
                 "enable", "disable", "set_backend_mode", "backend_mode"):
        assert hasattr(wan_fp4, name), name


def test_shared_constants_are_defined_once():
    """Every constant of wan_fp4.modes is defined there only: no module binds the same name
    (or its _private twin) to its own value at module level (wrapping the imported constant,
    e.g. as a Triton compile-time constant, is not a copy)."""
    import ast

    from wan_fp4 import modes

    shared = {n for n in vars(modes) if n.isupper()}
    pkg = ROOT / "wan_fp4"
    found = set()
    for path in pkg.rglob("*.py"):
        rel = path.relative_to(pkg).as_posix()
        if rel == "modes.py":
            continue
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            for t in targets:
                name = t.id.lstrip("_") if isinstance(t, ast.Name) else None
                wraps = node.value is not None and any(
                    isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value))
                if name in shared and not wraps:
                    found.add((rel, t.id))
    assert found == set(), "define these in wan_fp4/modes.py and import them"


@pytest.mark.parametrize("family", ["sm90", "sm100"])
def test_prebuilt_key_covers_the_modes_constants_its_kernel_imports(family):
    """A constant a hashed kernel source imports from wan_fp4.modes is baked into the prebuilt
    cubin, so its value must be part of the artifact's key (Prebuilt.extra_key): otherwise a
    change in modes.py would leave stale prebuilt kernels in use."""
    import ast
    import importlib

    aot = importlib.import_module(f"wan_fp4.kernels.{family}.aot")
    imported = set()
    for name in aot.SOURCES:
        for node in ast.walk(ast.parse((aot.PKG / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 0 and (node.module or "").endswith("modes"):
                imported |= {a.name for a in node.names}
    key = aot.PREBUILT.extra_key() if aot.PREBUILT.extra_key else ""
    keyed = {part.split("=")[0] for part in key.split(";") if part}
    assert imported <= keyed, f"add {sorted(imported - keyed)} to {family}/aot.py's modes_key"


def test_comments_cite_only_files_in_the_repo():
    """No source or doc cites design notes that are not part of the repository; the manifest-hashed
    kernel sources keep theirs until the next rebuild."""
    from wan_fp4.kernels.sm90 import aot as sm90_aot
    from wan_fp4.kernels.sm100 import aot as sm100_aot

    pending = {p.relative_to(ROOT).as_posix() for a in (sm90_aot, sm100_aot) for p in (a.PKG / s for s in a.SOURCES)}
    here = Path(__file__).resolve()
    files = [*ROOT.glob("wan_fp4/**/*.py"), *ROOT.glob("scripts/*"), *ROOT.glob("tests/*.py"),
             *ROOT.glob("docs/*.md"), *ROOT.glob("*.md")]
    pattern = re.compile(r"DESIGN(\.md)? §|paper-notes|research/|-notes(\.md)? §")
    cited = sorted(f"{p.relative_to(ROOT)}:{i}" for p in files
                   if p.is_file() and p != here and p.relative_to(ROOT).as_posix() not in pending
                   for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line))
    assert cited == [], "cite docs/ARCHITECTURE.md or docs/NUMERICS.md, or state the fact"


def test_package_data_ships_the_embedded_models_files(tmp_path, monkeypatch):
    """setuptools' own build_py, on this pyproject.toml, picks up every file that the export of the
    embedded model writes (save_pretrained's layout plus its defaults), wherever it is saved."""
    import os
    import shutil

    from setuptools import Distribution
    from setuptools.config.pyprojecttoml import apply_configuration

    from wan_fp4.pipelines import build_tiny_pipeline, trained, training

    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    for package in ("wan_fp4", "wan_fp4/kernels", "wan_fp4/pipelines"):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").touch()
    weights = trained.WEIGHTS_DIR.relative_to(ROOT / "wan_fp4" / "pipelines")
    export = training.save_pipeline(build_tiny_pipeline(), tmp_path / "wan_fp4" / "pipelines" / weights)
    written = {p.relative_to(export).as_posix() for p in export.rglob("*") if p.is_file()}
    assert {"model_index.json", "wan_fp4_defaults.json", "transformer/config.json",
            "scheduler/scheduler_config.json"} <= written
    assert any(name.endswith(".safetensors") for name in written)

    monkeypatch.chdir(tmp_path)
    dist = apply_configuration(Distribution({"script_name": "setup.py"}), "pyproject.toml")
    build_py = dist.get_command_obj("build_py")
    build_py.ensure_finalized()
    shipped = {Path(os.path.join(src, name)).resolve() for _, src, _, names in build_py.data_files for name in names}
    missing = sorted(name for name in written if (export / name).resolve() not in shipped)
    assert missing == [], "add globs for these to [tool.setuptools.package-data] in pyproject.toml"


def test_no_module_rebinds_a_name_it_imports():
    """A top-level def or class named like a module-level import replaces it for every function of
    the module: an AttributeError on the GPU, after the device time was spent."""
    import ast

    clashes = []
    for path in [*ROOT.glob("wan_fp4/**/*.py"), *ROOT.glob("scripts/*.py")]:
        tree = ast.parse(path.read_text())
        imported, defined = {}, {}
        for node in tree.body:
            stmts = [node] + (node.body + [s for h in node.handlers for s in h.body] if isinstance(node, ast.Try) else [])
            for s in stmts:
                if isinstance(s, (ast.Import, ast.ImportFrom)):
                    for alias in s.names:
                        imported[(alias.asname or alias.name).split(".")[0]] = s.lineno
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined[node.name] = node.lineno
        clashes += [f"{path.relative_to(ROOT)}:{defined[n]} {n} (imported at line {imported[n]})"
                    for n in imported.keys() & defined.keys()]
    assert clashes == []
