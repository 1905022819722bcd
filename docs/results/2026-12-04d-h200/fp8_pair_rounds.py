"""fp8 at the two S32760 shapes: the committed kernel against `cluster` 2, `sum_tree` and both,
timed in alternating rounds in one process (the kernel alone replayed from a CUDA graph, do_bench
medians), so that each variant's ratio to the default is a paired figure; then the pre-pass from
a CUDA graph and the cuDNN FP8 kernel (inputs quantised beforehand, timed as the bench times it),
to give the whole call's ratio. Usage: python3 fp8_pair_rounds.py PREBUILT_DIR [ROUNDS]."""
import json
import sys

import torch
import triton.testing as tt

sys.path.insert(0, ".")
from wan_fp4.eval.bench_attention import graphed, use_prebuilt_dir  # noqa: E402
from wan_fp4.eval.peers import available_peers  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import launch  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

use_prebuilt_dir(sys.argv[1])
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 6
CONFIGS = [{}, {"cluster": 2}, {"sum_tree": True}, {"sum_tree": True, "cluster": 2}]
peers, missing = available_peers(["cudnn-fp8-kernel"], device=torch.device("cuda"))
print("peers missing:", missing, flush=True)
for h, s, d in ((12, 32760, 128), (40, 32760, 128)):
    g = torch.Generator(device="cuda").manual_seed(h * 1000 + s)
    q, k, v = (torch.randn(1, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    ops = prepare.prepare_fp8(q, k, v, **v_layout_args("fp8"))
    flops = 4 * h * s * s * d
    out = torch.empty(1, s, h, d, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(1, h, s, dtype=torch.float32, device="cuda")
    ref = None
    for cfg in CONFIGS:
        launch(ops, "fp8", d, config=cfg, out=out, lse=lse, prebuilt=True)
        torch.cuda.synchronize()
        if ref is None:
            ref = out.clone()
        rel = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
        print(f"H{h} S{s} {json.dumps(cfg)}: bitwise equal to the default {torch.equal(out, ref)}, rel L2 {rel:.2e}",
              flush=True)
    n = 5 if h == 12 else 2
    times = {json.dumps(c): [] for c in CONFIGS}
    for rnd in range(ROUNDS):
        for cfg in CONFIGS:
            fn = graphed(lambda cfg=cfg: launch(ops, "fp8", d, config=cfg, out=out, lse=lse, prebuilt=True), n)
            times[json.dumps(cfg)].append(tt.do_bench(fn, warmup=3, rep=400, return_mode="median") / n)
        print(f"H{h} S{s} round {rnd}: " + ", ".join(f"{key} {t[-1]:.4f} ms" for key, t in times.items()), flush=True)
    pre = graphed(lambda: prepare.prepare_fp8(q, k, v, **v_layout_args("fp8")), 3)
    pre_ms = tt.do_bench(pre, warmup=3, rep=400, return_mode="median") / 3
    pf = lambda: peers["cudnn-fp8-kernel"](q, k, v)  # noqa: E731
    pf()
    cudnn = [tt.do_bench(pf, warmup=3, rep=400, return_mode="median") for _ in range(3)]
    cudnn_ms = sorted(cudnn)[1]
    base = times[json.dumps({})]
    for key, t in times.items():
        ratios = [b / x for b, x in zip(base, t)]
        med = sorted(t)[len(t) // 2]
        print(f"H{h} S{s} {key}: kernel median {med:.4f} ms ({flops / med / 1e9:.0f} TFLOP/s), paired speed vs "
              f"the default per round {min(ratios):.4f}-{max(ratios):.4f} (mean {sum(ratios) / len(ratios):.4f}); "
              f"with the pre-pass ({pre_ms:.4f} ms) {med + pre_ms:.4f} ms = {cudnn_ms / (med + pre_ms):.4f}x the "
              f"cuDNN FP8 kernel ({cudnn_ms:.4f} ms; three timings {', '.join(f'{c:.4f}' for c in cudnn)})", flush=True)
    del q, k, v, ops, out, lse
    torch.cuda.empty_cache()
