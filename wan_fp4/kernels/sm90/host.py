"""The sm90 kernel's host side: operands from the FP8 pre-pass in this kernel's layout, the launch
(prebuilt or JIT, kernels/aot.py), and the LSE correction for K smoothing."""
from __future__ import annotations

import torch

from .aot import PREBUILT, kernel_name
from .config import N_WG, default_config, launch_configs, length_config, persistent_fits, reading_q_codes


def run(q, k, v, mode, scale=None, fp4=None, return_lse=False, *, config=None, prebuilt=None):
    """The spec's run, on inputs `supports` accepted: (out in q's dtype, LSE or None)."""
    from ...modes import default_scale
    from ..prepare import prepare_fp8
    from .layout import v_layout_args

    d = q.shape[-1]
    if config is None:
        config = length_config(mode, d, q.shape[1], k.shape[1])
    quant = kernel_makes_q(q, mode, config, return_lse)
    ops = prepare_fp8(q, k, v, quantise_q=not quant, **v_layout_args(mode))
    c = default_scale(d) if scale is None else float(scale)
    # The kernel is queued before the check waits for the pre-pass, so the GPU never idles on the
    # host; out-of-range scores only make the kernel's arithmetic wrong (its addressing depends on
    # shapes alone), and that output is dropped: the call raises instead of returning it. With Q's
    # codes made in the kernel, Q's range statistics are the kernel's, so the check waits for it.
    check = None if quant else ops.start_score_range_check(mode, c)
    out, lse = launch(ops, mode, d, scale, config=config, prebuilt=prebuilt)
    (check or ops.start_score_range_check(mode, c)).finish()
    out = out.to(q.dtype)
    if not return_lse:
        return out, None
    return out, lse + lse_shift(ops, d, scale)


def kernel_makes_q(q, mode: str, config: dict, return_lse: bool = False) -> bool:
    """Whether `run` leaves Q's codes to the kernel: `config` (options over (mode, D)'s defaults)
    has quant_q, and q is BF16 (B, S, H, D), contiguous, with no LSE asked for (its K-smoothing
    shift reads Q's codes, which the kernel keeps in shared memory). Elsewhere the pre-pass makes
    them and `launch` runs the kernel with quant_q 0: the same bits."""
    return (bool(default_config(mode, q.shape[-1], config)["quant_q"]) and q.dtype == torch.bfloat16
            and q.is_contiguous() and q.data_ptr() % 16 == 0 and not return_lse)


def lse_shift(ops, head_dim, scale=None):
    """ln2 * (q8 * sq * c) . k_mean per row, (B, H, Sq): smoothing K shifted each row's scores by
    that much; the reference adds it back so LSEs of different key chunks compare (ring attention).
    The kernel's LSE leaves it out (it would need a Q . mean_k dot per row); add it here."""
    from ...modes import LN2, QK_SCALE_BLOCK, default_scale
    from ...reference import log2_scale

    c = log2_scale(default_scale(head_dim) if scale is None else float(scale))
    sq = ops.q_scale.repeat_interleave(QK_SCALE_BLOCK, dim=2)[:, :, : ops.seq_q] * c  # (B, H, Sq)
    q = ops.q8[:, :, : ops.seq_q].to(torch.float32) * sq.unsqueeze(-1)
    return LN2 * torch.matmul(q, ops.k_mean.unsqueeze(-1)).squeeze(-1)


