"""The time of the pre-pass docs/SM90_GEN2.md item 72 asks the contract for: no statistics launch,
one launch making K's codes less the mean of its first 128 keys (each K block's program reads
those rows too) and V's per 128-key block and channel (each V block's program stores its scales),
then the package's kernel, which makes Q's codes itself. The kernel does not apply V's per-block
scales (it reads the first block's), so the output is wrong and only the time counts; `own`
(environment OWN=1) takes each K block's own mean instead, as the twentieth run of 2026-12-07
timed (docs/results/2026-12-07t-h100/block_stats.py). Beside the package's call, the kernel alone
on a pre-pass made before timing, and cuDNN BF16, replayed and after a launch writing the inputs
(rounds.py). A job script, not part of the package."""
import json
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/next-h200"))
from rounds import alternated, inputs, row  # noqa: E402
from wan_fp4.kernels import prepare as pp  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.config import length_config  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
_UNIT_COUNTER = tl.constexpr(pp.UNIT_COUNTER)


@triton.jit(do_not_specialize=("Skv", "nk"))
def _block_quant_kernel(k_ptr, v_ptr, perm_ptr, k8_ptr, v8_ptr, k_scale_ptr, v_scale_ptr, k_means_ptr,
                        v_scales_ptr, stats_ptr, Skv, H, nk, skb, sks, skh, skd, svb, svs, svh, svd,
                        D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr, HW_CVT: tl.constexpr,
                        PERM: tl.constexpr, ONES_ROWS: tl.constexpr, ONE_CODE: tl.constexpr,
                        KEEP: tl.constexpr, PDL: tl.constexpr, OWN: tl.constexpr):
    """Blocks [0, nk) of axis 0: K's 128-key block less the channel mean of the first block (OWN:
    of its own block), stored per block; the rest: V's block scaled by its own channel maxima, its
    scales stored per block (and the first block's where the package's kernel reads them)."""
    if PDL:
        pp.gdc_launch_dependents()
    pid = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    if (pid == 0) & (bh == 0):
        # the word after the range statistics: the persistent kernel's unit counter (which asks for
        # a second unit only after this launch has ended), zero as the statistics launch leaves it
        tl.store(stats_ptr + _UNIT_COUNTER, 0.0)
    if pid < nk:
        x = pp._rows_in(k_ptr, pid * BLOCK_S + tl.arange(0, BLOCK_S), bh, Skv, H, skb, sks, skh, skd, D, BLOCK_D,
                        KEEP)
        if OWN:
            mu = tl.sum(x.to(tl.float32), 0) / tl.minimum(Skv - pid * BLOCK_S, BLOCK_S).to(tl.float32)
        else:
            first = pp._rows_in(k_ptr, tl.arange(0, BLOCK_S), bh, Skv, H, skb, sks, skh, skd, D, BLOCK_D, False)
            mu = tl.sum(first.to(tl.float32), 0) / tl.minimum(Skv, BLOCK_S).to(tl.float32)
        tl.store(k_means_ptr + (bh * nk + pid) * D + offs_d, mu, mask=offs_d < D)
        scale, bad = pp._quant_rows_block(x, mu, k8_ptr, k_scale_ptr, pid, bh, Skv, nk, D, BLOCK_D, BLOCK_S,
                                          True, HW_CVT, KEEP)
        tl.atomic_max(stats_ptr + 1, scale)
    else:
        x = pp._rows_in(v_ptr, pp._v_rows(perm_ptr, pid - nk, BLOCK_S, PERM), bh, Skv, H, svb, svs, svh, svd, D,
                        BLOCK_D, KEEP)
        amax = tl.reduce(tl.abs(x.to(tl.float32)), 0, pp._max_nan)
        tl.store(v_scales_ptr + (bh * nk + pid - nk) * D + offs_d, pp._pow2_scale_tl(amax)[0], mask=offs_d < D)
        pp._quant_v_block(x, amax, v8_ptr, v_scale_ptr, pid - nk, bh, nk * BLOCK_S, D, BLOCK_D, BLOCK_S, HW_CVT,
                          ONES_ROWS, ONE_CODE, KEEP)


