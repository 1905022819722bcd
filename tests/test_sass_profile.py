"""scripts/sm90_sass_profile.py's library (wan_fp4/eval/sass_profile.py): SASS parsing and the
main-loop analysis on a hand-written listing, then the real sm90 kernel compiled on the CPU."""
from __future__ import annotations

import importlib.util
import re

import pytest

from wan_fp4.eval import sass_profile as sp

LISTING = """
        /*0000*/                   S2R R0, SR_TID.X ;                         /* 0x0000000000007919 */
        /*0010*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;              /* 0x0000000000007b1d */
        /*0020*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R0 ; /* 0x0 */
        /*0030*/              @!P0 BRA 0x100 ;                                /* 0x0 */
        /*0040*/                   QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR8], RZ, !UPT ; /* 0x0 */
        /*0050*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;            /* 0x0 */
        /*0060*/               @P1 BRA 0x90 ;                                 /* 0x0 */
        /*0070*/                   FMUL R2, R2, R3 ;                          /* 0x0 */
        /*0080*/                   FMUL R4, R4, R3 ;                          /* 0x0 */
        /*0090*/                   FFMA.SAT R5, R24, R6, R7 ;                 /* 0x0 */
        /*00a0*/                   FADD R5, R5, 98304 ;                       /* 0x0 */
        /*00b0*/                   PRMT R8, R5, 0x40, R9 ;                    /* 0x0 */
        /*00c0*/               @P2 BRA 0x20 ;                                 /* 0x0 */
        /*00d0*/                   EXIT ;                                     /* 0x0 */
        /*0100*/                   NANOSLEEP.SYNCS 0x989680 ;                 /* 0x0 */
        /*0110*/                   BRA 0x0 ;                                  /* 0x0 */
"""


def test_parse_and_main_loop_on_a_listing():
    instrs = sp.parse_sass(LISTING)
    assert [i.op for i in instrs[:3]] == ["S2R", "BAR.SYNC.DEFER_BLOCKING", "SYNCS.PHASECHK.TRANS64.TRYWAIT"]
    assert instrs[3].pred == "@!P0" and instrs[3].args == "0x100"
    loop = sp.main_loop(instrs)
    # the conditional back edge at 0xc0 closes the loop; the unconditional BRA 0x0 (a retry path) does not
    assert (loop.start, loop.end) == (0x20, 0xC0)
    assert loop.tensor_ops == {"QGMMA.64x128x32.F32.E4M3.E4M3": 1}
    assert loop.all_counts["FMUL"] == 2 and loop.steady_counts["FMUL"] == 0  # skipped by @P1 BRA 0x90
    assert loop.steady_counts["FFMA.SAT"] == 1 and loop.steady_counts["FFMA"] == 0
    assert loop.steady_counts["PRMT"] == 1 and loop.steady_counts["wgmma"] == 1
    assert [(lo, hi) for lo, hi, _ in loop.skipped] == [(0x70, 0x90)]


def test_no_wgmma_loop_is_an_error():
    with pytest.raises(ValueError, match="no loop with wgmma"):
        sp.main_loop(sp.parse_sass(LISTING.replace("QGMMA", "IMAD")))


def test_resources_line():
    line = "  REG:168 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:1300 TEXTURE:0"
    assert sp.resources(line) == {"reg": 168, "stack": 0, "shared_static": 1024, "local": 0}
    with pytest.raises(ValueError, match="resource"):
        sp.resources("nothing here")


def test_profile_of_the_compiled_sm90_kernel():
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("nvidia-cutlass-dsl is not installed")
    if sp.find_cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton) to disassemble the cubin")
    prof = sp.profile("direct-p", 128, f16_bytes=False, headroom=0)
    loop = prof["loop"]
    assert prof["spill_instrs"] == 0 and prof["resources"]["local"] == 0
    assert prof["tiles_per_iteration"] == 4  # the loop body handles a fold group of four key tiles
    # per tile: 4 QK k-steps (D=128) + 4 PV k-steps, PV N = 128 + 8 ones rows; one FFMA.SAT per score
    # on the fp32 P-byte path
    assert loop.steady_counts["wgmma"] == 32
    assert loop.tensor_ops == {"QGMMA.64x136x32.F32.E4M3.E4M3": 16, "QGMMA.64x128x32.F32.E4M3.E4M3": 16}
    assert loop.steady_counts["FFMA.SAT"] == 4 * 64
    assert prof["dynamic_smem"] is not None and prof["dynamic_smem"] > 64 * 128  # at least Q's tile
    assert "wgmma" in sp.table(prof)


def test_f16_bytes_p_path_is_one_ffma_half_an_f2fp_and_a_quarter_prmt_per_score():
    """f16_bytes (direct-p's default): per tile (64 scores per thread) 64 FFMA + 32 F2FP.RELU + 16 PRMT replace
    64 FFMA.SAT + 64 FADD + 48 PRMT; nothing else in the steady loop changes, no spills."""
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("nvidia-cutlass-dsl is not installed")
    if sp.find_cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton) to disassemble the cubin")
    # the long launches' kernel (without tail_rows, whose index decode adds uniform instructions)
    base = sp.profile("direct-p", 128, f16_bytes=False, headroom=0, tail_rows=False)["loop"].steady_counts
    prof = sp.profile("direct-p", 128, headroom=0, tail_rows=False)  # the default's P path, under the running max
    new, n = prof["loop"].steady_counts, prof["tiles_per_iteration"]
    assert prof["spill_instrs"] == 0
    assert new.get("FFMA.SAT", 0) == 0 and base["FFMA.SAT"] == n * 64
    assert new["FFMA"] - base["FFMA"] == n * 64
    assert new["F2F/F2FP/I2F"] - base.get("F2F/F2FP/I2F", 0) == n * 32
    assert base["PRMT"] - new["PRMT"] == n * 32 and base["FADD"] - new["FADD"] == n * 64
    assert sum(base.values()) - sum(new.values()) == n * 64


