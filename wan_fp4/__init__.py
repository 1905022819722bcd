"""wan-fp4: Direct-P low-precision attention for Wan2.1 in diffusers.

Public API (DESIGN §1):
    wan_fp4.MODES                         the attention modes
    wan_fp4.attention(q, k, v, mode)      fastest correct kernel for the device, (B, S, H, D) layout
    wan_fp4.kernel_for(q, mode)           which kernel attention() would use
    wan_fp4.reference                     the numerics contract (PyTorch, runs on CPU)
    wan_fp4.WanDirectPAttnProcessor       diffusers attention processor for Wan
    wan_fp4.enable(pipe, ...) / wan_fp4.disable(pipe)   policies: bf16 steps/layers, guard layers
    wan_fp4.set_backend_mode / backend_mode             mode of the "direct_p" diffusers backend
"""
from . import reference
from .backend import backend_mode, set_backend_mode
from .dispatch import attention, kernel_for
from .modes import MODES, FP4Params
from .processor import WanDirectPAttnProcessor, disable, enable

__all__ = ["MODES", "FP4Params", "attention", "kernel_for", "reference", "WanDirectPAttnProcessor",
           "enable", "disable", "set_backend_mode", "backend_mode"]
