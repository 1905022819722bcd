"""wan-fp4: Direct-P low-precision attention for Wan2.1 in diffusers.

Public API (DESIGN §1):
    wan_fp4.MODES                         the attention modes
    wan_fp4.FP4RangeWarning               direct-p-fp4 scores left the P map's range (use the guard)
    wan_fp4.attention(q, k, v, mode)      fastest correct kernel for the device, (B, S, H, D) layout
    wan_fp4.kernel_for(q, mode)           which kernel attention() would use
    wan_fp4.reference                     the numerics contract (PyTorch, runs on CPU)
    wan_fp4.WanDirectPAttnProcessor       diffusers attention processor for Wan
    wan_fp4.enable(pipe, ...) / wan_fp4.disable(pipe)   policies: bf16 steps/layers, guard layers
    wan_fp4.set_backend_mode / backend_mode             mode of the "direct_p" diffusers backend
"""
from . import reference
from .dispatch import attention, kernel_for
from .modes import MODES, FP4Params, FP4RangeWarning

# The diffusers integration. The kernels and the reference do not need diffusers (a bare GPU
# image may lack it): without it only these names are unavailable, and say why when used.
_DIFFUSERS_NAMES = ("WanDirectPAttnProcessor", "enable", "disable", "set_backend_mode", "backend_mode")
try:
    from .backend import backend_mode, set_backend_mode
    from .processor import WanDirectPAttnProcessor, disable, enable
except ModuleNotFoundError as _exc:
    if not (_exc.name or "").split(".")[0] == "diffusers":
        raise
    _missing_diffusers = _exc

    def __getattr__(name):
        if name in _DIFFUSERS_NAMES:
            raise ImportError(f"wan_fp4.{name} needs diffusers 0.42.*, which is not installed "
                              f"(pip install 'diffusers>=0.42,<0.43')") from _missing_diffusers
        raise AttributeError(f"module 'wan_fp4' has no attribute {name!r}")

__all__ = ["MODES", "FP4Params", "FP4RangeWarning", "attention", "kernel_for", "reference", "WanDirectPAttnProcessor",
           "enable", "disable", "set_backend_mode", "backend_mode"]
