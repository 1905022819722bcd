"""sm_90a forward attention in the CuTe DSL: modes "direct-p" and "fp8" (docs/NUMERICS.md).

Structure (docs/ARCHITECTURE.md, "Kernel families"): one CTA per (128-query tile, head, batch);
warp group 0 is the producer (one warp issues TMA for Q, K and the K-major V^T; with cluster=2,
CTA pairs along the query tiles share each K and V^T load by TMA multicast), warp groups
1 and 2 are consumers, each owning 64 query rows. Per 128-key tile a consumer does
    S = Q K^T                (FP8 wgmma m64n128k32 e4m3, smem x smem)
    qk = sq * sk * c         (one scalar per tile: scale blocks are 128 wide)
    online max on raw S (m = fl(max S * qk)); alpha = 2^(m_old - m_new) only where it moved
    P bytes                  direct-p: FFMA.SAT(S, qk/16, fl(120 - 8m)/128) = clamp(t, 0, 128)/128
                             with t = fma(S, 8 qk, bias) exactly (power-of-two scaling), + 1.5*2^16
                             (rne to an integer in the low mantissa byte), PRMT: 2.75 instr/score;
                             f16_bytes: FMA to t * 2^-24, cvt.rn.relu.f16x2 (rne(t) in the f16
                             subnormal bits, 0 below 0), PRMT: 1.75 instr/score
                             fp8:      E4M3(ex2(fma(S, qk, fl(8 - m)))) (P's 256 in the exponent),
                             l += p in FP32 (sum_tree: each tile's p summed as a tree)
    acc = acc * alpha + P V  (FP8 wgmma, P the A operand from registers, into a zeroed tile
                             accumulator of `fold` key tiles, i.e. folded every 128 * fold keys
                             (fold = 4: 512); one FFMA per element adds it into FP32)
and the epilogue writes O = acc * sv / l as BF16 into (B, S, H, D), staged through shared memory so
that whole rows leave in 16-byte stores.

With pingpong the two warp groups take turns to issue their products (see wait_my_turn), so that
they cannot fall into phase.

Layout trick (no register shuffles): the wgmma accumulator gives a thread S columns
{8j + 2t, 8j + 2t + 1} while the register A operand wants {4t..4t+3, 16+4t..16+4t+3} per 32-key
block. Each thread packs its own S values into its A registers in order, so A column k of each
32-key block holds key SIGMA[k]; V^T is stored with its keys permuted the same way (layout.py).
In direct-p the V^T tile also carries 8 extra rows (row D all ones, the rest zero), so the PV
wgmma computes the denominator l = sum of the same E4M3 values in acc column D.
"""
from __future__ import annotations

from typing import NamedTuple

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import Float32, Int32, const_expr
from cutlass.cute.nvgpu import cpasync, warpgroup

from ...modes import DIRECT_P_ONE, DIRECT_P_SLOPE, DIRECT_P_TOP, LN2, LOG2_P_SCALE, TILE_M, TILE_N
from .config import N_WG, WG_M
from .ptx import (add_f16x2, bf16x2_max_f32, bf16x4_e4m3x4, bits_f32, cta_index_x_again, cvt_bf16x2,
                  cvt_f16x2_relu, ex2_approx, f16x2_max_f32, f16x2_splat, f32_bits, fma_f32, fma_sat_f32,
                  fmax_nan, lg2_approx, low_bytes_of_halves, max_f16x2, max_nan_bf16x2, mul_f32, pack_e4m3x4,
                  pack_f16_low_bytes, pack_low_bytes)
from .split import cta_work, segment_keys, tile_segments

F8 = cutlass.Float8E4M3FN
SAT_SPAN = 128.0  # FFMA.SAT clamps to [0, 1]: t is computed divided by this, so [0, 1] holds t in [0, 128]
MAGIC_S = 1.5 * 2.0**16  # added to t/128 in [0, 1], rounds t to an integer (rne) in the low mantissa bits
F16_UNIT = 2.0**-24  # the f16 subnormal step: cvt to f16 of t * F16_UNIT rounds t to an integer (f16_bytes)
CONSUMER_REGS = 240  # setmaxnreg of the consumer warp groups
PRODUCER_REGS = 24  # setmaxnreg of the producer warp group (it only issues TMA)
# Named barriers (0 is __syncthreads): TURN_BARRIER + k is consumer warp group k's turn to issue
# (pingpong); O_BARRIER + k publishes its output rows in shared memory to its own threads (the
# epilogue). The IDs are those the prebuilt objects were built with.
TURN_BARRIER = 4
O_BARRIER = 7
Q_BARRIER = 9  # quant_q: the consumer warp groups' Q amax exchange and their Q codes written
# quant_q: the Q tile's shared-memory swizzle, per head dim: the byte offset's bits 4.. (the 16-byte
# chunk within a row's swizzle atom) XORed with its bits 7.. (sm90_utils.make_smem_layout_a's
# S<3,4,3> for 128-byte rows, S<2,4,3> for 64-byte rows; tests/test_sm90_compile.py checks it)
Q_SWIZZLE_MASK = {128: 0x70, 64: 0x30}
# persistent's unit counter: the Int32 word of the pre-pass's statistics buffer at this index
# (prepare.UNIT_COUNTER, which the statistics launch zeroes; a CPU test checks the two agree)
UNIT_COUNTER = 5
# The epilogue stages a warp group's 64 x D BF16 output rows in shared memory, 16 bytes of padding
# after each row: a warp's 32-bit stores of its accumulator layout (8 rows x 4 words) and its
# 16-byte loads of whole rows then each meet 32 different banks.
O_ROW_PAD_WORDS = 4


def _tree(vals, op):
    """op (max, add) over a list as a balanced tree (plain Python at trace time: log2(n) dependent
    steps, not n - 1)."""
    while len(vals) > 1:
        vals = [op(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)] + ([vals[-1]] if len(vals) % 2 else [])
    return vals[0]


def _quad_reduce(x, op):
    """op over the quad of threads that share a row (two butterfly shuffles): every thread of the
    quad gets the result."""
    x = op(x, cute.arch.shuffle_sync_bfly(x, offset=1))
    return op(x, cute.arch.shuffle_sync_bfly(x, offset=2))