def launch(ops, mode, head_dim, scale=None, *, config=None, out=None, lse=None, vt=None, prebuilt=None):
    """Run the kernel on prepared operands (prepare.PreparedFP8). Returns (out BF16, lse FP32).

    vt: the V^T in this kernel's layout; None = ops.v8t when the pre-pass wrote that layout
    (layout.v_layout_args), else converted here (layout.sm90_v_layout, an extra pass).
    config: options over (mode, D)'s defaults; None = the defaults, with a short launch's options
    where its lengths ask for them (config.length_config).
    prebuilt: None = the AOT kernel (aot.py) of this config when one is usable, else JIT;
    True = require the AOT kernel; False = always JIT.
    Where ops has no Q codes (prepare_fp8(..., quantise_q=False)), the kernel makes them from
    ops.q_source, BF16 (B, S, H, D) and contiguous, with its q_scale and Q's range statistics (a
    config with quant_q). Where ops has Q's codes, a config with quant_q runs with quant_q 0 on
    them: the same bits."""
    from ...modes import default_scale
    from ...reference import log2_scale
    from .compile import compile_kernel, runtime_args
    from .layout import sm90_v_layout, v_layout_args
    from .split import plan

    # with no config of its own, a short launch takes its lengths' options (config.length_config)
    if config is None:
        config = length_config(mode, head_dim, ops.seq_q, ops.seq_kv)
    if ops.q8 is not None and default_config(mode, head_dim, config)["quant_q"]:
        config = reading_q_codes(config)  # the pre-pass made Q's codes: the kernel reads them
    cfg, *plain = launch_configs(mode, head_dim, config)
    if cfg["persistent"]:
        check_persistent(ops, cfg)
    b, h, _ = ops.q_scale.shape
    d = ops.k8.shape[-1]
    if vt is None:
        want = v_layout_args(mode)
        if (ops.v_perm, ops.v_ones_rows) == (want["v_perm"], want["v_ones_rows"]):
            vt = ops.v8t
        else:
            vt = sm90_v_layout(ops.plain_v8t().contiguous(), mode == "direct-p")
    if out is None:
        out = torch.empty(b, ops.seq_q, h, d, dtype=torch.bfloat16, device=ops.k8.device)
    if lse is None:
        lse = torch.empty(b, h, ops.seq_q, dtype=torch.float32, device=ops.k8.device)
    if ops.q8 is None and not cfg["quant_q"]:
        raise ValueError(f"ops has no Q codes (prepare_fp8(quantise_q=False)) and config {config} has no quant_q")
    q = ops.q_source
    if cfg["quant_q"]:
        if q is None or q.dtype != torch.bfloat16 or q.shape != (b, ops.seq_q, h, d):
            raise ValueError(f"q: quant_q needs BF16 Q of shape ({b}, {ops.seq_q}, {h}, {d}) as ops.q_source; got "
                             f"{None if q is None else (q.dtype, tuple(q.shape))}")
    tensors = (q if cfg["quant_q"] else ops.q8, ops.k8, vt, out, lse, ops.q_scale, ops.k_scale, ops.v_scale)
    for name, t in zip(("q" if cfg["quant_q"] else "q8", "k8", "vt", "out", "lse", "q_scale", "k_scale", "v_scale"), tensors):
        if not t.is_contiguous():
            raise ValueError(f"sm90 kernel operand {name} must be contiguous")
        # the kernel is compiled for 16-byte aligned operands (compile.py), and stores O in 4-byte words
        if t.data_ptr() % 16:
            raise ValueError(f"sm90 kernel operand {name} must start on a 16-byte boundary, got address "
                             f"{t.data_ptr():#x} (a view at an offset into a larger tensor?)")
    c = log2_scale(default_scale(head_dim) if scale is None else float(scale))
    raw_stream = torch.cuda.current_stream(ops.k8.device).cuda_stream
    split, segments, part, tickets = 0, 1, lse, lse  # the plan's split; part and tickets split_tail's alone
    if cfg["split_tail"] or cfg["tail_rows"]:
        p = plan(b, h, ops.seq_q, ops.seq_kv, cfg["cluster"], rows=cfg["tail_rows"])
        if p.split:
            split, segments = p.split, p.segments
            if cfg["split_tail"]:
                # zero for this call alone: a buffer kept between calls would be shared by graphs
                # captured on one stream and replayed concurrently on others (one memset per call)
                tickets = torch.zeros(split * N_WG, dtype=torch.int32, device=ops.k8.device)
                part = torch.empty(split_workspace(p, head_dim, mode), dtype=torch.float32,
                                   device=ops.k8.device)
        else:
            # nothing to split: the kernel without the option (the same bits, and no decode)
            cfg = plain[0]
    # with quant_q the kernel raises Q's largest scale and non-finite flag into the range statistics
    tensors += (part, tickets, ops.range_stats)
    sizes = (b, h, ops.seq_q, ops.seq_kv, split, segments)

    def jit():
        import cuda.bindings.driver as cuda

        kern = compile_kernel(mode, head_dim, **cfg)
        kern(*runtime_args(tensors, sizes, c, cuda.CUstream(raw_stream)))

    PREBUILT.run_or_jit(kernel_name(mode, head_dim, cfg), (*(t.data_ptr() for t in tensors), *sizes, c, raw_stream),
                        ops.k8.device, jit, prebuilt, f" for mode={mode!r} D={head_dim} config={cfg}")
    return out, lse


def check_persistent(ops, cfg: dict) -> None:
    """Raise unless a persistent launch of `cfg` can run on `ops`: its units' key tiles a multiple of
    twice the stages (config.persistent_fits), and the unit counter (prepare.UNIT_COUNTER, an Int32
    word after range_stats) inside range_stats' storage, where the kernel's atomics would
    otherwise land on memory it does not own. The word must be zero before the launch (prepare_fp8's
    statistics launch zeroes it, and the launch leaves it zero), and two persistent launches on one
    `ops` must not run at the same time: they share it."""
    from ..prepare import UNIT_COUNTER

    if not persistent_fits(ops.seq_kv, cfg):
        raise ValueError(f"persistent needs key tiles (128 keys) in multiples of {2 * cfg['stages']}, got "
                         f"{-(-ops.seq_kv // 128)} for {ops.seq_kv} keys")
    stats = ops.range_stats
    room = stats.untyped_storage().data_ptr() + stats.untyped_storage().nbytes() - stats.data_ptr()
    if stats.dtype != torch.float32 or room < 4 * (UNIT_COUNTER + 1):
        raise ValueError(f"ops.range_stats: persistent needs float32 storage for {UNIT_COUNTER + 1} words "
                         f"(range_stats and the unit counter, as prepare_fp8 allocates), got {stats.dtype} with "
                         f"{room} bytes from its start")


def split_workspace(p, head_dim: int, mode: str) -> int:
    """FP32 words of split_tail's partial states for plan p: per split tile, segment and consumer
    warp group, each thread's output accumulator (D / 2 values, direct-p's ones column included),
    row references and sums (2 + 2)."""
    from .layout import v_layout_args

    dv = head_dim + v_layout_args(mode)["v_ones_rows"]
    return p.split * p.segments * N_WG * 128 * (dv // 2 + 4)
