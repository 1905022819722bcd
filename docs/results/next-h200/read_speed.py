"""How fast one launch reads K and V of B1 H40 1,024 D128 (21 MB of BF16) from DRAM, against the
column statistics launch that must read them before any K or V code (docs/SM90_GEN2.md item 52:
10.5-11.6 us cold under ncu, 1.7-1.9 TB/s). Each from a CUDA graph after a launch that reads a
256 MB buffer (so L2 holds none of K and V; its lines are clean), the span of the timed launches
alone (wan_fp4.eval.graph_spans), alternated in rounds: the statistics launch as the package makes
it, torch's two reductions (amax of K, of V), and a plain Triton read of both (8 warps, 16-byte
loads, all of a program's loads unrolled) at two program sizes. A job script, not part of the
package."""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from wan_fp4.eval import graph_spans  # noqa: E402
from wan_fp4.kernels import prepare as P  # noqa: E402


@triton.jit
def _read_both(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    """Sum of this program's STEPS blocks of x and of y (so that nothing is optimised away)."""
    base = tl.program_id(0).to(tl.int64) * BLOCK * STEPS
    # one (STEPS, BLOCK) tile per tensor, so that all of a program's loads issue before any add
    offs = base + tl.arange(0, STEPS)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
    # n is a whole number of programs' tiles at the shapes timed: no masks, so that nothing
    # holds a load back behind another's predicate
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + tl.program_id(0), tl.sum(tl.sum(x.to(tl.float32) + y.to(tl.float32), axis=1), axis=0))


def triton_read(k, v, steps, block=2048):
    n = k.numel()
    if n % (block * steps):
        raise ValueError(f"{n} elements are not whole tiles of {block * steps}")
    out = torch.empty(n // (block * steps), device=k.device)

    def call():
        _read_both[(out.numel(),)](k, v, out, n, BLOCK=block, STEPS=steps, num_warps=8)
        return out
    return call


if __name__ == "__main__":
    rounds = int(os.environ.get("ROUNDS", "3"))
    torch.manual_seed(0)
    flush = torch.ones(64 * 2**20, device="cuda")  # 256 MB, five times L2
    for shape in ((1, 1024, 40, 128), (1, 1024, 12, 128), (1, 2048, 40, 128)):
        b, s, h, d = shape
        k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        stats = torch.empty(P.UNIT_COUNTER + 1, device="cuda")  # the words the statistics launch zeroes
        calls = {"statistics launch": lambda: P._column_partials(k, v, stats)[0],
                 "torch amax K, V": lambda: (k.amax(), v.amax())[0],
                 "Triton read, 32 KB a program": triton_read(k, v, 1),
                 "Triton read, 128 KB a program": triton_read(k, v, 4)}
        spans = {n: [] for n in calls}
        for r in range(rounds):
            for n in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
                spans[n].append(graph_spans.median_span_us(calls[n], lambda: flush.sum()))
        mb = 2 * k.numel() * k.element_size() / 1e6
        print(f"B{b} H{h} S{s} D{d}: K and V {mb:.1f} MB from DRAM ({rounds} rounds, us; TB/s of the median)", flush=True)
        for n, t in spans.items():
            print(f"  {n:30s}: " + " ".join(f"{x:.1f}" for x in t) + f" us, {mb / sorted(t)[len(t) // 2]:.2f} TB/s",
                  flush=True)
        del k, v