def block_prepare(q, k, v, shape=None):
    """PreparedFP8 from the one launch above (Q left to the kernel); shape: (warps, register limit)
    of its programs, None = the package's quant_launch for the same block count."""
    B, S, H, D = q.shape
    nk = pp._padded(S) // pp.QK_SCALE_BLOCK
    dev, f8 = q.device, torch.float8_e4m3fn
    lay = v_layout_args("direct-p")
    k8 = torch.empty(B, H, nk * 128, D, dtype=f8, device=dev)
    v8t = torch.empty(B, H, D + lay["v_ones_rows"], nk * 128, dtype=f8, device=dev)
    q_scale, k_scale, v_scale, k_mean, k_means, v_scales, stats = pp._carve(
        torch.float32, dev, (B, H, nk), (B, H, nk), (B, H, D), (B, H, D), (B, H, nk, D), (B, H, nk, D),
        (pp.UNIT_COUNTER + 1,))
    warps, maxnreg = shape or pp.quant_launch(2 * nk * B * H, pp._sm_count(dev), D)
    keep = pp.keep_codes(k8.numel() + v8t.numel() + q.numel(), dev)
    _block_quant_kernel[(2 * nk, B * H)](
        k, v, pp._perm_on(dev, tuple(lay["v_perm"])), k8, v8t.view(torch.uint8), k_scale, v_scale, k_means, v_scales,
        stats,
        S, H, nk, *k.stride(), *v.stride(), D=D, BLOCK_D=triton.next_power_of_2(D), BLOCK_S=128, HW_CVT=q.is_cuda,
        PERM=True, ONES_ROWS=lay["v_ones_rows"], ONE_CODE=pp.E4M3_ONE, KEEP=keep, PDL=pp._pdl(q),
        OWN=os.environ.get("OWN", "0") == "1", num_warps=warps, maxnreg=maxnreg)
    return pp.PreparedFP8(None, k8, v8t, q_scale, k_scale, v_scale, k_mean, S, S, stats[:pp.RANGE_STATS],
                          tuple(lay["v_perm"]), lay["v_ones_rows"], q)


if __name__ == "__main__":
    torch.manual_seed(0)
    for shape in ((1, 1024, 40, 128), (1, 1024, 12, 128), (1, 2048, 40, 128)):
        b, s, h, d = shape
        q, k, v, writer, cudnn = inputs(shape)
        # EXTRA: options over the short call's config for the block-statistics calls (JSON)
        cfg = {**length_config("direct-p", d, s, s), **json.loads(os.environ.get("EXTRA", "{}"))}
        pre = pp.prepare_fp8(q, k, v, quantise_q=False, **v_layout_args("direct-p"))
        base = host.run(q, k, v, "direct-p", prebuilt=True)[0]
        wrong = host.launch(block_prepare(q, k, v), "direct-p", d, config=cfg, prebuilt=True)[0]
        print(f"B{b} H{h} S{s} D{d}: block-statistics output finite {bool(torch.isfinite(wrong).all())}, "
              f"max |diff| to the package {(wrong.float() - base.float()).abs().max().item():.3g} "
              f"(expected wrong: no correction)", flush=True)
        calls = {
            "package": lambda: host.run(q, k, v, "direct-p", prebuilt=True)[0],
            "block stats": lambda: host.launch(block_prepare(q, k, v), "direct-p", d, config=cfg, prebuilt=True)[0],
            "block stats 4w": lambda: host.launch(block_prepare(q, k, v, pp.QUANT_LONG), "direct-p", d, config=cfg,
                                                  prebuilt=True)[0],
            "kernel alone": lambda: host.launch(pre, "direct-p", d, config=cfg, prebuilt=True)[0],
            "cuDNN BF16": cudnn,
        }
        rep, mod = alternated(calls, writer, ROUNDS)
        print(f"B{b} H{h} S{s} D{d} direct-p ({ROUNDS} rounds; replayed | inputs written)", flush=True)
        for n in calls:
            print(row(n, rep[n], mod[n], 16), flush=True)
        del q, k, v, writer, cudnn, calls, pre
        torch.cuda.empty_cache()
