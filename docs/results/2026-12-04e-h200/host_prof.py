"""Host time of one eager short call, by function (cProfile), B1 H40 S1024 D128 direct-p."""
import cProfile, io, pstats, sys, time
import torch
import torch.nn.functional as F
import wan_fp4

torch.manual_seed(0)
q, k, v = (torch.randn(1, 1024, 40, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
calls = int(sys.argv[1]) if len(sys.argv) > 1 else 300
fns = {
    "auto": lambda: wan_fp4.attention(q, k, v, "direct-p"),
    "sm90-cute": lambda: wan_fp4.attention(q, k, v, "direct-p", kernel="sm90-cute"),
    "sdpa": lambda: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)),
}
for name, fn in fns.items():
    for _ in range(30):
        fn()
    torch.cuda.synchronize()
    for rep in range(2):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        print(f"{name:10s} eager per call {1e6 * (time.perf_counter() - t) / calls:7.1f} us", flush=True)
pr = cProfile.Profile()
pr.enable()
for _ in range(calls):
    fns["auto"]()
pr.disable()
torch.cuda.synchronize()
for key in ("tottime", "cumulative"):
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats(key).print_stats(45)
    print(s.getvalue())
