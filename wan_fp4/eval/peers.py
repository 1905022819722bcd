"""Peer attention kernels we measure against, behind one (B, S, H, D) -> (B, S, H, D) interface.

Each peer is optional: `available_peers()` lists those whose packages import here (and, given a
device, whose GPU requirements it meets), and callers say which were missing instead of failing.
Quantising peers are timed with their quantisation included, as ours are.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from ..modes import E4M3_MAX

PeerFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _heads_first(*ts):
    return tuple(t.transpose(1, 2) for t in ts)


def sdpa(backend_name: str) -> PeerFn:
    """torch SDPA pinned to one backend ('CUDNN_ATTENTION', 'FLASH_ATTENTION', ...)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)

    def run(q, k, v):
        with sdpa_kernel(backend):
            out = torch.nn.functional.scaled_dot_product_attention(*_heads_first(q, k, v))
        return out.transpose(1, 2)

    return run


def fa4() -> PeerFn:
    from flash_attn.cute import flash_attn_func

    def run(q, k, v):
        out = flash_attn_func(q, k, v)
        return out[0] if isinstance(out, tuple) else out

    return run


def sage1() -> PeerFn:
    from sageattention import sageattn

    def run(q, k, v):
        return sageattn(q, k, v, tensor_layout="NHD", is_causal=False)

    return run


def sage2_sm90() -> PeerFn:
    """SageAttention 2's Hopper kernel (INT8 Q K, FP8 P V, FP32 PV accumulation): the package's
    CUDA extensions must be built for sm90 (no wheel exists; the benchmark builds it from source)."""
    from sageattention import sageattn_qk_int8_pv_fp8_cuda_sm90

    def run(q, k, v):
        return sageattn_qk_int8_pv_fp8_cuda_sm90(q, k, v, tensor_layout="NHD", is_causal=False,
                                                 pv_accum_dtype="fp32+fp32")

    return run


def check_cudnn_fp8_shapes(q, k, v) -> None:
    """Raise ValueError unless q (B, Sq, H, D), k and v (B, Skv, H, D) fit cuDNN's FP8 SDPA: the
    head dim a multiple of 16 (so 64 and 128 are fine). Sequence lengths are free, Sq may differ
    from Skv, and neither needs to be a multiple of a tile (cudnn-frontend's support notes)."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"cudnn-fp8 takes (B, S, H, D) tensors, got q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    if k.shape != v.shape or (q.shape[0], q.shape[2], q.shape[3]) != (k.shape[0], k.shape[2], k.shape[3]):
        raise ValueError(f"cudnn-fp8: q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} must share "
                         "batch, heads and head dim, and k and v their length")
    if q.shape[3] % 16:
        raise ValueError(f"cudnn-fp8: cuDNN's FP8 SDPA needs a head dim that is a multiple of 16, got {q.shape[3]}")


class CudnnFP8:
    """cuDNN's FP8 SDPA (cudnn-frontend graph API): per-tensor scales, E4M3 in and out on Hopper.

    One graph per (q shape, kv shape), built on first use; each call quantises q, k, v (amax ->
    scale), runs the graph and dequantises O to the input dtype, so the timing is what a user of it
    would pay. Shapes: `check_cudnn_fp8_shapes`; a shape the installed cuDNN still refuses raises
    RuntimeError naming it. kernel_only: quantise each input once (cached by storage) and return
    the FP8 output as is, so the timing is cuDNN's attention kernel alone.
    """

    def __init__(self, kernel_only: bool = False):
        try:
            import cudnn  # noqa: F401  (fail at construction when the package is missing)
        except ImportError as exc:
            raise ImportError(f"cudnn-fp8 needs cudnn-frontend (pip install nvidia-cudnn-frontend): {exc}") from exc
        self._graphs = {}
        self.kernel_only = kernel_only
        self._quantised = {}

    def _graph(self, q_shape, kv_shape, device):
        import cudnn

        key = (q_shape, kv_shape)
        if key in self._graphs:
            return self._graphs[key]
        (b, sq, h, d), skv = q_shape, kv_shape[1]
        handle = cudnn.create_handle()
        e4m3, f32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT

        def bhsd(s):  # (B, H, S, D) view of a contiguous (B, S, H, D) tensor
            return (b, h, s, d), (s * h * d, d, h * d, 1)

        graph = cudnn.pygraph(io_data_type=e4m3, intermediate_data_type=f32, compute_data_type=f32,
                              handle=handle)
        q = graph.tensor(name="q", dim=bhsd(sq)[0], stride=bhsd(sq)[1], data_type=e4m3)
        k, v = (graph.tensor(name=n, dim=bhsd(skv)[0], stride=bhsd(skv)[1], data_type=e4m3) for n in "kv")
        scalars = [graph.tensor(name=n, dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=f32)
                   for n in ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")]
        o, _, amax_s, amax_o = graph.sdpa_fp8(q=q, k=k, v=v, descale_q=scalars[0], descale_k=scalars[1],
                                              descale_v=scalars[2], descale_s=scalars[3], scale_s=scalars[4],
                                              scale_o=scalars[5], attn_scale=1.0 / math.sqrt(d),
                                              use_causal_mask=False, generate_stats=False)
        o.set_output(True).set_dim(bhsd(sq)[0]).set_stride(bhsd(sq)[1]).set_data_type(e4m3)
        for amax in (amax_s, amax_o):
            amax.set_output(True).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1)).set_data_type(f32)
        try:
            graph.validate()
            graph.build_operation_graph()
            graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            graph.check_support()
            graph.build_plans()
        except Exception as exc:  # cudnn's own error types; the caller needs the shape that failed
            version = getattr(cudnn, "backend_version", lambda: "?")()
            raise RuntimeError(f"cuDNN {version} has no FP8 SDPA plan for q {q_shape}, k/v {kv_shape} "
                               f"(B, S, H, D) on this GPU: {type(exc).__name__}: {exc}") from exc
        workspace = torch.empty(graph.get_workspace_size(), dtype=torch.uint8, device=device)
        amax_buf = torch.empty(2, 1, 1, 1, 1, dtype=torch.float32, device=device)
        entry = (graph, handle, (q, k, v, o, amax_s, amax_o), scalars, workspace, amax_buf)
        self._graphs[key] = entry
        return entry

    def to_output(self, out):
        """The BF16 attention output of a call's return value (kernel_only returns FP8 codes)."""
        return (out.float() / self._scale_o).to(torch.bfloat16) if self.kernel_only else out

    def __call__(self, q, k, v):
        check_cudnn_fp8_shapes(q, k, v)
        graph, handle, (tq, tk, tv, to, tas, tao), scalars, workspace, amax_buf = self._graph(
            tuple(q.shape), tuple(k.shape), q.device)
        fp8_max = E4M3_MAX

        def quant(x):
            key = (x.data_ptr(), tuple(x.shape))
            if self.kernel_only and key in self._quantised:
                return self._quantised[key]
            lo, hi = torch.aminmax(x)  # one pass, no FP32 copy of x
            amax = torch.maximum(-lo, hi).float().clamp(min=1e-12).reshape(1, 1, 1, 1)
            # contiguous: the graph's strides are those of a contiguous (B, S, H, D) tensor
            out = (x * (fp8_max / amax).to(x.dtype)).to(torch.float8_e4m3fn).contiguous(), amax / fp8_max
            if self.kernel_only:
                self._quantised[key] = out
            return out

        q8, dq = quant(q)
        k8, dk = quant(k)
        v8, dv = quant(v)
        scale_o = (fp8_max / (dv * fp8_max))  # |O| <= max|V|
        one = torch.ones_like(dq)
        o8 = torch.empty_like(q8)
        pack = {tq: q8, tk: k8, tv: v8, to: o8, tas: amax_buf[0], tao: amax_buf[1],
                scalars[0]: dq, scalars[1]: dk, scalars[2]: dv,
                scalars[3]: one / fp8_max, scalars[4]: one * fp8_max, scalars[5]: scale_o}
        graph.execute(pack, workspace, handle=handle)
        if self.kernel_only:
            self._scale_o = scale_o
            return o8
        return o8.to(q.dtype) * (1.0 / scale_o).to(q.dtype)


