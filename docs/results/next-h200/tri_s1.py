"""prepare_fp8's Triton launch at one token (2026-12-05 H200 run: its q8 and k8 padding rows past
the first 16 (D128) / 32 (D64) hold nonzero codes where the CPU interpreter writes zeros): its
outputs pre-filled with 0x7F (so an unwritten byte shows), which rows are wrong, whether the
wrong bytes repeat from call to call, and the PTX this Triton compiled for each length, to read on
the CPU."""
import os
import sys

import torch
import triton

from wan_fp4.kernels import prepare
from wan_fp4.kernels.sm90.layout import v_layout_args

out = sys.argv[1]
dev = torch.device("cuda")
print("triton", triton.__version__, "torch", torch.__version__)
empty = torch.empty


def poisoned_empty(*a, **kw):
    t = empty(*a, **kw)
    if t.dtype == torch.float8_e4m3fn:
        t.view(torch.uint8).fill_(0x7F)
    return t


def run(tag):
    for mode in ("fp8", "direct-p"):
        for s, d in ((1, 128), (1, 64), (2, 128), (3, 64), (17, 128)):
            g = torch.Generator(device=dev).manual_seed(5)
            q, k, v = (torch.randn(1, s, 3, d, generator=g, device=dev).bfloat16() for _ in range(3))
            torch.empty = poisoned_empty
            try:
                a = prepare.prepare_fp8(q, k, v, **v_layout_args(mode))
                b = prepare.prepare_fp8(q, k, v, **v_layout_args(mode))
            finally:
                torch.empty = empty
            torch.cuda.synchronize()
            line = []
            for f in ("q8", "k8"):
                x = getattr(a, f).view(torch.uint8)
                bad_rows = sorted(set((x[:, :, s:, :] != 0).nonzero()[:, 2].add(s).tolist()))
                unwritten = int((x == 0x7F).sum())
                same = torch.equal(x, getattr(b, f).view(torch.uint8))
                line.append(f"{f}: nonzero padding rows {bad_rows[:4]}..{bad_rows[-1:]} ({len(bad_rows)}), "
                            f"0x7F bytes {unwritten}, second call identical {same}")
                if bad_rows:
                    r = bad_rows[0]
                    line.append(f"  row {r} head 0: {x[0, 0, r, :16].tolist()}")
            print(tag, mode, f"S{s} D{d}:", "; ".join(line))


run("as built")
os.makedirs(out, exist_ok=True)
caches = getattr(prepare._quant_kernel, "device_caches", {})
n = 0
for key, entry in caches.items():
    for spec, kern in entry[0].items():
        n += 1
        with open(f"{out}/quant_{n}.ptx", "w") as f:
            f.write(f"// {spec}\n" + kern.asm.get("ptx", ""))
        with open(f"{out}/quant_{n}.ttgir", "w") as f:
            f.write(kern.asm.get("ttgir", ""))
print("kernels dumped:", n)

# the same kernel without Triton's specialisation of integer arguments equal to 1
built = prepare._quant_kernel
prepare._quant_kernel = triton.jit(do_not_specialize=["Sq", "Skv", "nq", "nk", "n_chunks"])(built.fn)
run("no int-1 specialisation")
