"""The pre-pass's switches (prepare.KEEP_CODES_IN_L2, PDL_PREPASS; run-time module constants here) at
B1 H40 and H12 1,024 tokens D128, direct-p: the whole call replayed from a CUDA graph and after
launches writing Q, K and V (wan_fp4.eval.graph_spans), alternated in rounds, each output compared
bit for bit with the package's. Both were paired replayed only. A job script, not part of the
package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.eval import graph_spans  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
CASES = {"package": {}, "codes not kept in L2": {"KEEP_CODES_IN_L2": False}, "no PDL in the pre-pass": {"PDL_PREPASS": False}}


def pair(cases, heads=(40, 12)):
    """Each case (prepare's module constants set to its values) against the others, alternated."""
    saved = {name: getattr(prepare, name) for case in cases.values() for name in case}
    torch.manual_seed(0)
    for h in heads:
        shape = (1, 1024, h, 128)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        writer = graph_spans.input_writer(q, k, v)

        def call():
            o = host.run(q, k, v, "direct-p", prebuilt=True)
            return o[0] if isinstance(o, tuple) else o

        ref, same = None, {}
        rep, mod = {n: [] for n in cases}, {n: [] for n in cases}
        for r in range(ROUNDS):
            for n in (list(cases) if r % 2 == 0 else list(cases)[::-1]):
                for name, value in saved.items():
                    setattr(prepare, name, cases[n].get(name, value))
                out = call()
                if ref is None:
                    ref = out.clone()
                same[n] = same.get(n, True) and torch.equal(out, ref)
                rep[n].append(_graph_ms(call, 20) * 1e3)
                mod[n].append(graph_spans.median_span_us(call, writer))
        for name, value in saved.items():
            setattr(prepare, name, value)
        print(f"B1 H{h} S1024 D128 direct-p ({ROUNDS} rounds; replayed from a graph | after launches writing Q, K, V):",
              flush=True)
        for n in cases:
            print(f"  {n:24s}: " + " ".join(f"{t:.1f}" for t in rep[n]) + " us | "
                  + " ".join(f"{t:.1f}" for t in mod[n]) + f" us; bits {'same' if same[n] else 'DIFFER'}", flush=True)
        del q, k, v, writer
        torch.cuda.empty_cache()


if __name__ == "__main__":
    pair(CASES)
