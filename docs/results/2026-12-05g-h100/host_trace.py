"""Where an eager call's host time goes, measured inside the call: each named function wrapped
with a timer (its inclusive time per call), 2,000 eager calls of wan_fp4.attention at
B1 H1 S128 D128 direct-p (the GPU idle), after warm-up. The wrappers' own cost (about 0.3 us
each) is inside the figures."""
import collections
import functools
import os
import sys
import time

import torch

sys.path.insert(0, os.getcwd())
import wan_fp4  # noqa: E402
from wan_fp4 import dispatch  # noqa: E402
from wan_fp4.kernels import aot, prepare  # noqa: E402
from wan_fp4.kernels.sm90 import aot as sm90_aot, host  # noqa: E402

spent = collections.Counter()


def timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        t = time.perf_counter_ns()
        try:
            return fn(*a, **kw)
        finally:
            spent[name] += time.perf_counter_ns() - t
    return wrapper


def patch(obj, attr, name):
    setattr(obj, attr, timed(name, getattr(obj, attr)))


patch(dispatch, "validate", "dispatch.validate")
patch(dispatch, "_select", "dispatch._select (kernel choice)")
patch(dispatch, "_run", "dispatch._run (inside the op)")
patch(prepare, "prepare_fp8", "prepare_fp8")
patch(prepare, "_check_inputs", "  prepare._check_inputs")
patch(prepare, "triton_usable", "  prepare.triton_usable")
patch(prepare, "_column_partials", "  prepare._column_partials (launch 1)")
patch(prepare, "_carve", "  prepare._carve")
patch(prepare._quant_kernel, "run", "  quantise launch (Triton run)")
patch(prepare._column_stats_kernel, "run", "    statistics launch (Triton run)")
patch(host, "launch", "host.launch")
patch(sm90_aot.PREBUILT, "run_or_jit", "  PREBUILT.run_or_jit (shim call)")
patch(prepare.PreparedFP8, "start_score_range_check", "check: start")
patch(prepare.ScoreRangeCheck, "finish", "check: finish")
patch(prepare, "check_score_range", "  check_score_range")
patch(prepare, "capturing", "  prepare.capturing")

q, k, v = (torch.randn(1, 128, 1, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
calls = 2000
for _ in range(100):
    wan_fp4.attention(q, k, v, "direct-p")
torch.cuda.synchronize()
spent.clear()
t = time.perf_counter_ns()
for _ in range(calls):
    wan_fp4.attention(q, k, v, "direct-p")
total = time.perf_counter_ns() - t
torch.cuda.synchronize()
print(f"wan_fp4.attention, whole call: {total / calls / 1e3:7.1f} us per call")
for name, ns in spent.items():
    print(f"{name:44s} {ns / calls / 1e3:7.1f} us per call")
