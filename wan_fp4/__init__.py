"""wan-fp4: Direct-P low-precision attention for Wan2.1 in diffusers.

Public API (the layers behind it: docs/ARCHITECTURE.md):
    wan_fp4.MODES                         the attention modes
    wan_fp4.FP4RangeWarning               direct-p-fp4 scores left the P map's range (use the guard)
    wan_fp4.attention(q, k, v, mode)      fastest correct kernel for the device, (B, S, H, D) layout
    wan_fp4.kernel_for(q, mode)           which kernel attention() would use
    wan_fp4.reference                     the numerics contract (PyTorch, runs on CPU)
    wan_fp4.WanDirectPAttnProcessor       diffusers attention processor for Wan
    wan_fp4.enable(pipe, ...) / wan_fp4.disable(pipe)   policies: bf16 steps/layers, guard layers
    wan_fp4.set_backend_mode / backend_mode             mode of the "direct_p" diffusers backend

Each name is imported on first use, so `import wan_fp4` (and `wan-fp4 --help`) loads neither torch
nor diffusers. The "direct_p" diffusers backend is registered when wan_fp4.backend is imported:
by `import wan_fp4.backend`, or by using any of the diffusers names above.
"""
import importlib

# name -> submodule defining it (None: the name is the submodule)
_EXPORTS = {
    "MODES": "modes", "FP4Params": "modes", "FP4RangeWarning": "modes",
    "attention": "dispatch", "kernel_for": "dispatch", "reference": None,
    "WanDirectPAttnProcessor": "processor", "enable": "processor", "disable": "processor",
    "set_backend_mode": "backend", "backend_mode": "backend",
}
# The diffusers integration. The kernels and the reference do not need diffusers (a bare GPU
# image may lack it): without it only these names are unavailable, and say why when used.
_DIFFUSERS_NAMES = ("WanDirectPAttnProcessor", "enable", "disable", "set_backend_mode", "backend_mode")


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'wan_fp4' has no attribute {name!r}")
    module = _EXPORTS[name]
    try:
        value = importlib.import_module(f".{module or name}", __name__)
    except ModuleNotFoundError as exc:
        if name in _DIFFUSERS_NAMES and (exc.name or "").split(".")[0] == "diffusers":
            raise ImportError(f"wan_fp4.{name} needs diffusers 0.42.*, which is not installed "
                              f"(pip install 'diffusers>=0.42,<0.43')") from exc
        raise
    if module is not None:
        value = getattr(value, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = list(_EXPORTS)
