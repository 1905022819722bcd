"""The pairs' timing loop shared by short_rule.py and fold_modes.py: named calls alternated in
rounds (the order reversed every other round), each timed replayed from a CUDA graph and after
launches writing its inputs (wan_fp4.eval.graph_spans). A job-script helper, not part of the package."""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.eval import graph_spans  # noqa: E402


def alternated(calls: dict, writer, rounds: int) -> tuple[dict, dict]:
    """({name: [replayed us per round]}, {name: [us after writer per round]}) for calls {name: fn}."""
    rep, mod = {n: [] for n in calls}, {n: [] for n in calls}
    for r in range(rounds):
        for n in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
            rep[n].append(_graph_ms(calls[n], 20) * 1e3)
            mod[n].append(graph_spans.median_span_us(calls[n], writer))
    return rep, mod


def row(name: str, rep: list, mod: list, width: int, tail: str = "") -> str:
    """One call's line: its replayed times | its times after the writer."""
    return (f"  {name:{width}s}: " + " ".join(f"{t:.1f}" for t in rep) + " us | "
            + " ".join(f"{t:.1f}" for t in mod) + " us" + tail)


def inputs(shape):
    """(q, k, v, writer, cudnn) for a (B, S, H, D) shape: N(0,1) BF16 inputs, the launches writing
    them (graph_spans.input_writer) and cuDNN BF16's call on them, returned in (B, S, H, D) as ours."""
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt).transpose(1, 2)
    return q, k, v, graph_spans.input_writer(q, k, v), cudnn
