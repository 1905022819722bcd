"""The public package: the kernels and the reference import without diffusers."""
import subprocess
import sys
from pathlib import Path

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