def _row_half_max(acc_s, hf):
    """Max of row half hf's values in acc_s (scores, or codes) over its whole row: the thread's 32
    as a tree, then across the quad."""
    mx = _tree([acc_s[cc + 2 * hf + 4 * j] for j in range(TILE_N // 8) for cc in range(2)], cute.arch.fmax)
    return _quad_reduce(mx, cute.arch.fmax)


class Regs(NamedTuple):
    """A consumer warp group's register tensors, handed to the per-tile helpers by name."""

    acc_s: cute.Tensor  # S = Q K^T of the current tile, then its P codes in place
    acc_t: cute.Tensor  # PV of the tiles since the last fold (zero-initialised per fold)
    acc_o: cute.Tensor  # FP32 output accumulator
    r_p: cute.Tensor  # P bytes: the PV wgmma's A operand
    r_p32: cute.Tensor  # r_p as Int32 words ((1,2,2),1,4): (row half, k half, k32 block)
    tSrQ: cute.Tensor  # Q fragments (MMA, 1, KB, N_WG)
    tSrK: cute.Tensor  # K fragments (MMA, 1, KB, stages)
    tOrV: cute.Tensor  # V^T fragments (MMA, 1, KB, stages)
    m_run: cute.Tensor  # running row max, log2 units (two row halves)
    l_run: cute.Tensor  # fp8 only: running sum of p (direct-p: acc column D)
    alpha_r: cute.Tensor  # the last softmax's rescale per row half
    alpha_p: cute.Tensor  # rescale acc_o still owes (since the last fold)
    sv: cute.Tensor | None = None  # sv_early: the V scales of the thread's columns
    m_sv: cute.Tensor | None = None  # sv_early: the V scales (D, (H, B)) they come from


class Sm90Attention:
    def __init__(self, mode: str, head_dim: int, stages: int = 2, pingpong: int = 0, fold: int = 1,
                 intra: bool = False, f16_bytes: bool = False, cluster: int = 1, headroom: int = 0,
                 sum_tree: bool = False, split_tail: bool = False, pdl: bool = False, tail_rows: bool = False,
                 sv_early: bool = False, quant_q: int = 0, persistent: int = 0):
        if mode not in ("direct-p", "fp8"):
            raise ValueError(f"mode must be 'direct-p' or 'fp8', got {mode!r}")
        if head_dim not in (64, 128):
            raise ValueError(f"head_dim must be 64 or 128, got {head_dim}")
        # pingpong: 0 off, 1 hand over after issuing, 2 hand over when the products are done
        # (turn-taking: see wait_my_turn)
        if int(pingpong) not in (0, 1, 2):
            raise ValueError(f"pingpong must be 0, 1 or 2, got {pingpong!r}")
        # cluster: CTAs per cluster along the query tiles; they share each K and V^T stage: one
        # CTA loads the whole tile by TMA multicast into every CTA's shared memory (1/cluster of
        # the L2 -> SM traffic of K and V), and a stage is reused only after the consumers of all
        # CTAs released it. Q stays per CTA.
        if cluster not in (1, 2):
            raise ValueError(f"cluster must be 1 or 2, got {cluster!r}")
        # headroom (in codes, 8 per log2 unit; direct-p's default DIRECT_P_HEADROOM; 0 = the running
        # max): the row reference rule of reference.headroom_codes. After the first tile the codes
        # are made with the reference held, without the tile's row max; the pack checks (HMNMX2
        # over its f16x2 words) whether some code passed 126, and only then a warp moves its rows'
        # references, from the code words it holds.
        if isinstance(headroom, bool) or not isinstance(headroom, int) or not 0 <= headroom <= 64:
            raise ValueError(f"headroom must be an int of codes in [0, 64], got {headroom!r}")
        if headroom and not (mode == "direct-p" and f16_bytes):
            raise ValueError(f"headroom needs mode 'direct-p' with f16_bytes, got mode {mode!r} f16_bytes={f16_bytes}")
        self.headroom = int(headroom)
        self.mode = mode
        self.cluster = int(cluster)
        self.direct = mode == "direct-p"
        self.d = head_dim
        # direct-p appends 8 rows to V^T (row D = ones: the denominator column).
        self.dv = head_dim + 8 if self.direct else head_dim
        self.stages = stages
        self.pingpong = int(pingpong)
        if fold not in (1, 2, 4):
            raise ValueError(f"fold must be 1, 2 or 4, got {fold}")
        # fold: key tiles per zero-initialised PV accumulator before it is added into the FP32
        # output (2 = 256 keys, 4 = 512: half the promote FFMAs per tile, and 4 tiles summed at
        # the wgmma accumulator's precision); intra: FA3's order, QK(n+1) issued before PV(n)
        # (see step).
        self.fold = fold
        # the schedule's steps per loop iteration: a fold group, and at least a pair
        self.group = max(fold, 2)
        self.intra = intra
        # f16_bytes: direct-p's P bytes by FFMA + cvt.rn.relu.f16x2 + PRMT (1.75 instructions per
        # score) instead of FFMA.SAT + FADD + PRMT (2.75); the same bytes (docs/NUMERICS.md)
        if f16_bytes and not self.direct:
            raise ValueError(f"f16_bytes applies to mode 'direct-p' only, got mode {mode!r}")
        self.f16_bytes = bool(f16_bytes)
        if sum_tree and self.direct:
            raise ValueError(f"sum_tree applies to mode 'fp8' only, got mode {mode!r}")
        self.sum_tree = bool(sum_tree)  # fp8's row sum per tile as a balanced tree, not a chain
        # split_tail: the last partial wave's query tiles split along the keys (split.py), each
        # segment a CTA; tail_rows: split along the rows instead, each consumer warp group's 64
        # rows a CTA of their own whose other group only releases the K/V stages (the same bits:
        # a group's work does not change)
        self.split_tail = bool(split_tail)
        if tail_rows and (split_tail or pingpong or cluster > 1):
            raise ValueError(f"tail_rows excludes split_tail, pingpong and cluster > 1 (an idle warp group takes "
                             f"no turns and shares no cluster loads), got split_tail={split_tail} "
                             f"pingpong={pingpong} cluster={cluster}")
        self.tail_rows = bool(tail_rows)
        # pdl: launched as a programmatic dependent of the launch before it in the stream (the
        # pre-pass's quantise launch), so this grid's launch and barrier set-up overlap that
        # launch's last programs; every thread waits for it (griddepcontrol.wait) before touching
        # global memory, so the stream's order holds whatever launch came before
        self.pdl = bool(pdl)
        # sv_early: the epilogue's V scales loaded while the last PV runs, not after it
        self.sv_early = bool(sv_early)
        # quant_q: Q's codes made in the kernel from BF16 Q (B, S, H, D, contiguous; p_q), each CTA
        # its own 128-row block (the pre-pass then skips Q): its scale written to q_scale and, with
        # whether it held a NaN or inf, raised into the range statistics (p_stats), which the
        # score-range check reads after the kernel. 1: Q read after the pdl wait; 2: before it,
        # while the launch before drains (Q must not be written by that launch: host.run puts
        # the pre-pass there).
        if quant_q not in (0, 1, 2):
            raise ValueError(f"quant_q must be 0, 1 or 2, got {quant_q!r}")
        if quant_q == 2 and not pdl:
            raise ValueError("quant_q 2 (Q read before the pdl wait) needs pdl")
        self.quant_q = int(quant_q)
        # persistent: at most `persistent` CTAs (one per SM: config.PERSISTENT_CTAS); CTA i takes
        # work unit i (the 1-D order of tail_rows' decode), then the next unit a counter hands out
        # (UNIT_COUNTER): its producer warp takes it and passes it to the consumers through shared
        # memory (take_unit), and loads the next unit's first K and V tiles while its consumers
        # run the epilogue and make the next unit's Q codes. Needs
        # quant_q (the consumers write sQ, so no Q load waits for it to be free) and none of the
        # options whose state spans a CTA's whole life (split_tail's tickets, pingpong's turns,
        # cluster's shared loads). Each unit's pipelines start at stage 0 of one phase, with
        # fresh states (constants, so the main loop's waits name constant barriers, as in a
        # one-unit CTA): host.launch allows it only where a unit's key tiles are a multiple of
        # twice the stages.
        if persistent and (not quant_q or split_tail or pingpong or cluster > 1):
            raise ValueError(f"persistent needs quant_q and excludes split_tail, pingpong and cluster > 1, got "
                             f"quant_q={quant_q} split_tail={split_tail} pingpong={pingpong} cluster={cluster}")
        self.persistent = int(persistent)
        self.o_row_words = head_dim // 2 + O_ROW_PAD_WORDS  # a staged output row: BF16 pairs, then padding
        self.threads = 128 * (N_WG + 1)

    # ------------------------------------------------------------------ host side
    @cute.jit
    def __call__(
        self,
        p_q: cute.Pointer, p_k: cute.Pointer, p_vt: cute.Pointer, p_o: cute.Pointer,
        p_lse: cute.Pointer, p_sq: cute.Pointer, p_sk: cute.Pointer, p_sv: cute.Pointer,
        p_part: cute.Pointer, p_ticket: cute.Pointer, p_stats: cute.Pointer,
        b: Int32, h: Int32, s_q: Int32, s_kv: Int32, split: Int32, segments: Int32, c: Float32,
        stream: cuda.CUstream,
    ):
        """Operands in prepare.py's layout (each (b, h) slice contiguous, S padded to 128):
        q8 (B,H,Sq_pad,D), k8 (B,H,Skv_pad,D), v8t (B,H,Dv,Skv_pad) keys permuted by layout.SIGMA,
        scales (B,H,blocks) and (B,H,D); outputs O (B,Sq,H,D) BF16 and LSE (B,H,Sq) FP32.
        split_tail: the plan's split and segments (split.py), the split CTAs' partial states
        (FP32, host.split_workspace floats) and one ticket per split tile and consumer warp group
        (Int32, zero before the launch); tail_rows: the plan's split (segments 2); otherwise
        unused. quant_q: p_q is BF16 Q (B,S,H,D) and p_stats the range statistics
        (prepare.PreparedFP8.range_stats, five FP32; persistent: then the Int32 unit counter, zero
        before the launch and again after it); otherwise p_stats is unused."""
        d, dv = self.d, self.dv
        n_qb = (s_q + 127) // 128
        n_kb = (s_kv + 127) // 128
        sq_pad = n_qb * 128
        skv_pad = n_kb * 128
        # Strides beyond one row are Int64: B*S*H*D passes 2^31 at Wan 720p sizes from batch 6 on,
        # so the batch (and head/row) offsets of every operand are computed in 64-bit arithmetic
        # (host TMA descriptors and the kernel's O/LSE/scale addressing alike).
        w = cutlass.Int64
        mQ = cute.make_tensor(p_q, cute.make_layout((sq_pad, d, (h, b)), stride=(d, 1, (w(sq_pad) * d, w(h) * sq_pad * d))))
        mK = cute.make_tensor(p_k, cute.make_layout((skv_pad, d, (h, b)), stride=(d, 1, (w(skv_pad) * d, w(h) * skv_pad * d))))
        mVt = cute.make_tensor(
            p_vt, cute.make_layout((dv, skv_pad, (h, b)), stride=(skv_pad, 1, (w(dv) * skv_pad, w(h) * dv * skv_pad)))
        )
        # O as 32-bit words, each two adjacent BF16 columns; every row starts on a 16-byte boundary
        # (the epilogue stores 16-byte chunks of rows; D is a multiple of 8 and O is 16-byte aligned)
        dw = d // 2
        mO = cute.make_tensor(cute.recast_ptr(p_o, dtype=Int32), cute.make_layout(
            (s_q, dw, (h, b)), stride=(cute.assume(w(h) * dw, divby=4), 1, (dw, cute.assume(w(s_q) * h * dw, divby=4)))))
        mL = cute.make_tensor(p_lse, cute.make_layout((s_q, (h, b)), stride=(1, (w(s_q), w(h) * s_q))))
        mSq = cute.make_tensor(p_sq, cute.make_layout((n_qb, (h, b)), stride=(1, (w(n_qb), w(h) * n_qb))))
        mSk = cute.make_tensor(p_sk, cute.make_layout((n_kb, (h, b)), stride=(1, (w(n_kb), w(h) * n_kb))))
        mSv = cute.make_tensor(p_sv, cute.make_layout((d, (h, b)), stride=(1, (d, w(h) * d))))

        kmaj = cute.nvgpu.OperandMajorMode.K
        mma_qk = sm90_utils.make_trivial_tiled_mma(F8, F8, kmaj, kmaj, Float32, (1, 1, 1), (WG_M, TILE_N))
        mma_pv = sm90_utils.make_trivial_tiled_mma(
            F8, F8, kmaj, kmaj, Float32, (1, 1, 1), (WG_M, dv), a_source=warpgroup.OperandSource.RMEM
        )
        row = utils.LayoutEnum.ROW_MAJOR
        sQ_layout = sm90_utils.make_smem_layout_a(row, (WG_M, TILE_N, d), F8, N_WG)
        sK_layout = sm90_utils.make_smem_layout_b(row, (WG_M, TILE_N, d), F8, self.stages)
        sV_layout = sm90_utils.make_smem_layout_b(row, (WG_M, dv, TILE_N), F8, self.stages)

        g2s = cpasync.CopyBulkTensorTileG2SOp()
        # K and V^T with cluster > 1: one multicast load of the whole tile per cluster. Whole
        # tiles, not a slice per CTA: direct-p's V^T has D + 8 rows, whose halves (68 or 36 rows)
        # would start mid swizzle atom.
        g2s_kv = g2s if const_expr(self.cluster == 1) else cpasync.CopyBulkTensorTileG2SMulticastOp()
        tma_k, tK = cpasync.make_tiled_tma_atom(g2s_kv, mK, cute.slice_(sK_layout, (None, None, 0)), (TILE_N, d))
        tma_v, tV = cpasync.make_tiled_tma_atom(g2s_kv, mVt, cute.slice_(sV_layout, (None, None, 0)), (dv, TILE_N))
        if const_expr(self.quant_q):
            # BF16 Q (B, S, H, D) as BF16 pairs, laid out as O; no Q load by TMA (K's atom stands in)
            mQx = cute.make_tensor(cute.recast_ptr(p_q, dtype=Int32), mO.layout)
            tma_q, tQ = tma_k, tK
        else:
            mQx = mO  # unused
            tma_q, tQ = cpasync.make_tiled_tma_atom(g2s, mQ, cute.slice_(sQ_layout, (None, None, 0)), (WG_M, d))
        self.bytes_q = WG_M * d * N_WG
        self.bytes_k = TILE_N * d
        self.bytes_v = dv * TILE_N

        self.storage = self.storage_struct(cute.cosize(sQ_layout), cute.cosize(sK_layout), cute.cosize(sV_layout))
        # the query tiles rounded up to whole clusters: a CTA past the last tile loads zeros as Q
        # (TMA fills out-of-bounds rows), takes its part in the K/V loads and stores nothing
        n_mb = (s_q + TILE_M - 1) // TILE_M
        tiles_m = (n_mb + self.cluster - 1) // self.cluster * self.cluster
        grid = (tiles_m, h, b)
        n_full = tiles_m * h * b - split  # the CTAs of whole query tiles (split_tail, tail_rows)
        units = n_full + split * segments
        if const_expr(self.split_tail or self.tail_rows or self.persistent):
            # one dimension: CTA i < n_full is tile i (query tile fastest, then head, then batch),
            # then `segments` CTAs per split tile (see kernel)
            grid = (units, 1, 1)
        if const_expr(self.persistent):
            # ... or, persistent, those units taken by at most one CTA per SM
            grid = (cutlass.min(units, Int32(self.persistent)), 1, 1)
        launch = self.kernel(
            mma_qk, mma_pv, tma_q, tQ, tma_k, tK, tma_v, tV, mO, mL, mSq, mSk, mSv, mQx,
            sQ_layout, sK_layout, sV_layout, s_q, s_kv, c, p_part, p_ticket, p_stats, n_full, segments,
            # split_tail and tail_rows decode every CTA's index: by multiply-shift divisors made once
            # per launch
            cute.fast_divmod_create_divisor_v2(tiles_m), cute.fast_divmod_create_divisor_v2(h),
            # last: an argument in the middle shifts the others' offsets, and ptxas then schedules
            # every kernel's prologue differently, persistent or not
            units,
        )
        cluster = {} if self.cluster == 1 else {"cluster": [self.cluster, 1, 1]}  # no cluster launch for 1
        launch.launch(grid=grid, block=[self.threads, 1, 1], stream=stream, min_blocks_per_mp=1, use_pdl=self.pdl,
                      **cluster)

    def storage_struct(self, q_bytes, k_bytes, v_bytes):
        """The shared memory: the Q, K and V barriers, Q, the K and V^T stages, each consumer warp
        group's output rows (the epilogue)."""
        stages = self.stages
        fields = {
            "mbar_q": cute.struct.MemRange[cutlass.Int64, 2],
            "mbar_k": cute.struct.MemRange[cutlass.Int64, 2 * stages],
            "mbar_v": cute.struct.MemRange[cutlass.Int64, 2 * stages],
            "sQ": cute.struct.Align[cute.struct.MemRange[F8, q_bytes], 1024],
            "sK": cute.struct.Align[cute.struct.MemRange[F8, k_bytes], 1024],
            "sV": cute.struct.Align[cute.struct.MemRange[F8, v_bytes], 1024],
            "sO": cute.struct.Align[cute.struct.MemRange[Int32, N_WG * WG_M * self.o_row_words], 128],
        }
        if self.split_tail:
            fields["ticket"] = cute.struct.MemRange[Int32, N_WG]  # a warp group's ticket, shared
        if self.quant_q:
            fields["q_amax"] = cute.struct.MemRange[Float32, 4 * N_WG]  # each consumer warp's max |q|
        if self.persistent:
            # the units the producer passes on (two slots) and their full and empty barriers
            fields["mbar_unit"] = cute.struct.MemRange[cutlass.Int64, 4]
            fields["unit"] = cute.struct.MemRange[Int32, 2]
        return cute.struct(type("Storage", (), {"__annotations__": fields}))

    # ------------------------------------------------------------------ device side
    @cute.kernel
    def kernel(
        self, mma_qk: cute.TiledMma, mma_pv: cute.TiledMma,
        tma_q: cute.CopyAtom, tQ: cute.Tensor, tma_k: cute.CopyAtom, tK: cute.Tensor,
        tma_v: cute.CopyAtom, tV: cute.Tensor,
        mO: cute.Tensor, mL: cute.Tensor, mSq: cute.Tensor, mSk: cute.Tensor, mSv: cute.Tensor, mQx: cute.Tensor,
        sQ_layout: cute.ComposedLayout, sK_layout: cute.ComposedLayout, sV_layout: cute.ComposedLayout,
        s_q: Int32, s_kv: Int32, c: Float32, p_part: cute.Pointer, p_ticket: cute.Pointer, p_stats: cute.Pointer,
        n_full: Int32, segments: Int32, div_m: cute.FastDivmodDivisorV2, div_h: cute.FastDivmodDivisorV2,
        units: Int32,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg = warp // 4
        n_tiles = (s_kv + TILE_N - 1) // TILE_N
        t0, count, plan, idle = 0, n_tiles, None, False
        if const_expr(self.split_tail):
            plan = (n_full, segments, div_m, div_h)
            m_blk, hh, bb, split, seg = cta_work(cute.arch.block_idx()[0], *plan, self.cluster, Int32)
            _, t0, count = segment_keys(split, seg, segments, n_tiles, Int32)
        elif const_expr(self.tail_rows and not self.persistent):
            m_blk, hh, bb, idle = self.unit(cute.arch.block_idx()[0], n_full, div_m, div_h, wg)
        elif const_expr(not self.persistent):
            m_blk, hh, bb = cute.arch.block_idx()

        smem = cutlass.memory.SmemAllocator()
        st = smem.allocate(self.storage)
        one_thread = pipeline.CooperativeGroup(pipeline.Agent.Thread, 1)
        # one release per consumer warp (its lane 0), to this CTA's empty barrier
        consumers = pipeline.CooperativeGroup(pipeline.Agent.Thread, 4 * N_WG)
        prod_q, cons_q = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.mbar_q.data_ptr(), num_stages=1, producer_group=one_thread,
            consumer_group=consumers, tx_count=self.bytes_q, defer_sync=True,
        ).make_participants()
        if const_expr(self.cluster > 1):
            # a K/V stage is filled by one CTA's multicast into every CTA of the cluster: lane r
            # of each consumer warp releases it to CTA r's empty barrier, so each such barrier
            # counts the consumer warps of all the cluster's CTAs
            kv_args = dict(cta_layout_vmnk=cute.make_layout((1, self.cluster, 1, 1)),
                           consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread,
                                                                    4 * N_WG * self.cluster))
        else:
            kv_args = dict(consumer_group=consumers)
        pipe_k = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.mbar_k.data_ptr(), num_stages=self.stages, producer_group=one_thread,
            tx_count=self.bytes_k, defer_sync=True, **kv_args,
        )
        pipe_v = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.mbar_v.data_ptr(), num_stages=self.stages, producer_group=one_thread,
            tx_count=self.bytes_v, defer_sync=True, **kv_args,
        )
        prod_k, cons_k = pipe_k.make_participants()
        prod_v, cons_v = pipe_v.make_participants()

        sQ = st.sQ.get_tensor(sQ_layout.outer, swizzle=sQ_layout.inner)
        sK = st.sK.get_tensor(sK_layout.outer, swizzle=sK_layout.inner)
        sV = st.sV.get_tensor(sV_layout.outer, swizzle=sV_layout.inner)
        # (row, (word, 16-byte chunk), warp group): BF16 pairs of each consumer's output rows
        dw = self.d // 2
        sO = cute.make_tensor(st.sO.data_ptr(), cute.make_layout(
            (WG_M, (4, dw // 4), N_WG), stride=(self.o_row_words, (1, 4), WG_M * self.o_row_words)))
        if const_expr(self.persistent):
            if tidx == 0:
                for i in cutlass.range_constexpr(2):
                    cute.arch.mbarrier_init(st.mbar_unit.data_ptr() + i, 1)  # the producer warp's lane 0
                    cute.arch.mbarrier_init(st.mbar_unit.data_ptr() + 2 + i, 128 * N_WG)  # every consumer thread
        cute.arch.mbarrier_init_fence()
        if const_expr(self.cluster == 1):
            cute.arch.sync_threads()
        else:
            # the peer's multicast loads and releases reach this CTA's barriers: all initialised
            cute.arch.cluster_arrive_relaxed()
            cute.arch.cluster_wait()
        if const_expr(self.pdl and self.quant_q != 2):
            # the barriers are set up; nothing before this reads or writes global memory
            cute.arch.griddepcontrol_wait()

        if wg == 0:
            # ---------------- producer: one warp issues all TMA loads
            cute.arch.setmaxregister_decrease(PRODUCER_REGS)
            if const_expr(self.quant_q == 2):
                cute.arch.griddepcontrol_wait()
            if warp == 0:
                cpasync.prefetch_descriptor(tma_q)
                cpasync.prefetch_descriptor(tma_k)
                cpasync.prefetch_descriptor(tma_v)
                tma = (tma_q, tQ, tma_k, tK, tma_v, tV, sQ, sK, sV)
                if const_expr(self.persistent):
                    counter = cute.recast_ptr(p_stats + UNIT_COUNTER, dtype=Int32)
                    lin = cute.arch.block_idx()[0]  # the first unit: every warp knows it, no hand-over
                    k = Int32(0)
                    while lin < units:
                        # fresh (constant) states: every unit's key tiles are a multiple of twice the
                        # stages (host.launch), so each unit starts at stage 0 of the same phase, and
                        # the loop's waits keep constant barriers and phases, as a one-unit CTA's do
                        self.produce(tma, prod_q, pipe_k.make_producer(), pipe_v.make_producer(),
                                     *self.unit(lin, n_full, div_m, div_h, wg)[:3], t0, count)
                        # the next unit asked for once this one's loads are issued: the atomic's
                        # round trip then runs while the producer would wait for a free stage anyway,
                        # not before the unit's first loads (ptxas reads its answer at once: it
                        # aggregates the warp's atomics, then shuffles the answer)
                        lin = self.next_unit(counter, units)
                        self.pass_unit(st, k, lin)  # past the last unit: the consumers stop
                        k = k + 1
                else:
                    self.produce(tma, prod_q, prod_k, prod_v, m_blk, hh, bb, t0, count)
        else:
            cute.arch.setmaxregister_increase(CONSUMER_REGS)
            sTk = st.ticket.get_tensor(cute.make_layout((N_WG,))) if const_expr(self.split_tail) else None
            work = (mma_qk, mma_pv, sQ, sK, sV, cons_q, mO, mL, mSq, mSk, mSv, mQx, s_q, s_kv, c, n_tiles, wg, tidx,
                    sQ_layout, st, sO, t0, count, (p_part, p_ticket, sTk, plan), p_stats)
            if const_expr(self.persistent):
                k = Int32(0)
                lin = cute.arch.block_idx()[0]
                while lin < units:
                    # fresh states per unit, as the producer's
                    self.consume_unit(work, pipe_k.make_consumer(), pipe_v.make_consumer(),
                                      *self.unit(lin, n_full, div_m, div_h, wg))
                    lin = self.take_unit(st, k)
                    k = k + 1
            else:
                self.consume_unit(work, cons_k, cons_v, m_blk, hh, bb, idle)
        if const_expr(self.cluster > 1):
            # no CTA leaves while its peer may still release a stage to its barriers
            cute.arch.cluster_arrive()
            cute.arch.cluster_wait()

    @cute.jit
    def next_unit(self, counter, units):
        """persistent, the producer warp: the next work unit, from the counter (lane 0 takes it, the
        warp shares it); the grid's own units come first, and a grid that has every unit asks
        nothing. The launch's requests number `units` in all (one per unit a CTA runs after its
        first, one past the end per CTA), so the one answered units - 1 is the last: it puts the
        counter back to 0 for a later launch on the same pre-pass."""
        nxt = cute.arch.grid_dim()[0]
        if nxt < units:
            got = Int32(0)
            if cute.arch.lane_idx() == 0:
                got = cute.arch.atomic_add(counter, Int32(1), sem="relaxed", scope="gpu")
                if got == units - 1:
                    cute.arch.atomic_add(counter, -units, sem="relaxed", scope="gpu")
            nxt = nxt + cute.arch.shuffle_sync(got, 0)
        return nxt

    @cute.jit
    def pass_unit(self, st, k, lin):
        """persistent, the producer warp: unit `lin`, the one after the CTA's (k + 1)-th (the first
        comes from the CTA's index), into slot k % 2, once the consumers took the slot's last one;
        the full barrier's arrive releases the slot's store."""
        slot = k % 2
        cute.arch.mbarrier_wait(st.mbar_unit.data_ptr() + 2 + slot, ((k // 2) % 2) ^ 1)
        if cute.arch.lane_idx() == 0:
            st.unit.get_tensor(cute.make_layout((2,)))[slot] = lin
            cute.arch.mbarrier_arrive(st.mbar_unit.data_ptr() + slot)

    @cute.jit
    def take_unit(self, st, k):
        """persistent, every consumer thread: the unit after the CTA's (k + 1)-th, from slot k % 2,
        the slot then given back."""
        slot = k % 2
        cute.arch.mbarrier_wait(st.mbar_unit.data_ptr() + slot, (k // 2) % 2)
        lin = st.unit.get_tensor(cute.make_layout((2,)))[slot]
        cute.arch.mbarrier_arrive(st.mbar_unit.data_ptr() + 2 + slot)
        return lin

    @cute.jit
    def unit(self, lin, n_full, div_m, div_h, wg):
        """Work unit `lin` of the 1-D order (tail_rows, persistent): (m_blk, head, batch, idle), idle
        where a split tile's unit belongs to the other consumer warp group (tail_rows: a split
        tile's unit `half` is its consumer warp group `half`'s rows over every key)."""
        m_blk, hh, bb, split, half = cta_work(lin, n_full, 2, div_m, div_h, 1, Int32)
        idle = False
        if const_expr(self.tail_rows):
            idle = (split >= 0) & (wg - 1 != half)
        return m_blk, hh, bb, idle

    @cute.jit
    def produce(self, tma, prod_q, prod_k, prod_v, m_blk, hh, bb, t0, count):
        """The producer warp's loads for one unit: Q (unless quant_q), then key tiles [t0, t0 + count)
        of K and V^T."""
        tma_q, tQ, tma_k, tK, tma_v, tV, sQ, sK, sV = tma
        gQ = cute.local_tile(tQ[None, None, (hh, bb)], (WG_M, self.d), (None, 0))
        gK = cute.local_tile(tK[None, None, (hh, bb)], (TILE_N, self.d), (None, 0))
        gV = cute.local_tile(tV[None, None, (hh, bb)], (self.dv, TILE_N), (0, None))
        tQs, tQg = cpasync.tma_partition(
            tma_q, 0, cute.make_layout(1), cute.group_modes(sQ, 0, 2), cute.group_modes(gQ, 0, 2))
        tKs, tKg = cpasync.tma_partition(
            tma_k, 0, cute.make_layout(1), cute.group_modes(sK, 0, 2), cute.group_modes(gK, 0, 2))
        tVs, tVg = cpasync.tma_partition(
            tma_v, 0, cute.make_layout(1), cute.group_modes(sV, 0, 2), cute.group_modes(gV, 0, 2))
        if const_expr(not self.quant_q):
            hq = prod_q.acquire_and_advance()
            for w in cutlass.range_constexpr(N_WG):
                cute.copy(tma_q, tQg[None, m_blk * N_WG + w], tQs[None, w], tma_bar_ptr=hq.barrier)
        if const_expr(self.cluster == 1):
            for n in cutlass.range(count, unroll=1):
                hk = prod_k.acquire_and_advance()
                cute.copy(tma_k, tKg[None, t0 + n], tKs[None, hk.index], tma_bar_ptr=hk.barrier)
                hv = prod_v.acquire_and_advance()
                cute.copy(tma_v, tVg[None, t0 + n], tVs[None, hv.index], tma_bar_ptr=hv.barrier)
        else:
            # every CTA expects each whole tile on its own barrier; CTA n % cluster loads
            # K tile n into all of them, CTA (n + 1) % cluster V^T tile n (the issue
            # work spread evenly)
            rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
            everyone = cutlass.Int16((1 << self.cluster) - 1)
            for n in cutlass.range(count, unroll=1):
                hk = prod_k.acquire_and_advance()
                if n % self.cluster == rank:
                    cute.copy(tma_k, tKg[None, t0 + n], tKs[None, hk.index], tma_bar_ptr=hk.barrier,
                              mcast_mask=everyone)
                hv = prod_v.acquire_and_advance()
                if (n + 1) % self.cluster == rank:
                    cute.copy(tma_v, tVg[None, t0 + n], tVs[None, hv.index], tma_bar_ptr=hv.barrier,
                              mcast_mask=everyone)

    @cute.jit
    def consume_unit(self, work, cons_k, cons_v, m_blk, hh, bb, idle):
        """The consumer warp groups' part of one unit: Q's codes (quant_q), then this warp group's
        rows (consume), or with idle only the K/V stages released."""
        (mma_qk, mma_pv, sQ, sK, sV, cons_q, mO, mL, mSq, mSk, mSv, mQx, s_q, s_kv, c, n_tiles, wg, tidx,
         sQ_layout, st, sO, t0, count, tail_split, p_stats) = work
        q_scale = None
        if const_expr(self.quant_q):
            # both warp groups (a tail_rows CTA's idle one too: the scale is the whole block's)
            q_scale, q_bad = self.quantise_q(mQx, *self.q_smem(st, sQ_layout), s_q, m_blk, hh, bb, tidx - 128)
            if const_expr(self.quant_q == 2):
                cute.arch.griddepcontrol_wait()
            # one thread per CTA of a real query tile (a cluster's CTA past the last one has none)
            if tidx == 128 and m_blk * TILE_M < s_q:
                self.publish_q_scale(q_scale, q_bad, mSq, p_stats, m_blk, hh, bb)
        if idle:
            # tail_rows: the other group's CTA has these rows; release each stage as it lands
            for n in cutlass.range(count, unroll=1):
                cons_k.wait_and_advance().release()
                cons_v.wait_and_advance().release()
        else:
            self.consume(
                mma_qk, mma_pv, sQ, sK, sV, cons_q, cons_k, cons_v, mO, mL, mSq, mSk, mSv,
                s_q, s_kv, c, n_tiles, m_blk, hh, bb, wg - 1, tidx % 128, sO,
                t0, count, tail_split, q_scale,
            )

    def q_smem(self, st, sQ_layout):
        """quant_q's shared memory: sQ as 16-byte chunks of Int32 words, and the warps' amax slots."""
        sQw = cute.make_tensor(cute.recast_ptr(st.sQ.data_ptr(), dtype=Int32),
                               cute.make_layout((cute.cosize(sQ_layout) // 16, 4), stride=(4, 1)))
        return sQw, st.q_amax.get_tensor(cute.make_layout((4 * N_WG,)))

    @cute.jit
    def consume(
        self, mma_qk, mma_pv, sQ, sK, sV, cons_q, cons_k, cons_v, mO, mL, mSq, mSk, mSv,
        s_q, s_kv, c, n_tiles, m_blk, hh, bb, wgc, t128, sO, t0, count, tail_split, q_scale,
    ):
        """A consumer warp group's work: its 64 query rows over key tiles [t0, t0 + count) of
        n_tiles, then their output (with split_tail, a split tile's segment first merges, see
        merge_segments: tail_split = (p_part, p_ticket, sTk, the plan's arguments of split.cta_work))."""
        thr_qk = mma_qk.get_slice(t128)
        thr_pv = mma_pv.get_slice(t128)
        tSrQ = thr_qk.make_fragment_A(thr_qk.partition_A(sQ))  # (MMA, 1, KB, N_WG)
        tSrK = thr_qk.make_fragment_B(thr_qk.partition_B(sK))  # (MMA, 1, KB, stages)
        tOrV = thr_pv.make_fragment_B(thr_pv.partition_B(sV))  # (MMA, 1, KB, stages)
        acc_s = cute.make_rmem_tensor(thr_qk.partition_shape_C((WG_M, TILE_N)), Float32)
        acc_o = cute.make_rmem_tensor(thr_pv.partition_shape_C((WG_M, self.dv)), Float32)
        r_p = cute.make_rmem_tensor(thr_pv.partition_shape_A((WG_M, TILE_N)), F8)
        r_p32 = cute.recast_tensor(r_p, Int32)  # ((1,2,2),1,4): (row half, k half, k32 block)
        alpha_p = cute.make_rmem_tensor((2,), Float32)  # rescale acc_o still owes (since last fold)
        alpha_p.fill(1.0)
        acc_t = cute.make_rmem_tensor(thr_pv.partition_shape_C((WG_M, self.dv)), Float32)
        acc_o.fill(0.0)
        alpha_r = cute.make_rmem_tensor((2,), Float32)

        lane = t128 % 32
        quad = lane % 4
        row_wg = m_blk * TILE_M + wgc * WG_M  # the warp group's first query row
        r_loc = (t128 // 32) * 16 + lane // 4  # this thread's rows of the accumulator: r_loc, r_loc + 8
        q_blk = row_wg // 128
        if const_expr(self.cluster > 1):
            # a cluster's CTA past the last query tile starts past the padded queries: any
            # in-range scale serves its rows, never stored
            if q_blk > (s_q - 1) // 128:
                q_blk = (s_q - 1) // 128
        if const_expr(self.quant_q):
            sqc = q_scale * c  # made by quantise_q (exact: a power of two)
        else:
            sqc = mSq[q_blk, (hh, bb)] * c  # exact: sq is a power of two
        m_run = cute.make_rmem_tensor((2,), Float32)
        l_run = cute.make_rmem_tensor((2,), Float32)  # fp8 only (direct-p: acc column D)
        m_run.fill(-Float32.inf)
        l_run.fill(0.0)

        if const_expr(self.split_tail):
            # the segment's key tiles counted from its first, t0: the K scales, the key count
            # and the last tile (the only one with keys past s_kv) as seen from there
            mSk = cute.domain_offset((t0, (0, 0)), mSk)
            n_tiles = n_tiles - t0
            s_kv = s_kv - t0 * TILE_N
        # the first tile's K scale, loaded before the waits (as step loads the next tile's), so
        # that its round trip runs under the first loads and QK(0), not after them
        sk0 = mSk[0, (hh, bb)]
        if const_expr(not self.quant_q):
            cons_q.wait_and_advance()  # Q's codes landed
        sv = cute.make_rmem_tensor((self.d // 4,), Float32) if const_expr(self.sv_early) else None
        regs = Regs(acc_s, acc_t, acc_o, r_p, r_p32, tSrQ, tSrK, tOrV, m_run, l_run, alpha_r, alpha_p, sv, mSv)
        # QK(0) and softmax(0), then steps in groups of G = max(fold, 2) so that the
        # accumulate/fold flags are compile-time per position, then the last 1..G steps (tail).
        hk = cons_k.wait_and_advance()
        self.start_turns(wgc)
        self.issue_qk(mma_qk, regs, wgc, hk.index)
        self.hand_over(wgc, False)
        warpgroup.wait_group(0)
        self.hand_over(wgc, True)
        hk.release()
        self.softmax(regs, 0, n_tiles, s_kv, sqc * sk0, quad, True)
        self.merge(regs, False)
        args = (mma_qk, mma_pv, regs, wgc, n_tiles, s_kv, sqc, mSk, hh, bb, quad)
        # the loop's pipeline waits stay in this body (their state is loop-carried here)
        for g in cutlass.range((count - 1) // self.group, unroll=1):
            for i in cutlass.range_constexpr(self.group):
                hv = cons_v.wait_and_advance()
                hk = cons_k.wait_and_advance()
                self.step(*args, hv, hk, self.group * g + i, *self.fold_flags(i))
        n0 = count - 1 - (count - 1) % self.group
        self.tail(args, cons_v, cons_k, hk, count, n0, 0)
        self.end_turns(wgc)

        if const_expr(self.split_tail):
            # the CTA's work again from its index: kept from the start, it would hold uniform
            # registers through the main loop (its wgmma descriptors then get rebuilt per tile)
            p_part, p_ticket, sTk, plan = tail_split
            m_blk, hh, bb, split, seg = cta_work(cta_index_x_again(), *plan, self.cluster, Int32)
            ks = tile_segments(split, plan[1], Int32)
            row_wg = m_blk * TILE_M + wgc * WG_M
            last = cutlass.Boolean(True)
            if ks > 1:
                last = self.merge_segments(regs, wgc, t128, p_part, p_ticket, sTk, split, seg, ks)
            if last:
                self.store_output(regs, mO, mL, mSv, sO, s_q, hh, bb, wgc, t128, row_wg, r_loc)
        else:
            self.store_output(regs, mO, mL, mSv, sO, s_q, hh, bb, wgc, t128, row_wg, r_loc)

    @cute.jit
    def quantise_q(self, mQx, sQw, sAm, s_q, m_blk, hh, bb, t256):
        """quant_q: this CTA's 128-row Q block as the pre-pass makes it (prepare._quant_rows_block:
        amax kept NaN, power-of-two scale, E4M3 rne codes), written into sQ's swizzled layout for
        the QK wgmma; rows past s_q are zero codes. Each consumer thread takes whole 16-byte chunks
        of codes (16 BF16 inputs, two 16-byte loads); a warp's loads cover whole rows. Returns
        (scale, 1.0 if the block held a NaN or inf else 0.0), the same in every consumer thread."""
        d = self.d
        chunks = d // 16  # 16-byte code chunks per row
        rows_per_pass = 128 // chunks
        wgq = t256 // 128  # the warp group whose 64 rows this thread loads
        t = t256 % 128
        j = t % chunks
        gQ = mQx[None, None, (hh, bb)]  # (S_q, D / 2): BF16 pairs
        vecs = []
        for k in cutlass.range_constexpr(WG_M // rows_per_pass):
            row = m_blk * TILE_M + wgq * WG_M + t // chunks + k * rows_per_pass
            for half in cutlass.range_constexpr(2):
                vec = cute.make_rmem_tensor((4,), Int32)
                vec.fill(0)
                if row < s_q:
                    cute.autovec_copy(cute.flat_divide(gQ[row, None], (4,))[(None, 2 * j + half)], vec)
                vecs.append(vec)
        # max |q| of the thread's values, then the warp's, then the block's through shared memory
        absw = [vec[i] & Int32(0x7FFF7FFF) for vec in vecs for i in range(4)]
        amax = bf16x2_max_f32(_tree(absw, max_nan_bf16x2))
        for off in (16, 8, 4, 2, 1):
            amax = fmax_nan(amax, cute.arch.shuffle_sync_bfly(amax, offset=off))
        if t256 % 32 == 0:
            sAm[t256 // 32] = amax
        cute.arch.barrier(barrier_id=Q_BARRIER, number_of_threads=128 * N_WG)
        amax = _tree([sAm[i] for i in range(4 * N_WG)], fmax_nan)
        # the smallest power of two s with amax * fl(1/448) <= s (reference.pow2_scale), from the
        # FP32 bits as prepare._pow2_scale_tl
        bits = f32_bits(mul_f32(amax, Float32(1.0 / 448.0)))
        e = (bits >> 23) & Int32(0xFF)
        tt = e - 126
        if (bits & Int32(0x7FFFFF)) == 0:
            tt = e - 127
        if amax == Float32(0.0):
            tt = Int32(0)
        scale_bits = Int32(1 << 22)  # 2^-127 (subnormal): amax * fl(1/448) underflowed
        if tt > -127:
            scale_bits = (tt + 127) << 23
        scale = bits_f32(scale_bits)
        inv = bits_f32((127 - tt) << 23)
        bad = Float32(1.0)
        if amax < Float32.inf:
            bad = Float32(0.0)
        # the codes, each 16-byte chunk to its swizzled place: the tile's byte offset's 16-byte
        # chunk bits XORed with its row bits (Q_SWIZZLE_MASK)
        for k in cutlass.range_constexpr(WG_M // rows_per_pass):
            r = t // chunks + k * rows_per_pass
            off = wgq * (WG_M * d) + r * d + 16 * j
            off = off ^ ((off >> 3) & Int32(Q_SWIZZLE_MASK[d]))
            lo, hi = vecs[2 * k], vecs[2 * k + 1]
            codes = cute.make_rmem_tensor((4,), Int32)
            codes[0] = bf16x4_e4m3x4(lo[0], lo[1], inv)
            codes[1] = bf16x4_e4m3x4(lo[2], lo[3], inv)
            codes[2] = bf16x4_e4m3x4(hi[0], hi[1], inv)
            codes[3] = bf16x4_e4m3x4(hi[2], hi[3], inv)
            cute.autovec_copy(codes, sQw[off // 16, None])
        # the generic-proxy stores, seen by the wgmma's async proxy once every thread passed
        cute.arch.fence_view_async_shared()
        cute.arch.barrier(barrier_id=Q_BARRIER, number_of_threads=128 * N_WG)
        return scale, bad

    @cute.jit
    def publish_q_scale(self, scale, bad, mSq, p_stats, m_blk, hh, bb):
        """quant_q, one thread per CTA (after the pdl wait: the statistics launch zeroes the range
        statistics): the block's scale into q_scale, and into the range statistics as the pre-pass
        would raise it (the largest Q scale; Q's non-finite flag). Non-negative floats order as
        their bits, so an unsigned max is the float max."""
        mSq[m_blk, (hh, bb)] = scale
        cute.arch.red(p_stats, f32_bits(scale), op="umax", dtype="u32", sem="relaxed", scope="gpu")
        if bad > Float32(0.0):
            cute.arch.red(p_stats + 2, Int32(0x3F800000), op="umax", dtype="u32", sem="relaxed", scope="gpu")

    @cute.jit
    def merge_segments(self, regs, wgc, t128, p_part, p_ticket, sTk, split, seg, ks):
        """A split tile's segment: this warp group's partial state (acc_o, m_run, l_run) goes to
        its slot of p_part; the segment whose ticket comes last merges all of them, in segment
        order (so the bits do not depend on which came last; its own from its registers, which
        hold what it stored): the rows' reference becomes the largest segment's, each segment is
        rescaled to it (as a moved row max rescales) and summed in FP32. Returns whether this warp
        group merged (then it stores the output). Each thread keeps its own registers' slots: the
        merge is per thread, the quad's l sum comes after."""
        acc_o, acc_t, m_run, l_run = regs.acc_o, regs.acc_t, regs.m_run, regs.l_run
        n_acc = self.dv // 2  # acc_o's values per thread
        words = (n_acc + 4) * 128  # a slot: acc_o, m_run, l_run of the warp group's 128 threads

        first = (split * ks * N_WG + wgc) * words + t128  # segment 0's slot
        stride = N_WG * words  # from one segment's slot to the next
        mine = first + seg * stride
        for i in self.acc_indices():
            cute.arch.store(p_part + (mine + i * 128), acc_o[i])
        for hf in cutlass.range_constexpr(2):
            cute.arch.store(p_part + (mine + (n_acc + hf) * 128), m_run[hf])
            if const_expr(not self.direct):  # direct-p's l is accumulator column D
                cute.arch.store(p_part + (mine + (n_acc + 2 + hf) * 128), l_run[hf])
        # every thread's stores, then the warp group's ticket (the threadfence-reduction order)
        cute.arch.fence_acq_rel_gpu()
        cute.arch.barrier(barrier_id=O_BARRIER + wgc, number_of_threads=128)
        ticket = p_ticket + (split * N_WG + wgc)
        if t128 == 0:
            sTk[wgc] = cute.arch.atomic_add(ticket, Int32(1), sem="acq_rel", scope="gpu")
        cute.arch.barrier(barrier_id=O_BARRIER + wgc, number_of_threads=128)
        last = sTk[wgc] == ks - 1
        if last:
            cute.arch.fence_acq_rel_gpu()
            own_m = [m_run[hf] for hf in range(2)]
            own_l = [l_run[hf] for hf in range(2)]
            for i in self.acc_indices():
                acc_t[i] = acc_o[i]  # acc_t is free after the main loop
            # the other CTAs' slots: through L2 (.cg), never this SM's L1
            for s in cutlass.range(ks, unroll=1):
                for hf in cutlass.range_constexpr(2):
                    m_s = cute.arch.load(p_part + (first + s * stride + (n_acc + hf) * 128), Float32, cop="cg")
                    m_run[hf] = cute.arch.fmax(m_run[hf], m_s)
            acc_o.fill(0.0)
            l_run.fill(0.0)
            for s in cutlass.range(seg, unroll=1):
                self.add_stored_segment(regs, p_part, first + s * stride)
            w = [ex2_approx(own_m[hf] - m_run[hf]) for hf in range(2)]
            for hf in cutlass.range_constexpr(2):
                l_run[hf] = fma_f32(own_l[hf], w[hf], l_run[hf])
            for i in self.acc_indices():
                acc_o[i] = fma_f32(acc_t[i], w[(i // 2) % 2], acc_o[i])
            for s in cutlass.range(seg + 1, ks, unroll=1):
                self.add_stored_segment(regs, p_part, first + s * stride)
        return last

    @cute.jit
    def add_stored_segment(self, regs, p_part, base):
        """acc_o, l_run += a stored segment's, rescaled from its reference to m_run's."""
        acc_o, m_run, l_run = regs.acc_o, regs.m_run, regs.l_run
        n_acc = self.dv // 2
        w = [ex2_approx(cute.arch.load(p_part + (base + (n_acc + hf) * 128), Float32, cop="cg") - m_run[hf])
             for hf in range(2)]
        if const_expr(not self.direct):
            for hf in cutlass.range_constexpr(2):
                l_s = cute.arch.load(p_part + (base + (n_acc + 2 + hf) * 128), Float32, cop="cg")
                l_run[hf] = fma_f32(l_s, w[hf], l_run[hf])
        for i in self.acc_indices():
            a_s = cute.arch.load(p_part + (base + i * 128), Float32, cop="cg")
            acc_o[i] = fma_f32(a_s, w[(i // 2) % 2], acc_o[i])

    def acc_indices(self):
        """acc_o's flat register indices, in order (plain Python at trace time: the loops over
        them unroll without a loop of D / 2 steps in the IR)."""
        return range(self.dv // 2)

    @cute.jit
    def store_output(self, regs, mO, mL, mSv, sO, s_q, hh, bb, wgc, t128, row_wg, r_loc):
        """The epilogue: O = acc * sv / l as BF16 into (B, S, H, D) and the LSE, rows past s_q
        clipped."""
        acc_o, l_run, m_run = regs.acc_o, regs.l_run, regs.m_run
        lane = t128 % 32
        quad = lane % 4
        # The V scales of this thread's columns, all loaded before the first store: a load after
        # a store waits for it (they might alias), which made the epilogue 64 serial round trips.
        # With sv_early they were loaded under the last PV (step), so their latency is hidden.
        if const_expr(self.sv_early):
            sv = regs.sv
        else:
            sv = cute.make_rmem_tensor((self.d // 4,), Float32)
            self.load_sv(sv, mSv, hh, bb, quad)
        # O leaves through shared memory: each thread's BF16 pairs (columns 8j + 2 quad, + 1 of its
        # two rows) go there, and whole rows leave in 16-byte stores. Stored straight from the
        # accumulator layout, each warp store wrote 4 bytes into each of 8 rows (32 such stores per
        # thread): most of a CTA's fixed cost (BENCHMARKS.md, 2026-12-04).
        sOw = sO[None, None, wgc]  # (64 rows, (word, chunk))
        for hf in cutlass.range_constexpr(2):
            if const_expr(self.direct):
                # l sits in accumulator column D, held by the quad's first thread
                l_tot = cute.arch.shuffle_sync(acc_o[2 * hf + 4 * (self.d // 8)], offset=lane - quad)
            else:
                l_tot = _quad_reduce(l_run[hf], lambda a, b: a + b)
            inv_l = cute.arch.rcp_approx(l_tot)
            r = row_wg + r_loc + 8 * hf
            if r < s_q and quad == 0:
                # natural-log LSE; l_tot carries the factor 256 of P in both modes
                mL[r, (hh, bb)] = LN2 * (m_run[hf] + lg2_approx(l_tot) - LOG2_P_SCALE)
            for j in cutlass.range_constexpr(self.d // 8):
                # columns 8j + 2 quad and the next: word 4j + quad of the row
                lo = acc_o[2 * hf + 4 * j] * sv[2 * j] * inv_l
                hi = acc_o[1 + 2 * hf + 4 * j] * sv[2 * j + 1] * inv_l
                sOw[r_loc + 8 * hf, (quad, j)] = cvt_bf16x2(lo, hi)
        cute.arch.barrier(barrier_id=O_BARRIER + wgc, number_of_threads=128)
        # thread t stores 16-byte chunk t % chunks of rows t // chunks + k * 128 / chunks, rows
        # past s_q clipped: a warp's store covers whole rows
        chunks = self.d // 8
        gO = mO[None, None, (hh, bb)]  # (S_q, D / 2): column pairs
        ch = t128 % chunks
        words = cute.make_rmem_tensor((4,), Int32)
        for k in cutlass.range_constexpr(WG_M * chunks // 128):
            rr = t128 // chunks + k * (128 // chunks)
            if row_wg + rr < s_q:
                cute.autovec_copy(sOw[rr, (None, ch)], words)
                cute.autovec_copy(words, cute.flat_divide(gO[row_wg + rr, None], (4,))[(None, ch)])

    @cute.jit
    def load_sv(self, sv, mSv, hh, bb, quad):
        """The V scales of the thread's output columns 8j + 2 quad and the next, j < D / 8."""
        for j in cutlass.range_constexpr(self.d // 8):
            for cc in cutlass.range_constexpr(2):
                sv[2 * j + cc] = mSv[8 * j + 2 * quad + cc, (hh, bb)]

    @cute.jit
    def wait_my_turn(self, wgc):
        """Turn-taking (pingpong): the two consumer warp groups issue their tensor products in
        turns, 0, 1, 0, 1, .., so that they stay out of phase and one group's softmax runs while
        the other's products occupy the tensor core. A turn is what a group issues between two
        softmaxes: it ends after each QK^T (hand_over) and the next begins before the group's next
        product: QK(0), then per step PV(n) + QK(n + 1), the last PV alone.

        A token goes round the ring: named barrier TURN_BARRIER + k of 256 threads is "warp group
        k's turn"; k's 128 threads wait there (bar.sync, here) and its predecessor's 128 arrive
        (bar.arrive) when handing over. Arrivals and waits stay matched for every tile count:
        * every consumer warp group takes the same number of turns, which depends on n_tiles
          alone: turns open and close at compile-time positions of the schedule, never under a
          data-dependent branch, and a last warp group whose query rows are all padding runs
          every tile too. One key tile (S_kv <= 128) gives two turns ({QK(0)}, {PV(0)});
        * start_turns: the last group arrives once at group 0's barrier (the token goes in),
          then every group waits for its first turn;
        * within a group, waits (a turn opens) and hand-overs (it closes) alternate;
        * end_turns: every group hands its last turn over, and group 0 waits once more at its
          barrier (the token comes out).
        So with N turns per group, barrier k >= 1 sees N waits of group k and N arrivals of group
        k - 1, and barrier 0 sees N + 1 waits of group 0 and 1 + N arrivals of the last group. No
        group arrives twice at a barrier before its owner waited there: its next arrival needs
        the token back, which passes through that owner.

        No deadlock: order the turns by (turn index t, group k). When a group holds turn t,
        every product of the turns before it in that order has been issued, and its completion
        and release need no token. A turn waits for the turn before it, for its group's own
        earlier products, and for TMA loads; the pipeline waits come before a turn's wait."""
        if const_expr(self.pingpong):
            cute.arch.barrier(barrier_id=TURN_BARRIER + wgc, number_of_threads=256)

    @cute.jit
    def pass_turn(self, wgc):
        cute.arch.barrier_arrive(barrier_id=TURN_BARRIER + (wgc + 1) % N_WG, number_of_threads=256)

    @cute.jit
    def hand_over(self, wgc, done):
        """End the turn once this group has issued its products (pingpong=1, done=False) or once
        they completed (pingpong=2, done=True: the groups then never share the tensor core)."""
        if const_expr(self.pingpong == (2 if done else 1)):
            self.pass_turn(wgc)

    @cute.jit
    def start_turns(self, wgc):
        """The token goes in (the last group arrives at group 0's barrier), and the first turn."""
        if const_expr(self.pingpong):
            if wgc == N_WG - 1:
                cute.arch.barrier_arrive(barrier_id=TURN_BARRIER, number_of_threads=256)
            self.wait_my_turn(wgc)

    @cute.jit
    def end_turns(self, wgc):
        """The last turn ends (its products completed), and the token comes out: group 0 takes
        the last group's final hand-over."""
        if const_expr(self.pingpong):
            self.pass_turn(wgc)
            if wgc == 0:
                self.wait_my_turn(wgc)

    @cute.jit
    def issue_qk(self, mma_qk, regs, wgc, stage):
        acc_s, tSrQ, tSrK = regs.acc_s, regs.tSrQ, regs.tSrK
        atom = cute.make_mma_atom(mma_qk.op)  # a fresh atom: its ACCUMULATE flag is local state
        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(tSrQ, mode=[2])):
            atom.set(warpgroup.Field.ACCUMULATE, kb != 0)
            cute.gemm(atom, acc_s, tSrQ[None, None, kb, wgc], tSrK[None, None, kb, stage], acc_s)
        warpgroup.commit_group()

    @cute.jit
    def issue_pv(self, mma_pv, regs, stage, accumulate):
        """acc_t (+)= P V over one key tile, P the registers r_p; accumulate (compile-time) keeps
        acc_t's earlier tile."""
        acc_t, tOrV, p = regs.acc_t, regs.tOrV, regs.r_p
        atom = cute.make_mma_atom(mma_pv.op)
        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(p, mode=[2])):
            atom.set(warpgroup.Field.ACCUMULATE, accumulate or kb != 0)
            cute.gemm(atom, acc_t, p[None, None, kb], tOrV[None, None, kb, stage], acc_t)
        warpgroup.commit_group()

    def fold_flags(self, i):
        """(accumulate, fold_now) of the step at position i of a fold group (compile-time): the
        group's first PV starts acc_t from zero, its last adds acc_t into acc_o."""
        return i % self.fold != 0, i % self.fold == self.fold - 1

    @cute.jit
    def tail(self, args, cons_v, cons_k, hk, count, n0, i):
        """The steps after the schedule's loop: tiles n0 .. count - 1, 1 to G of them
        (G = max(fold, 2); n0 a multiple of G, so step n0 + i is at position i of its fold group).
        Nested on i (compile-time): step n0 + i is the last (no next K tile; its PV then folds)
        unless more tiles follow, so every step appears once and only the short last PV once per
        remainder. More follow when r = count % G is 0 (G tiles left) or at least i + 2.
        hk: the schedule's K handle, which a branch reassigns (so the branches carry it, as the
        loop does)."""
        if const_expr(i + 1 == self.group):
            hv = cons_v.wait_and_advance()
            self.step(*args, hv, None, n0 + i, self.fold_flags(i)[0], True)
        else:
            r = count % self.group
            more = r == 0
            if const_expr(i + 2 < self.group):
                more = more | (r >= i + 2)
            if more:
                hv = cons_v.wait_and_advance()
                hk = cons_k.wait_and_advance()
                self.step(*args, hv, hk, n0 + i, *self.fold_flags(i))
                self.tail(args, cons_v, cons_k, hk, count, n0, i + 1)
            else:
                hv = cons_v.wait_and_advance()
                self.step(*args, hv, None, n0 + i, self.fold_flags(i)[0], True)

    @cute.jit
    def step(self, mma_qk, mma_pv, regs, wgc, n_tiles, s_kv, sqc, mSk, hh, bb, quad, hv, hk,
             n, accumulate, fold_now):
        """PV of tile n (V stage hv) and, if hk is given (K stage of tile n + 1), QK + softmax of
        tile n + 1.

        accumulate: acc_t already holds the fold group's earlier tiles; fold_now: add acc_t into
        acc_o after this tile (fold_flags). Both compile-time."""
        if const_expr(hk is not None):
            qk = sqc * mSk[n + 1, (hh, bb)]  # loaded before the waits, so its latency hides
            self.wait_my_turn(wgc)
            if const_expr(self.intra):
                # FA3's intra-warpgroup order: QK(n + 1) is issued before PV(n), and the codes of
                # tile n + 1 are computed in place in the S accumulator between the two waits; P
                # is repacked only after PV(n) retired, so one P buffer suffices. ptxas moves the
                # wait for PV(n) ahead of the codes (docs/SM90_GEN2.md item 7), so they do not run
                # under PV(n) yet; the order still measured 1-2% faster at fold 4 (BENCHMARKS.md).
                self.issue_qk(mma_qk, regs, wgc, hk.index)
                self.issue_pv(mma_pv, regs, hv.index, accumulate)
                self.hand_over(wgc, False)
                warpgroup.wait_group(1)  # groups complete in order: S(n+1) is ready
                hk.release()
                self.codes(regs, n + 1, n_tiles, s_kv, qk, quad)
                warpgroup.wait_group(0)
                self.hand_over(wgc, True)
                hv.release()
                self.pack(regs)
                if const_expr(fold_now):
                    self.promote(regs)
            else:
                self.issue_pv(mma_pv, regs, hv.index, accumulate)
                self.issue_qk(mma_qk, regs, wgc, hk.index)
                self.hand_over(wgc, False)
                warpgroup.wait_group(1)
                hv.release()
                if const_expr(fold_now):
                    self.promote(regs)
                warpgroup.wait_group(0)
                self.hand_over(wgc, True)
                hk.release()
                self.softmax(regs, n + 1, n_tiles, s_kv, qk, quad)
            self.merge(regs, not fold_now)
        else:
            self.wait_my_turn(wgc)  # the last turn: end_turns closes it
            self.issue_pv(mma_pv, regs, hv.index, accumulate)
            if const_expr(self.sv_early):
                self.load_sv(regs.sv, regs.m_sv, hh, bb, quad)
            warpgroup.wait_group(0)
            hv.release()
            self.promote(regs)

    @cute.jit
    def promote(self, regs):
        """acc = acc * alpha + tile. FP8 wgmma accumulates with reduced precision, so a long
        in-place accumulation (l grows to ~256 S) loses bits; the tile sum is zero-initialised
        and added here in FP32. alpha (the product of the rescales since the last fold) is
        exactly 1 when the row max did not move."""
        acc_t, acc_o, alpha_p = regs.acc_t, regs.acc_o, regs.alpha_p
        for hf in cutlass.range_constexpr(2):
            for j in cutlass.range_constexpr(self.dv // 8):
                for cc in cutlass.range_constexpr(2):
                    i = cc + 2 * hf + 4 * j
                    acc_o[i] = fma_f32(acc_o[i], alpha_p[hf], acc_t[i])
            alpha_p[hf] = Float32(1.0)

    @cute.jit
    def merge(self, regs, pending):
        """Take the last softmax's rescale alpha into the output's books: acc_o owes it (applied
        at the next fold) and, when acc_t holds a finished tile not yet folded (pending,
        compile-time), that tile is rescaled now, before the next PV accumulates into it."""
        acc_t, alpha_r, alpha_p = regs.acc_t, regs.alpha_r, regs.alpha_p
        for hf in cutlass.range_constexpr(2):
            if alpha_r[hf] != Float32(1.0):
                alpha_p[hf] = alpha_p[hf] * alpha_r[hf]
                if const_expr(pending):
                    for j in cutlass.range_constexpr(self.dv // 8):
                        for cc in cutlass.range_constexpr(2):
                            acc_t[cc + 2 * hf + 4 * j] = acc_t[cc + 2 * hf + 4 * j] * alpha_r[hf]

    @cute.jit
    def softmax(self, regs, n, n_tiles, s_kv, qk, quad, first=False):
        """Scores of tile n -> online max, alpha, and the P bytes in the A-operand registers.
        first (compile-time): the first key tile (headroom takes its row max)."""
        self.codes(regs, n, n_tiles, s_kv, qk, quad, first)
        self.pack(regs)

    @cute.jit
    def codes(self, regs, n, n_tiles, s_kv, qk, quad, first=False):
        """Scores of tile n (in acc_s) -> online max, alpha, and each score's P code in place:
        direct-p a float whose low mantissa byte is the E4M3 byte (f16_bytes: t * 2^-24), fp8 the
        value 256 p. With headroom, after the first tile: the reference held, no max (pack checks).
        qk = sq * sk * c of this tile (exact product of powers of two and c)."""
        acc_s, m_run, l_run, alpha_r = regs.acc_s, regs.m_run, regs.l_run, regs.alpha_r
        if n == n_tiles - 1:
            # keys past s_kv do not exist: probability 0
            for j in cutlass.range_constexpr(TILE_N // 8):
                for cc in cutlass.range_constexpr(2):
                    if n * TILE_N + 8 * j + 2 * quad + cc >= s_kv:
                        for hf in cutlass.range_constexpr(2):
                            acc_s[cc + 2 * hf + 4 * j] = -Float32.inf
        for hf in cutlass.range_constexpr(2):
            if const_expr(self.headroom and not first):
                m_new = m_run[hf]
                alpha_r[hf] = Float32(1.0)  # pack's check moves the reference when it must
            else:
                mx = _row_half_max(acc_s, hf)  # row max of the raw scores
                m_old = m_run[hf]
                # max of fl(s * qk) = fl(max(s) * qk): qk > 0 and rounding is monotone
                m_new = cute.arch.fmax(m_old, mul_f32(mx, qk))
                if const_expr(self.headroom):  # the first tile: its max + headroom
                    m_new = fma_f32(m_new, 1.0, self.headroom / DIRECT_P_SLOPE)
                alpha_r[hf] = Float32(1.0)  # exactly 1 when the row max did not move
                if m_new > m_old:
                    alpha_r[hf] = ex2_approx(m_old - m_new)
                    l_run[hf] = l_run[hf] * alpha_r[hf]
                m_run[hf] = m_new
            if const_expr(self.direct):
                # NUMERICS: t = fma(s_raw, 8 qk, bias), bias = fl(120 - 8 m), byte = clamp(rne(t), 0, 120).
                # Computed 2^-7 scaled (exact: powers of two commute with rounding for normal
                # results; |t| < 2^-119 gives byte 0 either way): FFMA.SAT clamps to [0, 1] = t in
                # [0, 128] (NaN and -inf to 0), then + 1.5*2^16 rounds t/128 to a multiple of 2^-7,
                # i.e. t to an integer (rne), which lands in the low mantissa byte. The top clamp
                # at 120 is never needed: t <= 120 + 8 ulp(m) + ulp(120)/2 < 120.5 for |m| < 2^19.
                if const_expr(self.f16_bytes):
                    # the same t scaled by 2^-24 (exact as above; when 8 qk 2^-24 underflows,
                    # |s 8 qk| < 2^-77, so bias = 120 = t in both paths): pack's cvt.rn.relu
                    # to f16 rounds it to the integer rne(t) in the subnormal bits, 0 for t < 0
                    bias_s = fma_f32(m_new, -DIRECT_P_SLOPE, float(DIRECT_P_ONE)) * F16_UNIT
                    qk_s = qk * (DIRECT_P_SLOPE * F16_UNIT)
                    for j in cutlass.range_constexpr(TILE_N // 8):
                        for cc in cutlass.range_constexpr(2):
                            i = cc + 2 * hf + 4 * j
                            acc_s[i] = fma_f32(acc_s[i], qk_s, bias_s)
                else:
                    bias_s = fma_f32(m_new, -DIRECT_P_SLOPE, float(DIRECT_P_ONE)) * (1.0 / SAT_SPAN)
                    qk_s = qk * (DIRECT_P_SLOPE / SAT_SPAN)
                    for j in cutlass.range_constexpr(TILE_N // 8):
                        for cc in cutlass.range_constexpr(2):
                            i = cc + 2 * hf + 4 * j
                            acc_s[i] = fma_sat_f32(acc_s[i], qk_s, bias_s) + MAGIC_S
            else:
                lsum = Float32(0.0)
                bias = fma_f32(m_new, -1.0, LOG2_P_SCALE)  # fl(8 - m): p carries P's 256
                ps = []
                for j in cutlass.range_constexpr(TILE_N // 8):
                    for cc in cutlass.range_constexpr(2):
                        i = cc + 2 * hf + 4 * j
                        # 2^fl(s qk + 8 - m): NUMERICS allows ex2.approx's few ulp
                        p = ex2_approx(fma_f32(acc_s[i], qk, bias))
                        if const_expr(self.sum_tree):
                            ps.append(p)
                        else:
                            lsum = lsum + p
                        acc_s[i] = p
                if const_expr(self.sum_tree):
                    lsum = _tree(ps, lambda a, b: a + b)
                l_run[hf] = l_run[hf] + lsum

    @cute.jit
    def pack(self, regs):
        """The codes in acc_s -> E4M3 bytes in the PV wgmma's A registers (register order; the
        keys' order is SIGMA, matched by V^T's layout)."""
        acc_s, r_p32 = regs.acc_s, regs.r_p32
        if const_expr(self.headroom):
            self.pack_checked(regs)
            return
        for hf in cutlass.range_constexpr(2):
            for kb in cutlass.range_constexpr(TILE_N // 32):
                for g in cutlass.range_constexpr(2):
                    v = [acc_s[a % 2 + 2 * hf + 4 * (4 * kb + 2 * g + a // 2)] for a in range(4)]
                    if const_expr(self.f16_bytes):
                        r_p32[(0, hf, g), 0, kb] = pack_f16_low_bytes(v[0], v[1], v[2], v[3])
                    elif const_expr(self.direct):
                        r_p32[(0, hf, g), 0, kb] = pack_low_bytes(v[0], v[1], v[2], v[3])
                    else:
                        r_p32[(0, hf, g), 0, kb] = pack_e4m3x4(v[0], v[1], v[2], v[3])

    @cute.jit
    def pack_half(self, regs, hf):
        """Row half hf's codes -> its P words (f16_bytes). Returns its f16x2 code words (the
        halves' f16 bits: rne(t) for t < 2048) and their max.f16x2."""
        acc_s, r_p32 = regs.acc_s, regs.r_p32
        words = []
        for kb in cutlass.range_constexpr(TILE_N // 32):
            for g in cutlass.range_constexpr(2):
                v = [acc_s[a % 2 + 2 * hf + 4 * (4 * kb + 2 * g + a // 2)] for a in range(4)]
                lo = cvt_f16x2_relu(v[0], v[1])
                hi = cvt_f16x2_relu(v[2], v[3])
                r_p32[(0, hf, g), 0, kb] = low_bytes_of_halves(lo, hi)
                words.append((lo, hi))
        return words, _tree([max_f16x2(lo, hi) for lo, hi in words], max_f16x2)

    @cute.jit
    def pack_checked(self, regs):
        """headroom's pack: the P words, and whether some code of the warp's rows passed 126 (an
        f16 subnormal's bits are its integer code); if so, move_reference."""
        words0, top0 = self.pack_half(regs, 0)
        words1, top1 = self.pack_half(regs, 1)
        top = max_f16x2(top0, top1)
        passed = ((top & 0xFFFF) > DIRECT_P_TOP) | (((top >> 16) & 0xFFFF) > DIRECT_P_TOP)
        if cute.arch.vote_any_sync(passed):
            self.move_reference(regs, (words0, words1), (top0, top1))

    @cute.jit
    def move_reference(self, regs, words, tops):
        """reference.headroom_codes for the rows whose largest code is above 126: the reference
        moves by k / 8 so that code lands at 120 - headroom, the row's codes by -k, taken from the
        f16 code words the pack made (the scores are not needed again) in two exact HFMA2 steps:
        k's f16 rounding k_hi, then the rest k - k_hi (Sterbenz: exact for the codes near the
        top; codes far below stay below 0 either way)."""
        m_run, l_run, alpha_r, r_p32 = regs.m_run, regs.l_run, regs.alpha_r, regs.r_p32
        for hf in cutlass.range_constexpr(2):
            top = _quad_reduce(tops[hf], max_f16x2)
            t_max = f16x2_max_f32(top) * (1.0 / F16_UNIT)  # the row's largest code (exact)
            if t_max > DIRECT_P_TOP:
                k = fma_f32(t_max, 1.0, -float(DIRECT_P_ONE - self.headroom))  # an integer, exact
                m_old = m_run[hf]
                m_new = fma_f32(k, 1.0 / DIRECT_P_SLOPE, m_old)
                alpha_r[hf] = ex2_approx(m_old - m_new)
                l_run[hf] = l_run[hf] * alpha_r[hf]
                m_run[hf] = m_new
                k_hi = f16x2_max_f32(f16x2_splat(k * F16_UNIT))  # rne16(k), as a float
                neg_hi = f16x2_splat(-k_hi)
                neg_lo = f16x2_splat(fma_f32(k, -F16_UNIT, k_hi))  # exact: k_hi - k is f16-exact
                for i, (lo, hi) in enumerate(words[hf]):
                    kb, g = i // 2, i % 2
                    r_p32[(0, hf, g), 0, kb] = low_bytes_of_halves(
                        add_f16x2(add_f16x2(lo, neg_hi), neg_lo, relu=True),
                        add_f16x2(add_f16x2(hi, neg_hi), neg_lo, relu=True))
