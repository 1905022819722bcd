"""The persistent grid by whole rounds (docs/results/2026-12-02b-h200/persistent_whole_rounds.diff)
against the default, on the pre-pass as it stands: the whole call from a CUDA graph of 10 calls and
eagerly (do_bench medians), each output bitwise against the default's; the cuDNN FP8 kernel alone
(inputs quantised beforehand) timed in the same process, eager as the bench times it and from a graph.
The default is timed again last."""
import torch, triton.testing as tt
from wan_fp4.kernels.sm90 import host
from wan_fp4.eval.bench_attention import graphed, use_prebuilt_dir
from wan_fp4.eval.peers import available_peers

use_prebuilt_dir(".device/sm90p")
peers, missing = available_peers(["cudnn-fp8-kernel"], device=torch.device("cuda"))
print("peers missing:", missing, flush=True)
shapes = [("direct-p", 40, 1024, 128), ("direct-p", 40, 4096, 128), ("direct-p", 40, 7680, 128),
          ("direct-p", 40, 16384, 128), ("direct-p", 12, 32760, 128), ("direct-p", 12, 32760, 64),
          ("fp8", 40, 4096, 128), ("fp8", 12, 32760, 128)]
variants = [("default", {}), ("persistent", {"persistent": True}), ("default", {})]
for mode, h, s, d in shapes:
    g = torch.Generator(device="cuda").manual_seed(s + h)
    q, k, v = (torch.randn(1, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    ref = host.run(q, k, v, mode, prebuilt=True)[0].clone()
    for label, cfg in variants:
        fn = lambda: host.run(q, k, v, mode, config=cfg or None, prebuilt=True)[0]
        bad = sum(not torch.equal(fn(), ref) for _ in range(10))
        ms_g = tt.do_bench(graphed(fn, 10), warmup=5, rep=300, return_mode="median") / 10
        ms_e = tt.do_bench(fn, warmup=5, rep=300, return_mode="median")
        print(f"{mode} H{h} S{s} D{d} {label}: graph {ms_g:.4f} ms, eager {ms_e:.4f} ms; bitwise equal {10 - bad}/10", flush=True)
    if "cudnn-fp8-kernel" in peers:
        pf = lambda: peers["cudnn-fp8-kernel"](q, k, v)
        pf()
        ms_e = tt.do_bench(pf, warmup=300, rep=300, return_mode="median")
        try:
            ms_g = tt.do_bench(graphed(pf, 10), warmup=5, rep=300, return_mode="median") / 10
        except Exception as exc:
            ms_g = float("nan"); print("peer graph failed:", type(exc).__name__, exc)
        print(f"{mode} H{h} S{s} D{d} cudnn-fp8-kernel: graph {ms_g:.4f} ms, eager {ms_e:.4f} ms", flush=True)
    del q, k, v, ref
    torch.cuda.empty_cache()
