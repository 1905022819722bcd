"""Where PDL's time goes at B1 H40 S1,024 D128: one CUDA graph of 10 calls (host.run, pdl and pdl
off, with and without the LSE) replayed under torch.profiler, and per call the kernels' start and
end (CUPTI's timestamps, us from the call's first kernel): the statistics launch, the quantise
launch and the attention kernel, and the gaps between them; medians over the calls after the first."""
import json
import os
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.getcwd())
from wan_fp4.eval.bench_attention import use_prebuilt_dir  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

use_prebuilt_dir(".device/sm90_pair")
CALLS = 10
torch.manual_seed(0)
for mode in ("direct-p", "fp8"):
    q, k, v = (torch.randn(1, 1024, 40, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for lse in (False, True):
        for label, cfg in (("pdl", None), ("off", {"pdl": False})):
            def call():
                return host.run(q, k, v, mode, config=cfg, return_lse=lse, prebuilt=True)
            call()
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(CALLS):
                    call()
            for _ in range(3):
                g.replay()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                g.replay()
                torch.cuda.synchronize()
            evs = sorted((e for e in prof.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)
            names = [e.name for e in evs]
            starts = [i for i, n in enumerate(names) if "column_stats" in n]
            rows = []
            for c, i in enumerate(starts):
                seg = evs[i:starts[c + 1] if c + 1 < len(starts) else len(evs)]
                st = next(e for e in seg if "column_stats" in e.name)
                qu = next(e for e in seg if "quant" in e.name)
                ke = next(e for e in seg if "cutlass" in e.name.lower() or "kernel_" in e.name and "quant" not in e.name
                          and "column" not in e.name)
                t0 = st.time_range.start
                rows.append({"stats_end": st.time_range.end - t0, "quant_start": qu.time_range.start - t0,
                             "quant_end": qu.time_range.end - t0, "kernel_start": ke.time_range.start - t0,
                             "kernel_end": ke.time_range.end - t0,
                             "call": (evs[starts[c + 1]].time_range.start - t0) if c + 1 < len(starts) else None})
            med = {key: statistics.median(r[key] for r in rows[1:] if r[key] is not None) for key in rows[0]}
            print(f"{mode} lse={lse} {label}: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items())
                  + f"; kernel {med['kernel_end'] - med['kernel_start']:.1f}, quant end -> kernel start "
                  f"{med['kernel_start'] - med['quant_end']:.1f} us", flush=True)
            if mode == "direct-p" and not lse and label == "pdl":
                print("  kernels of one call:", json.dumps([n[:60] for n in names[starts[1]:starts[2]]]), flush=True)
    del q, k, v
    torch.cuda.empty_cache()
