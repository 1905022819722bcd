"""An eager call's host time by piece, from torch.profiler's CPU events: the package's own steps
labelled with record_function (wrapped here, not in the package) and the CUDA runtime/driver calls
each makes, at B1 S1024 H40 D128 and H12 D64. A job script, not part of the package."""
import functools
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, os.getcwd())
import wan_fp4  # noqa: E402
from wan_fp4 import dispatch  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402


def label(mod, name):
    fn = getattr(mod, name)

    @functools.wraps(fn)
    def wrapped(*a, **kw):
        with record_function(f"wan_fp4.{name}"):
            return fn(*a, **kw)
    setattr(mod, name, wrapped)


for mod, name in ((prepare, "_column_partials"), (prepare, "_column_totals_into"), (prepare, "_prepare_triton"),
                  (prepare, "_carve"), (prepare, "prepare_fp8"), (host, "launch"), (dispatch, "_select"),
                  (dispatch, "_run")):
    label(mod, name)
# host.run imports these at call time from their modules, so the wrapped ones are used
orig_start = prepare.PreparedFP8.start_score_range_check


def start(self, *a, **kw):
    with record_function("wan_fp4.start_score_range_check"):
        return orig_start(self, *a, **kw)


prepare.PreparedFP8.start_score_range_check = start
orig_finish = prepare.ScoreRangeCheck.finish


def finish(self):
    with record_function("wan_fp4.ScoreRangeCheck.finish"):
        return orig_finish(self)


prepare.ScoreRangeCheck.finish = finish

for b, s, h, d in ((1, 1024, 40, 128), (1, 1024, 12, 64)):
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for _ in range(30):
        wan_fp4.attention(q, k, v, "direct-p")
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(50):
            torch.cuda.synchronize()
            with record_function("wan_fp4.attention (call)"):
                wan_fp4.attention(q, k, v, "direct-p")
        torch.cuda.synchronize()
    print(f"=== B{b} S{s} H{h} D{d}: 50 eager calls, CPU time per event (us, averaged over calls)", flush=True)
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=40, max_name_column_width=60), flush=True)
