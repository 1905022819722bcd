"""The README's CPU quick start runs as written (the embedded trained model, no checkpoint)."""
import re
from pathlib import Path

import pytest
import torch

from wan_fp4.pipelines import trained

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


@pytest.mark.skipif(not (trained.WEIGHTS_DIR / "model_index.json").is_file(),
                    reason=f"the quick start loads the trained weights, not in {trained.WEIGHTS_DIR} "
                           "(they are added to the repository separately)")
def test_cpu_quick_start_runs_as_written():
    use_it = README.split("## Use it", 1)[1]
    code = re.search(r"```python\n(.*?)```", use_it, re.S).group(1)
    assert "load_pipeline(" in code  # the CPU example comes first
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    d = scope["d"]
    assert scope["video"].shape == (d["frames"], d["height"], d["width"], 3)
    assert scope["pipe"].vae.dtype == torch.float32  # as the README's VAE note says


def test_cpu_torch_install_command_is_given():
    assert "python3 -m pip install torch --index-url https://download.pytorch.org/whl/cpu" in README
