"""Shared fixtures: tiny models built in code (no downloads)."""
import os

import torch

# Without a GPU, Triton kernels run in Triton's CPU interpreter. The switch is read when triton is
# first imported, so it is set here, before any test module imports a kernel.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


@pytest.fixture
def shim_toolchain():
    """Skip unless a prebuilt kernel's C shim can be linked here, by the package's own checks
    (wan_fp4.kernels.aot: a C compiler, the CUDA headers); the skip says which is missing."""
    from wan_fp4.kernels import aot

    try:
        aot.c_compiler()
        aot.cuda_home()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def tiny_wan():
    """Factory for a tiny random WanTransformer3DModel (float32, eval). i2v=True adds the image
    branch (added_kv_proj_dim) like Wan2.1-I2V. Keyword overrides go to the config."""
    from diffusers import WanTransformer3DModel

    def make(i2v=False, seed=0, **overrides):
        config = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=32, in_channels=16,
                      out_channels=16, text_dim=32, freq_dim=32, ffn_dim=64, num_layers=2, rope_max_seq_len=32)
        if i2v:
            config.update(in_channels=36, image_dim=8, added_kv_proj_dim=64)
        config.update(overrides)
        torch.manual_seed(seed)
        return WanTransformer3DModel(**config).eval()

    return make
