"""Does a call pay for the SMs' shared-memory/L1 split changing between its launches?

The attention kernel at D128 runs with a 132 KiB shared-memory configuration, the column
statistics' launch with 32 KiB (ncu, 2026-12-05 sixth run): the SMs reconfigure twice per call.
From CUDA graphs of 20 calls at B1 H40 D128 (direct-p): a launch X then the kernel, against the
kernel alone, where X is an empty kernel, a cast of K and V, or the pre-pass, each with the
driver's default split and with a preferred carveout (percent of the most shared memory) asked
through cuFuncSetAttribute; then the whole call with the statistics launch asking 57% (132 KiB).
"""
import ctypes
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import wan_fp4  # noqa: E402
from profile_sm90_device import _graph_ms, _operands  # noqa: E402
from wan_fp4.kernels import prepare, sm90  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

_cuda = ctypes.CDLL("libcuda.so.1")
CARVEOUT = 9  # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT


def carve(function, pct):
    r = _cuda.cuFuncSetAttribute(ctypes.c_void_p(function), ctypes.c_int(CARVEOUT), ctypes.c_int(pct))
    assert r == 0, f"cuFuncSetAttribute -> {r}"


def compiled(jitfn):
    return list(jitfn.device_caches[torch.cuda.current_device()][0].values())


@triton.jit
def _nop(x, TAG: tl.constexpr):
    if tl.program_id(0) == 1000000 + TAG:
        tl.store(x, 0)


@triton.jit
def _cast2(a, b, a8, b8, n, BLOCK: tl.constexpr, TAG: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    if tl.program_id(1) == 0:
        tl.store(a8 + offs, tl.load(a + offs, mask=ok).to(tl.float8e4nv), mask=ok)
    else:
        tl.store(b8 + offs, tl.load(b + offs, mask=ok).to(tl.float8e4nv), mask=ok)


def main():
    b, h, d, mode = 1, 40, 128, "direct-p"
    layout = v_layout_args(mode)
    buf = torch.zeros(4, device="cuda")
    pcts = {0: None, 1: 57, 2: 58, 3: 100}
    nops, casts = {}, {}
    for s in (1024, 4096):
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        ops, out, lse = _operands(q, k, v, mode)
        k8, v8 = torch.empty_like(k, dtype=torch.float8_e4m3fn), torch.empty_like(v, dtype=torch.float8_e4m3fn)
        n = k.numel()

        def kernel():
            sm90.launch(ops, mode, d, out=out, lse=lse, prebuilt=True)

        for tag, pct in pcts.items():
            ck = _nop[(1,)](buf, TAG=tag)
            c2 = _cast2[(triton.cdiv(n, 4096), 2)](k, v, k8, v8, n, BLOCK=4096, TAG=tag, num_warps=8)
            if pct is not None:
                carve(ck.function, pct)
                carve(c2.function, pct)
            nops[tag] = lambda tag=tag: _nop[(1,)](buf, TAG=tag)
            casts[tag] = lambda tag=tag: _cast2[(triton.cdiv(n, 4096), 2)](k, v, k8, v8, n, BLOCK=4096, TAG=tag,
                                                                            num_warps=8)
        torch.cuda.synchronize()
        rows = [("kernel alone", kernel)]
        for tag, pct in pcts.items():
            name = "default" if pct is None else f"carveout {pct}%"
            rows += [(f"empty launch ({name})", nops[tag]),
                     (f"empty launch ({name}) + kernel", lambda f=nops[tag]: (f(), kernel())),
                     (f"cast K,V ({name})", casts[tag]),
                     (f"cast K,V ({name}) + kernel", lambda f=casts[tag]: (f(), kernel()))]
        rows += [("pre-pass (default)", lambda: prepare.prepare_fp8(q, k, v, **layout)),
                 ("pre-pass (default) + kernel", lambda: (prepare.prepare_fp8(q, k, v, **layout), kernel())),
                 ("whole call (default)", lambda: wan_fp4.attention(q, k, v, mode, kernel="sm90-cute"))]
        for name, fn in rows:
            print(f"S{s} {name:40s} {_graph_ms(fn, 20) * 1e3:7.2f} us", flush=True)
        for pct in (57, 100):
            for jf in (prepare._column_stats_kernel, prepare._quant_kernel):
                for c in compiled(jf):
                    carve(c.function, pct)
            for name, fn in (("pre-pass", lambda: prepare.prepare_fp8(q, k, v, **layout)),
                             ("pre-pass + kernel", lambda: (prepare.prepare_fp8(q, k, v, **layout), kernel())),
                             ("whole call", lambda: wan_fp4.attention(q, k, v, mode, kernel="sm90-cute"))):
                print(f"S{s} {name} (pre-pass launches {pct}%)".ljust(46) + f" {_graph_ms(fn, 20) * 1e3:7.2f} us",
                      flush=True)
        for jf in (prepare._column_stats_kernel, prepare._quant_kernel):  # back to the driver's choice
            for c in compiled(jf):
                carve(c.function, -1)
        print(f"S{s} whole call (default again)".ljust(46) +
              f" {_graph_ms(lambda: wan_fp4.attention(q, k, v, mode, kernel='sm90-cute'), 20) * 1e3:7.2f} us", flush=True)
        del q, k, v, ops, out, lse, k8, v8
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