_FACTORIES = {
    "sdpa-cudnn": lambda: sdpa("CUDNN_ATTENTION"),
    "sdpa-flash": lambda: sdpa("FLASH_ATTENTION"),
    "fa4": fa4,
    "cudnn-fp8": CudnnFP8,
    "cudnn-fp8-kernel": lambda: CudnnFP8(kernel_only=True),
    "sage1": sage1,
    "sage2": sage2_sm90,
}

PEER_LABELS = {
    "sdpa-cudnn": "torch SDPA, cuDNN backend, BF16 (diffusers' default)",
    "sdpa-flash": "torch SDPA, flash backend, BF16",
    "fa4": "flash-attn-4 (CuTe DSL), BF16",
    "cudnn-fp8": "cuDNN FP8 SDPA (cudnn-frontend, per-tensor scales, FP8 out)",
    "cudnn-fp8-kernel": "cuDNN FP8 SDPA, kernel only (inputs quantised beforehand)",
    "sage1": "sageattention 1.0.6 (Triton, INT8 QK)",
    "sage2": "SageAttention 2 sageattn_qk_int8_pv_fp8_cuda_sm90 (INT8 QK, FP8 PV; built on the device)",
}


# What a peer needs of the device: a CUDA GPU, of at least this compute capability where known
# (None: the package decides). A peer not listed runs on any device.
DEVICE_NEEDS = {
    "sdpa-cudnn": None, "sdpa-flash": None, "fa4": None, "sage1": None,
    "cudnn-fp8": (9, 0), "cudnn-fp8-kernel": (9, 0),  # cuDNN's FP8 SDPA: Hopper or newer
    "sage2": (9, 0),  # its sm90 kernel
}
# Peers whose call returns something else than the attention output (FP8 codes): timing only.
TIMING_ONLY = ("cudnn-fp8-kernel",)


def device_reason(name: str, device) -> str | None:
    """Why peer `name` cannot run on `device`, or None when the device is not what stops it."""
    if name not in DEVICE_NEEDS:
        return None
    device = torch.device(device)
    if device.type != "cuda":
        return f"needs a CUDA GPU; this run is on {device.type}"
    need = DEVICE_NEEDS[name]
    have = torch.cuda.get_device_capability(device)
    if need is not None and tuple(have) < need:
        return f"needs compute capability sm{need[0]}{need[1]} or newer; this GPU is sm{have[0]}{have[1]}"
    return None


def available_peers(names=None, device=None):
    """{name: fn} for the peers that can run here, and {name: reason} for those that cannot: their
    package does not import, or (given `device`) the device does not meet DEVICE_NEEDS."""
    found, missing = {}, {}
    for name in names or _FACTORIES:
        if name not in _FACTORIES:
            raise ValueError(f"unknown peer {name!r}; known: {', '.join(_FACTORIES)}")
        why = device_reason(name, device) if device is not None else None
        if why is not None:
            missing[name] = why
            continue
        try:
            found[name] = _FACTORIES[name]()
        except Exception as exc:  # a peer package may be absent on this machine
            missing[name] = f"{type(exc).__name__}: {exc}"
    return found, missing
