"""Programmatic dependent launch (PDL) across the pre-pass's launches and the sm90 kernel: each
variant's output bitwise against the variant with PDL off, over 30 back-to-back eager calls and
one graph replay; then its time from a CUDA graph of 10 calls and eager (do_bench medians). The
first variant is timed again last."""
import torch, triton.testing as tt
from wan_fp4.kernels import prepare as P
from wan_fp4.kernels.sm90 import host
from wan_fp4.eval.bench_attention import graphed, use_prebuilt_dir

use_prebuilt_dir(".device/sm90")
shapes = [("direct-p", 1, 40, 1024), ("direct-p", 1, 40, 4096), ("direct-p", 1, 40, 7680),
          ("direct-p", 1, 40, 16384), ("direct-p", 1, 12, 32760), ("fp8", 1, 40, 4096), ("fp8", 1, 12, 32760)]
# (label, pre-pass PDL, kernel PDL, the check's copy on a side stream)
variants = [("off", False, False, False), ("pre-pass", True, False, False), ("pre-pass+kernel", True, True, False),
            ("pre-pass+kernel, check copy on a side stream", True, True, True), ("off", False, False, False)]
for mode, b, h, s in shapes:
    d = 128
    g = torch.Generator(device="cuda").manual_seed(s)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    P.PDL, P.CHECK_COPY_SIDE_STREAM = False, False
    ref = host.run(q, k, v, mode, config={"pdl": False}, prebuilt=True)[0].clone()
    base = None
    for label, pre, kern, side in variants:
        P.PDL, P.CHECK_COPY_SIDE_STREAM = pre, side
        cfg = {"pdl": kern}
        fn = lambda: host.run(q, k, v, mode, config=cfg, prebuilt=True)[0]
        outs = [fn() for _ in range(30)]
        bad = sum(not torch.equal(o, ref) for o in outs)
        del outs
        # one graph whose output is kept, compared after a replay
        holder = []
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr):
            holder.append(fn())
        gr.replay(); torch.cuda.synchronize()
        bad_graph = not torch.equal(holder[0], ref)
        del holder, gr
        ms_g = tt.do_bench(graphed(fn, 10), warmup=5, rep=300, return_mode="median") / 10
        ms_e = tt.do_bench(fn, warmup=5, rep=300, return_mode="median")
        base = base or (ms_g, ms_e)
        print(f"{mode} B{b} H{h} S{s} PDL {label}: graph {ms_g:.4f} ms ({base[0] / ms_g:.3f}x off), eager {ms_e:.4f} ms "
              f"({base[1] / ms_e:.3f}x off); bitwise equal: {30 - bad}/30 eager, graph {'yes' if not bad_graph else 'NO'}",
              flush=True)
    del q, k, v, ref
    torch.cuda.empty_cache()
