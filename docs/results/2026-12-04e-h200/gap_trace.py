"""A timeline of eager fp8 calls at B1 H12 S32760 D128 as triton's do_bench runs them (an L2 flush,
then the call, no synchronisation between repetitions), under torch.profiler: where the GPU waits."""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import wan_fp4

mode = sys.argv[1]
out = sys.argv[2]
torch.manual_seed(0)
q, k, v = (torch.randn(1, 32760, 12, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int, device="cuda")
fn = lambda: wan_fp4.attention(q, k, v, mode, kernel="sm90-cute")  # noqa: E731
for _ in range(5):
    fn()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(8):
        cache.zero_()
        fn()
    torch.cuda.synchronize()
prof.export_chrome_trace(out)