def _schedule(instrs, lo=0, hi=None) -> str:
    """The consumer's synchronisation in program order, one letter each: S/A a 256-thread named
    barrier wait/arrival (the turns; lower case when predicated), P a 128-thread barrier (the
    epilogue's: the warp group's output rows in shared memory), W a wgmma batch's fence, Q its
    wgmmas (one letter per run), D a wait for wgmma completion."""
    out = []
    for i in instrs:
        if i.addr < lo or (hi is not None and i.addr > hi):
            continue
        if i.base == "BAR" and i.args.endswith("0x100"):
            tok = {"BAR.SYNC.DEFER_BLOCKING": "S", "BAR.ARV": "A"}[i.op]
            out.append(tok.lower() if i.pred else tok)
        elif i.base == "BAR" and i.args.endswith("0x80"):
            out.append("P")
        elif i.op == "WARPGROUP.ARRIVE":
            out.append("W")
        elif i.op.startswith("WARPGROUP.DEPBAR"):
            out.append("D")
        elif i.base in sp.TENSOR_OPS and out[-1:] != ["Q"]:
            out.append("Q")
    return "".join(out)


@pytest.mark.parametrize("pingpong", [1, 2])
def test_two_warp_groups_take_turns_by_a_ring(pingpong):
    """The ping-pong's ring: token in and the first turn, QK(0),
    then one turn per step (PV(n) + QK(n + 1)), the last PV alone, its turn ended by end_turns, then
    the epilogue's barrier."""
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("nvidia-cutlass-dsl is not installed")
    if sp.find_cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton) to disassemble the cubin")
    # Q's codes from the pre-pass: made in the kernel (quant_q), two named barriers of their own lead
    prof = sp.profile("direct-p", 128, pingpong=pingpong, quant_q=0)
    qk0, step = ("WQAD", "SWQWQADD") if pingpong == 1 else ("WQDA", "SWQWQDDA")
    assert re.fullmatch(f"aS{qk0}({step})+(SWQD)+AsP", _schedule(prof["instrs"]))
    assert prof["spill_instrs"] == 0


@pytest.mark.parametrize("mode,head_dim,cfg", [("direct-p", 128, {}), ("direct-p", 64, {}),
                                               ("direct-p", 128, {"intra": False}),
                                               ("fp8", 128, {"split_tail": False})])  # the loop, not the tail split
def test_fold_4_runs_four_tiles_per_iteration_and_promotes_half_as_often(mode, head_dim, cfg):
    """fold=4 (the default) against fold=2: the loop body holds a fold group of four key tiles; per
    tile the same tensor products, and the promote's FFMA (one per acc_o element, dv / 2 per
    thread) once per four tiles instead of two, so dv / 8 fewer FFMA per tile (ptxas may move an
    odd FFMA in or out of the loop); direct-p keeps everything in registers. (fp8 with intra,
    its default, already spills a few registers at fold=2; scripts/sm90_sass_profile.py counts them.)"""
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("nvidia-cutlass-dsl is not installed")
    if sp.find_cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton) to disassemble the cubin")
    base = sp.profile(mode, head_dim, **cfg, fold=2, tail_rows=False)
    prof = sp.profile(mode, head_dim, **cfg, fold=4, tail_rows=False)
    assert base["tiles_per_iteration"] == 2 and prof["tiles_per_iteration"] == 4
    old, new = base["loop"], prof["loop"]
    assert {op: 2 * n for op, n in old.tensor_ops.items()} == new.tensor_ops
    dv = head_dim + 8 if mode == "direct-p" else head_dim
    saved = old.steady_counts["FFMA"] / 2 - new.steady_counts["FFMA"] / 4
    assert dv / 8 - 1 <= saved <= dv / 8
    for cls in ("FMUL", "FADD", "FMNMX", "MUFU.EX2", "PRMT", "SHFL", "F2F/F2FP/I2F"):
        assert new.steady_counts.get(cls, 0) == 2 * old.steady_counts.get(cls, 0), cls
    if mode == "direct-p":
        assert prof["spill_instrs"] == 0 and prof["resources"]["local"] == 0 and prof["resources"]["stack"] == 0


def test_headroom_leaves_no_row_max_in_the_steady_loop():
    """headroom (direct-p's default; codes held, reference.headroom_codes) against the running max
    (headroom 0): the steady loop has no FMNMX and no shuffle, the check is HMNMX2 over the pack's
    f16x2 words, the move sits in skipped blocks; no spills."""
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("nvidia-cutlass-dsl is not installed")
    if sp.find_cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton) to disassemble the cubin")
    base = sp.profile("direct-p", 128, headroom=0, tail_rows=False)["loop"].steady_counts
    prof = sp.profile("direct-p", 128, tail_rows=False)
    new, n = prof["loop"].steady_counts, prof["tiles_per_iteration"]
    assert prof["spill_instrs"] == 0
    assert base["FMNMX"] == n * 68 and new.get("FMNMX", 0) == 0 and new.get("SHFL", 0) == 0
    assert new["FFMA"] == base["FFMA"] and new["F2F/F2FP/I2F"] == base["F2F/F2FP/I2F"]
    assert sum(new.values()) < sum(base.values()) - n * 40
