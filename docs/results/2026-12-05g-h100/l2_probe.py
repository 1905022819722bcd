"""How much of a short call is its operands missing L2.

"kernel alone" in `profile_sm90_device.py floor` replays the kernel on the same codes, which stay
in L2; in a call the codes were written by the pre-pass, whose own traffic (Q, K, V read, codes
written: about 47 MB at B1 H40 S1024 D128) may have evicted them. From CUDA graphs of 20 calls:
the kernel and the pre-pass after a 256 MB write (L2 flushed; the write timed alone and taken
off), the whole call, and the pre-pass followed by the kernel on that pre-pass's own codes.
argv[1]: a label for the variant of prepare.py in place.
"""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import wan_fp4  # noqa: E402
from profile_sm90_device import _graph_ms, _operands  # noqa: E402
from wan_fp4.kernels import prepare, sm90  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402


def main(label):
    b, h, d, mode = 1, 40, 128, "direct-p"
    layout = v_layout_args(mode)
    junk = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for s in (1024, 2048, 4096):
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        ops, out, lse = _operands(q, k, v, mode)

        def kernel():
            sm90.launch(ops, mode, d, out=out, lse=lse, prebuilt=True)

        def chain():
            o = prepare.prepare_fp8(q, k, v, **layout)
            sm90.launch(o, mode, d, prebuilt=True)

        def flush():
            junk.fill_(1)

        t = {}
        rows = (("kernel alone (codes in L2)", kernel), ("flush", flush),
                ("flush + kernel", lambda: (flush(), kernel())),
                ("pre-pass alone", lambda: prepare.prepare_fp8(q, k, v, **layout)),
                ("flush + pre-pass", lambda: (flush(), prepare.prepare_fp8(q, k, v, **layout))),
                ("pre-pass + kernel on its codes", chain),
                ("whole call", lambda: wan_fp4.attention(q, k, v, mode, kernel="sm90-cute")))
        for name, fn in rows:
            t[name] = _graph_ms(fn, 20) * 1e3
            print(f"[{label}] S{s} {name:34s} {t[name]:8.2f} us", flush=True)
        print(f"[{label}] S{s} kernel after a flush {t['flush + kernel'] - t['flush']:.2f} us, pre-pass after a flush "
              f"{t['flush + pre-pass'] - t['flush']:.2f} us; the chain beyond its parts "
              f"{t['pre-pass + kernel on its codes'] - t['pre-pass alone'] - t['kernel alone (codes in L2)']:.2f} us",
              flush=True)
        del q, k, v, ops, out, lse
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "package")
