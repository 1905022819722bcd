"""What the pre-pass would save if Q's quantisation left it (made inside the attention kernel, item
30 (b) of docs/SM90_GEN2.md): the bound. Replayed on the same inputs, the pre-pass reads Q, K and V
from DRAM, Q's 10.5 MB (at B1 H40 1,024 D128) beside the statistics' K and V (2026-12-07 fourth
run). Here the quantise launch runs its K and V blocks alone (its grid without Q's blocks: nq = 0),
and the kernel reads Q's codes from one full pre-pass made before timing. The kernel's own share of
an in-kernel Q quantisation (loading BF16 Q, its amax and cast per CTA) is not in it, so this is an
upper bound. The whole call replayed from a CUDA graph and after launches writing Q, K and V,
alternated in rounds beside cuDNN BF16. A job script, not part of the package."""
import os
import sys

import torch
import triton

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, inputs, row  # noqa: E402
from wan_fp4.kernels import prepare as P  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402


def prepare_kv(q, k, v, q_ops, v_perm=None, v_ones_rows=0):
    """prepare_fp8's Triton launches with Q's blocks left out of the quantise launch; Q's codes,
    scales and sizes taken from q_ops (a full pre-pass of the same q)."""
    B, Sq, H, D = q.shape
    Skv = k.shape[1]
    v_perm = None if v_perm is None else tuple(int(i) for i in v_perm)
    skv_pad = P._padded(Skv)
    nk = skv_pad // P.QK_SCALE_BLOCK
    dev = q.device
    k8 = torch.empty(B, H, skv_pad, D, dtype=torch.float8_e4m3fn, device=dev)
    v8t = torch.empty(B, H, D + v_ones_rows, skv_pad, dtype=torch.float8_e4m3fn, device=dev)
    k_scale, v_scale, k_mean, v_amax, stats_words = P._carve(
        torch.float32, dev, (B, H, nk), (B, H, D), (B, H, D), (B, H, D), (P.UNIT_COUNTER + 1,))
    range_stats = stats_words[:P.RANGE_STATS]
    pdl = P._pdl(q)
    ksum, vmax, n_chunks = P._column_partials(k, v, stats_words, None, pdl)
    fold = B * H * nk * n_chunks <= P.FOLD_READS
    if not fold:
        P._column_totals_into(ksum, vmax, n_chunks, k_mean, v_amax, Skv, pdl)
    warps, maxnreg = P.quant_launch(2 * nk * B * H, P._sm_count(dev), D)
    keep = P.keep_codes(q_ops.q8.numel() + k8.numel() + v8t.numel(), dev)
    P._quant_kernel[(2 * nk, B * H)](
        q, k, v, k_mean, v_amax, ksum, vmax, P._perm_on(dev, v_perm), q_ops.q8, k8, v8t.view(torch.uint8),
        q_ops.q_scale, k_scale, v_scale, range_stats, Sq, Skv, H, 0, nk, n_chunks, *q.stride(), *k.stride(),
        *v.stride(), D=D, BLOCK_D=triton.next_power_of_2(D), BLOCK_S=P.QK_SCALE_BLOCK, HW_CVT=q.is_cuda,
        PERM=v_perm is not None, ONES_ROWS=v_ones_rows, ONE_CODE=P.E4M3_ONE, FOLD=fold, GROUP=P.TOTALS_LOADS,
        KEEP=keep, READ_FIRST=keep and P.READ_INPUTS_FIRST, PDL=pdl, num_warps=warps, maxnreg=maxnreg,
        **P._pdl_launch(pdl))
    return P.PreparedFP8(q_ops.q8, k8, v8t, q_ops.q_scale, k_scale, v_scale, k_mean, Sq, Skv, range_stats, v_perm,
                         v_ones_rows)


def same_ops(a, b):
    return all(torch.equal(getattr(a, n).view(torch.uint8), getattr(b, n).view(torch.uint8)) for n in ("k8", "v8t")) \
        and all(torch.equal(getattr(a, n), getattr(b, n)) for n in ("k_scale", "v_scale", "k_mean"))


if __name__ == "__main__":
    rounds = int(os.environ.get("ROUNDS", "3"))
    torch.manual_seed(0)
    cases = (("direct-p", (1, 1024, 40, 128)), ("fp8", (1, 1024, 40, 128)), ("direct-p", (1, 1024, 12, 128)),
             ("direct-p", (1, 2048, 40, 128)), ("direct-p", (1, 1024, 40, 64)))
    for mode, shape in cases[:int(os.environ.get("CASES", len(cases)))]:
        b, s, h, d = shape
        q, k, v, writer, cudnn = inputs(shape)
        layout = v_layout_args(mode)
        full = P.prepare_fp8(q, k, v, **layout)
        calls = {"package": lambda: host.run(q, k, v, mode, prebuilt=True)[0],
                 "no Q in the pre-pass": lambda: host.launch(prepare_kv(q, k, v, full, **layout), mode, d,
                                                             prebuilt=True)[0],
                 "cuDNN BF16": cudnn}
        first = {n: fn().float() for n, fn in calls.items()}
        same = same_ops(prepare_kv(q, k, v, full, **layout), full) and torch.equal(first["package"],
                                                                                   first["no Q in the pre-pass"])
        rep, mod = alternated(calls, writer, rounds)
        print(f"B{b} H{h} S{s} D{d} {mode} ({rounds} rounds; replayed | inputs written; K's and V's codes and the "
              f"output {'bit for bit the same' if same else 'DIFFER'}):", flush=True)
        for n in calls:
            print(row(n, rep[n], mod[n], 20), flush=True)
        del q, k, v, writer, cudnn, full
        torch.cuda.empty_cache()
