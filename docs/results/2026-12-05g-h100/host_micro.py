"""Host cost of the single operations an eager call makes (microseconds each, 5,000 repetitions,
after warm-up), on the device's host: where a short call's host time can come from."""
import ctypes
import os
import sys
import time

import torch

sys.path.insert(0, os.getcwd())
from wan_fp4.kernels import prepare, sm90  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402


def us(fn, n=5000):
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    el = time.perf_counter() - t
    torch.cuda.synchronize()
    return 1e6 * el / n




@torch.library.custom_op("probe::fresh", mutates_args=())
def _fresh(x: torch.Tensor, mode: str, s: float) -> torch.Tensor:
    return torch.empty_like(x)


@_fresh.register_fake
def _(x, mode, s):
    return torch.empty_like(x)


def _no_bwd(ctx, *g):
    raise NotImplementedError


_fresh.register_autograd(_no_bwd)


@torch.library.custom_op("probe::fresh_plain", mutates_args=())
def _fresh_plain(x: torch.Tensor, mode: str, s: float) -> torch.Tensor:
    return torch.empty_like(x)


def main():
    dev = torch.device("cuda", 0)
    q, k, v = (torch.randn(1, 128, 1, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ops = prepare.prepare_fp8(q, k, v, **v_layout_args("direct-p"))
    stats = ops.range_stats
    host = torch.empty(5, dtype=torch.float32, pin_memory=True)
    ev = torch.cuda.Event()
    buf = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    rows = {
        "torch.cuda.get_device_capability(dev)": lambda: torch.cuda.get_device_capability(dev),
        "torch.cuda.current_stream(dev).cuda_stream": lambda: torch.cuda.current_stream(dev).cuda_stream,
        "torch.cuda.is_current_stream_capturing()": lambda: torch.cuda.is_current_stream_capturing(),
        "torch.empty(16, device=cuda)": lambda: torch.empty(16, device="cuda"),
        "torch.empty 4-d fp8": lambda: torch.empty(1, 1, 128, 128, dtype=torch.float8_e4m3fn, device="cuda"),
        "buf[a:b].view(dtype).view(shape)": lambda: buf[512:512 + 4096].view(torch.float32).view(1, 1, 1024),
        "t.data_ptr() + is_contiguous()": lambda: (q.data_ptr(), q.is_contiguous()),
        "torch.empty(5, pin_memory=True)": lambda: torch.empty(5, dtype=torch.float32, pin_memory=True),
        "host.copy_(stats, non_blocking=True)": lambda: host.copy_(stats, non_blocking=True),
        "Event() + record()": lambda: torch.cuda.Event().record(),
        "event.synchronize() (done)": lambda: ev.synchronize(),
        "host.tolist()": lambda: host.tolist(),
        "sm90.default_config": lambda: sm90.default_config("direct-p", 128),
        "torch.ops.probe.fresh (custom op, autograd registered)": lambda: torch.ops.probe.fresh(q, "direct-p", 1.0),
        "torch.ops.probe.fresh_plain (custom op)": lambda: torch.ops.probe.fresh_plain(q, "direct-p", 1.0),
        "torch.empty_like(q) (the op's body alone)": lambda: torch.empty_like(q),
    }
    ev.record()
    for name, fn in rows.items():
        print(f"{name:58s} {us(fn):7.2f} us", flush=True)


if __name__ == "__main__":
    main()
