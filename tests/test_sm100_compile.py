"""The sm100a Direct-P FP4 kernel, checked without a GPU: it compiles for sm_100a, its PTX has the
instructions the design relies on, and the host-side operand packing is exact.

Needs nvidia-cutlass-dsl (compiles sm_100a on a CPU-only machine); skipped without it.
"""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import pytest
import torch

from wan_fp4 import formats, reference
from wan_fp4.modes import AFFINE_WAN, LOG2_6, NEAREST_POW2_BIAS, P_EXP_MAX, P_EXP_MIN, FP4Params
from wan_fp4.kernels import sm100
from wan_fp4.kernels.sm100 import pack

cutlass = pytest.importorskip("cutlass")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> tuple[str, bytes]:
    from wan_fp4.kernels.sm100.compile import compile_artifacts

    text, cubin = compile_artifacts(str(tmp_path_factory.mktemp("sm100a")))
    assert cubin[:4] == b"\x7fELF", "the cubin is not an ELF image"
    return text, cubin


@pytest.fixture(scope="module")
def ptx(artifacts) -> str:
    return artifacts[0]


def _nvdisasm():
    """nvdisasm from $NVDISASM, PATH, or the pip package nvidia-cuda-nvdisasm; None if absent."""
    import glob
    import shutil

    cands = [os.environ.get("NVDISASM"), shutil.which("nvdisasm")]
    cands += sorted(glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "nvidia", "*", "bin", "nvdisasm")))
    return next((c for c in cands if c and os.access(c, os.X_OK)), None)


def test_sass_has_no_spills_no_ex2(artifacts, tmp_path):
    # What ptxas made of it (needs nvdisasm: `pip install nvidia-cuda-nvdisasm` or NVDISASM=...):
    # no local-memory spills, no MUFU.EX2, the packed FMAs survive, 8 tcgen05 MMAs (2 stages x
    # (2 QK + 2 PV)).
    tool = _nvdisasm()
    if tool is None:
        pytest.skip("nvdisasm not found (pip install nvidia-cuda-nvdisasm, or set NVDISASM)")
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(artifacts[1])
    sass = subprocess.run([tool, "-c", str(cubin)], capture_output=True, text=True, timeout=300).stdout
    assert "FFMA2" in sass and len(re.findall(r"\bFFMA2\b", sass)) == 2 * 64
    assert not re.search(r"\b(STL|LDL)\b", sass), "register spills to local memory"
    assert "MUFU.EX2" not in sass
    assert len(re.findall(r"\bUTC\w*MMA\b", sass)) == 8


# ----------------------------------------------------------------------------------- PTX checks
def test_targets_sm100a(ptx):
    assert re.search(r"^\.target sm_100a\b", ptx, re.M)
    assert re.search(r"\.reqntid 448, 1, 1", ptx)  # 14 warps: the role split


def test_qk_is_block_scaled_nvfp4(ptx):
    # S = Q K^T: both operands from shared memory, E4M3 scales per 16 values (block16).
    qk = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::mxf4nvf4\.block_scale\.block16\S*\s+"
                    r"\[%r\d+\], %rd\d+, %rd\d+", ptx)
    assert len(qk) == 4, "expected two K64 QK MMAs (D = 128) per query stage, two stages"


def test_pv_is_block_scaled_mxfp4_with_p_from_tmem(ptx):
    # O += P V: P (operand A) from TMEM, E8M0 scales per 32 keys (block32).
    pv = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::mxf4nvf4\.block_scale\.block32\S*\s+"
                    r"\[%r\d+\], \[%r\d+\], %rd\d+", ptx)
    assert len(pv) == 4, "expected two K64 PV MMAs with A in TMEM (128 keys per tile) per stage"


def test_allocates_all_512_tmem_columns(ptx):
    m = re.search(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32\s+\[%r\d+\], (%r\d+);", ptx)
    assert m, "no tcgen05.alloc"
    assert re.search(rf"mov\.b32\s+{re.escape(m.group(1))}, 512;", ptx), "alloc is not 512 columns"
    assert "tcgen05.dealloc" in ptx and "tcgen05.relinquish_alloc_permit" in ptx


def test_direct_p_map_is_packed_fma_then_native_e2m1(ptx):
    # 128 keys per tile: 64 packed FMAs and 64 two-value conversions, in each softmax WG.
    assert len(re.findall(r"\bfma\.rn\.f32x2\b", ptx)) == 2 * 64
    # .relu is max(y, 0) of the numerics, folded into the conversion.
    assert len(re.findall(r"\bcvt\.rn\.satfinite(?:\.relu)?\.e2m1x2\.f32\b", ptx)) == 2 * 64
    assert "ex2.approx" not in ptx, "the fast policy has no exp"


def _tmem_columns(ptx):
    """{register: TMEM column} for the addresses the kernel derives from the tcgen05.alloc base
    (add.s32 r, base, C), with the base itself at column 0. Bit 31 of C is the DSL's sub-column
    byte select of a scale-factor page (K64 block 1); bits 15:0 are the column."""
    alloc = re.search(r"tcgen05\.alloc\S*\s+\[(%r\d+)\]", ptx)
    base = re.search(rf"ld\.shared\.b32\s+(%r\d+), \[{re.escape(alloc.group(1))}\];", ptx[alloc.end():]).group(1)
    cols = {base: 0}
    for r, b, c in re.findall(r"add\.s32\s+(%r\d+), (%r\d+), (-?\d+);", ptx):
        if b == base:
            cols[r] = (int(c) & 0xFFFFFFFF) & 0xFFFF
    return cols


def test_tmem_column_map_in_the_mmas(ptx):
    # Every tcgen05.mma and tcgen05.cp address resolves to the column map of tmem_plan: QK of
    # stage b writes S_b and reads its scale factors from the other bank's columns 16-31; PV of
    # stage b accumulates into its own output bank O_b (two O banks), reading P (S_b + 0..15)
    # and its scale factors (S_b + 32..39).
    from wan_fp4.kernels.sm100 import tmem_plan as tp

    cols = _tmem_columns(ptx)
    qk = re.findall(r"tcgen05\.mma\S*block16\S*\s+\[(%r\d+)\], %rd\d+, %rd\d+, %r\d+, \[(%r\d+)\], \[(%r\d+)\]", ptx)
    pv = re.findall(r"tcgen05\.mma\S*block32\S*\s+\[(%r\d+)\], \[(%r\d+)\], %rd\d+, %r\d+, \[(%r\d+)\], \[(%r\d+)\]", ptx)
    assert len(qk) == 4 and len(pv) == 4

    def inside(c, base, region):
        return base + region[0] <= c < base + region[0] + region[1]

    seen_qk, seen_pv = set(), set()
    for d, sfa, sfb in qk:
        b = tp.S_BANK.index(cols[d])  # D: a score bank
        other = tp.S_BANK[1 - b]
        assert inside(cols[sfa], other, tp.QK_SF) and inside(cols[sfb], other, tp.QK_SF), (b, cols[sfa], cols[sfb])
        assert cols[sfa] < cols[sfb]  # SFQ then SFK
        seen_qk.add(b)
    for d, a, sfa, sfb in pv:
        b = tp.O_BANK.index(cols[d])  # D: an output bank
        assert inside(cols[a], tp.S_BANK[b], tp.P_CODES), (b, cols[a])  # P codes of the same stage
        assert inside(cols[sfa], tp.S_BANK[b], tp.PV_SF) and inside(cols[sfb], tp.S_BANK[b], tp.PV_SF)
        assert cols[sfa] < cols[sfb]  # SFP then SFV
        seen_pv.add(b)
    assert seen_qk == seen_pv == {0, 1}, "both stages: two score banks and two output banks"
    pages = [(tp.S_BANK[b], r) for b in (0, 1) for r in (tp.QK_SF, tp.PV_SF)]
    for dst in re.findall(r"tcgen05\.cp\S*\s+\[(%r\d+)\]", ptx):
        if dst in cols:  # scale-factor copies land in a scale-factor page
            assert any(inside(cols[dst], base, r) for base, r in pages), cols[dst]


def test_tmem_column_lifetimes():
    # The lifetime model of tmem_plan on the kernel's issue order: no column is overwritten
    # while a value in it is still needed, every read follows its write through a barrier (or
    # an ordering the PTX ISA gives, plus the documented MMA_ISSUE_ORDER), and the waits have
    # no cycle (no deadlock).
    from wan_fp4.kernels.sm100 import tmem_plan as tp

    assume = (tp.MMA_ISSUE_ORDER,)
    for kv_tiles in (1, 2, 3, 5):
        assert tp.check_schedule(tp.schedule(kv_tiles, work_items=3), assume) == []
    # the model catches what the barriers and the map prevent
    assert any("SFQK" in p for p in tp.check_schedule(tp.schedule(2, skip_early_retire_wait=True), assume))
    assert tp.check_schedule(tp.schedule(2, qk_sf=(8, 16)), assume)  # over the P codes
    assert tp.check_schedule(tp.schedule(2, pv_sf=(12, 8)), assume)  # over the P codes
    assert tp.check_schedule(tp.schedule(2, qk_sf=(32, 16)), assume)  # over scores not yet read
    # past the PV scale page, with a later early-retire point: fine
    assert tp.check_schedule(tp.schedule(2, qk_sf=(40, 16), early_retire_cols=64), assume) == []
    # the map: two S banks, two O banks, all 512 columns, scale pages inside retired scores
    assert sorted(tp.S_BANK + tp.O_BANK) == [0, 128, 256, 384] and tp.TMEM_COLS == 512
    assert tp.P_CODES[1] <= tp.QK_SF[0] and tp.QK_SF[0] + tp.QK_SF[1] <= tp.EARLY_RETIRE_COLS <= tp.PV_SF[0]


_PV_QK_REUSE = re.compile(r"QK\.(\d)\.w\d+\.n\d+ writes S\.\1\.\S+ \[\d+,\d+\) while "
                          r"PV\.\1\.w\d+\.n\d+ still needs (P|SFPV)\.\1\.\S+ \[\d+,\d+\)")


def test_ordering_model_uses_only_isa_guarantees():
    # Without assumptions the model orders tensor-core ops only as the PTX ISA does (same
    # accumulator and shape MMA -> MMA; cp -> MMA; commit + wait), so the one pattern that relies
    # on issue order shows up: QK_b overwriting bank S_b while the PV_b issued before it may still
    # read P codes and P/V scales there (within a work item and across work items).
    from wan_fp4.kernels.sm100 import tmem_plan as tp

    for kv_tiles in (1, 2, 3, 5):
        events = tp.schedule(kv_tiles, work_items=3)
        problems = tp.check_schedule(events)
        assert problems
        assert all(_PV_QK_REUSE.fullmatch(p) for p in problems), problems
        assert {p.split()[-2].split(".")[0] for p in problems} == {"P", "SFPV"}
        assert any(".w1.n0 writes" in p for p in problems)  # the next work item's first QK
        assert tp.check_schedule(events, assume=(tp.MMA_ISSUE_ORDER,)) == []
        # the kernel's debug option (commit + wait after every PV) needs no assumption
        assert tp.check_schedule(tp.schedule(kv_tiles, work_items=3, pv_qk_sync=True)) == []
    # a hazard the assumption does not cover: a tcgen05.cp (the QK scale factors, moved onto the
    # other bank's PV scale page) overwriting what an earlier-issued MMA still reads
    bad = tp.check_schedule(tp.schedule(2, qk_sf=(32, 8), early_retire_cols=64), assume=(tp.MMA_ISSUE_ORDER,))
    assert any(re.match(r"cpQK\.\S+ writes \S+ \[\d+,\d+\) while PV\.", p) for p in bad), bad
    assert tp.check_schedule(tp.schedule(2, qk_sf=(32, 8), early_retire_cols=64, pv_qk_sync=True))
    with pytest.raises(ValueError, match="unknown assumptions"):
        tp.check_schedule(tp.schedule(1), assume=("everything-in-order",))


def _pv_then_qk_syncs(ptx):
    """For each PV MMA group followed by a QK MMA in the PTX text: whether some mbarrier gets a
    tcgen05.commit and then an mbarrier wait between the two."""
    out, state = [], None
    for line in ptx.splitlines():
        if "tcgen05.mma" in line and "block32" in line:  # PV: MXFP4, scale vector 32
            state = state if state is not None and not state["closed"] else {"commits": set(), "synced": False, "closed": False}
        elif state is None:
            continue
        elif "tcgen05.commit" in line:
            state["commits"].add(re.search(r"\[([^\]]+)\]", line).group(1))
        elif "mbarrier.try_wait" in line:
            if re.search(r"\[([^\]]+)\]", line).group(1) in state["commits"]:
                state["synced"] = True
        elif "tcgen05.mma" in line and "block16" in line and not state["closed"]:  # QK
            out.append(state["synced"])
            state["closed"] = True
    return out


def test_pv_qk_sync_debug_option_waits_between_pv_and_qk(ptx, tmp_path):
    from wan_fp4.kernels.sm100.compile import compile_artifacts

    dbg, _ = compile_artifacts(str(tmp_path / "dbg"), pv_qk_sync=True)
    assert _pv_then_qk_syncs(dbg) == [True, True]  # both stages
    assert _pv_then_qk_syncs(ptx) == [False, False]  # the default (prebuilt) kernel does not wait
    assert dbg.count("tcgen05.commit") == ptx.count("tcgen05.commit") + 2
    assert dbg.count("mbarrier.try_wait") == ptx.count("mbarrier.try_wait") + 2
    from wan_fp4.kernels.sm100.launch import launch

    with pytest.raises(ValueError, match="never prebuilt"):
        launch(None, None, None, None, prebuilt=True, pv_qk_sync=True)


def test_global_addressing_is_64_bit(ptx):
    # O (B, Sq, H, 128) BF16 passes 2^31 elements at Wan 720p sizes from batch 6: its stores
    # (and the L / m accesses) must not contain a 32-bit product of an index with a runtime
    # stride. The grid is persistent, so the batch index is the work counter divided by runtime
    # sizes (quotients and remainders are bounded by their dividend, not flagged); the row and
    # batch strides come from the host as 64-bit values and are multiplied in 64 bits.
    from ptx_addressing import AddressAudit, global_accesses

    audit = AddressAudit(ptx, index=())
    accesses = global_accesses(audit.instrs)
    o_stores = [a for a in accesses if a.op.startswith("st.global.v4")]
    assert len(o_stores) == 2 * 128 * 2 // 16  # two stages, 256-byte rows in 16-byte stores
    for a in accesses:
        bad = audit.narrow_products(a)
        assert not bad, f"{a.text}: 32-bit products in its address: {[b.text for b in bad]}"
    for a in o_stores:
        assert len(audit.wide_param_products(a)) >= 2, a.text  # row and batch offsets


def test_swizzled_operands_are_1024_byte_aligned(ptx):
    # Q, K and V^T (64-byte swizzled MMA operands) land at shared-memory offsets that are
    # multiples of 1024 (every stage), read off the TMA destinations in the PTX; the kernel's
    # dynamic shared memory itself is 1024-aligned.
    import inspect

    from ptx_addressing import AddressAudit, SmemOffsets
    from wan_fp4.kernels.sm100.kernel import DirectPFP4Sm100

    assert ".extern .shared .align 1024 .b8 __dynamic_shmem__0[]" in ptx
    params = [p for p in inspect.signature(DirectPFP4Sm100.kernel).parameters if p != "self"]
    operand = {params.index(name): name for name in ("tma_q", "tma_k", "tma_vt")}
    audit = AddressAudit(ptx, index=())
    smem = SmemOffsets(audit, 1024)
    seen = []
    for ins in audit.instrs:
        if not ins.op.startswith("cp.async.bulk.tensor"):
            continue
        desc = re.search(r"\], \[(%rd\d+)", ins.text).group(1)
        names = [re.search(r"_param_(\d+)\b", c.text) for c in audit.chain(desc)]
        idx = {int(m.group(1)) for m in names if m}
        assert len(idx) == 1, ins.text
        which = operand.get(idx.pop())
        if which is None:
            continue  # scale factors: not swizzled
        seen.append(which)
        assert smem.of_access(ins) == (True, 0), f"{which} TMA destination not 1024-aligned: {ins.text}"
    assert sorted(seen) == ["tma_k", "tma_q", "tma_q", "tma_vt"]  # two Q tiles, one K and one V^T copy


def test_epilogue_divides_exactly(ptx):
    # O = acc / fl(6 L) correctly rounded (div.rn.f32), as the reference divides: one division
    # per output element a thread stores (128 per row, two stages); no approximate reciprocal.
    assert ptx.count("div.rn.f32") == 2 * 128
    assert "rcp.approx" not in ptx


def test_guard_row_reference_reaches_the_p_map(ptx):
    # The guard's m is loaded once per row and work item (ld.global, else 0 when the guard is
    # off) and feeds both fma(-m, c, log2 6) (qb) and fl(max_B s - m) (the block exponent g)
    # in each softmax WG; there is still no ex2 (checked above).
    regs = re.findall(r"neg\.f32 nm, (%r\d+);\s*\nfma\.rn\.f32 %r\d+, nm, %r\d+, %r\d+;", ptx)
    assert len(regs) == 2, "expected one row_offset fma(-m, c, log2 6) per softmax WG"
    for r in regs:
        r_ = re.escape(r)
        assert re.search(rf"ld\.global(?:\.\w+)*\.b32\s+{r_}, \[%rd\d+(?:\+\d+)?\];", ptx), f"m ({r}) not loaded"
        assert re.search(rf"mov\.b32\s+{r_}, 0f00000000;", ptx), f"m ({r}) has no shiftless 0"
        assert len(re.findall(rf"sub\.rn\.f32 g, %r\d+, {r_};", ptx)) == 4, "g = fl(max_B s - m) per block"
        defs = re.findall(rf"^\s*(\S+)\s+{r_},", ptx, re.M)
        assert sorted(defs) == ["ld.global.b32", "mov.b32"], defs  # nothing else writes m


def test_scale_factors_move_to_tmem(ptx):
    assert ptx.count("tcgen05.cp.cta_group::1.32x128b.warpx4") >= 8  # SFQ, SFK, SFV, SFP per stage
    assert "tcgen05.st.sync.aligned.32x32b.x16.b32" in ptx  # P codes: 16 words per row
    assert "cp.async.bulk.tensor" in ptx  # TMA loads
    assert ".local" not in ptx


def test_cross_thread_tmem_ordering_is_fenced(ptx):
    # TMEM written by one role and read by another (P, S, O) is ordered by mbarriers plus the
    # tcgen05 fences around them, and every tcgen05.ld is waited for before use.
    assert ptx.count("tcgen05.fence::before_thread_sync") >= 3
    assert ptx.count("tcgen05.fence::after_thread_sync") >= 5
    assert ptx.count("tcgen05.wait::ld") >= 3 and ptx.count("tcgen05.wait::st") >= 2


# ------------------------------------------------------------------------------- host side
def test_is_supported_false_on_cpu():
    q = torch.zeros(1, 128, 2, 128, dtype=torch.bfloat16)
    ok, why = sm100.is_supported(q, q, q, "direct-p-fp4")
    assert not ok and "cpu" in why.lower()
    ok, why = sm100.is_supported(q, q, q, "fp8")
    assert not ok and "fp8" in why
    # the guard is implemented: on CPU the only objection is the device
    ok, why = sm100.is_supported(q, q, q, "direct-p-fp4", FP4Params(guard_margin=110.0))
    assert not ok and "cpu" in why.lower() and "guard" not in why


def test_sm100_attention_refuses_cpu():
    q = torch.zeros(1, 128, 2, 128)
    with pytest.raises(RuntimeError, match="cannot run here"):
        sm100.sm100_attention(q, q, q)


def test_fp4_nibble_packing_round_trips():
    codes = torch.randint(0, 16, (3, 5, 64), dtype=torch.uint8)
    packed = pack.pack_fp4(codes)
    assert packed.shape == (3, 5, 32)
    assert torch.equal(packed[..., 0] & 0xF, codes[..., 0])  # element 0 in the low nibble
    assert torch.equal(pack.unpack_fp4(packed), codes)
    with pytest.raises(ValueError, match="even"):
        pack.pack_fp4(codes[..., :3])


def test_operand_packing_is_exactly_formats():
    torch.manual_seed(0)
    b, sq, skv, h = 2, 200, 77, 3
    q = torch.randn(b, sq, h, 128, dtype=torch.bfloat16)
    k = torch.randn(b, skv, h, 128, dtype=torch.bfloat16) * 3
    v = torch.randn(b, skv, h, 128, dtype=torch.bfloat16)
    ops = pack.prepare_operands(q, k, v)
    assert (ops.sq_pad, ops.skv_pad) == (256, 128)

    for x, codes, sf, s_pad in ((q, ops.q, ops.sfq, ops.sq_pad), (k, ops.k, ops.sfk, ops.skv_pad)):
        nv = formats.nvfp4_quantize_qk(x)
        s = x.shape[1]
        got = pack.unpack_fp4(codes).view(b, h, s_pad, 128)
        assert torch.equal(got[:, :, :s], nv.codes.permute(0, 2, 1, 3))
        assert not got[:, :, s:].any()
        scales = pack.unswizzle_sf(sf, b * h, s_pad, 8).view(b, h, s_pad, 8)
        pair = nv.scales.permute(0, 2, 1, 3)
        assert torch.equal(scales[:, :, :s, :4], pair) and torch.equal(scales[:, :, :s, 4:], pair)
        assert not scales[:, :, s:].any()

    mx = formats.mxfp4_quantize_v(v)
    vt = pack.unpack_fp4(ops.vt).view(b, h, 128, ops.skv_pad)
    assert torch.equal(vt[..., : mx.codes.shape[1]], mx.codes.permute(0, 2, 3, 1))
    assert not vt[..., mx.codes.shape[1]:].any()
    sfv = pack.unswizzle_sf(ops.sfv, b * h, 128, ops.skv_pad // 32).view(b, h, 128, -1)
    assert torch.equal(sfv[..., : mx.scales.shape[1]], mx.scales.permute(0, 2, 3, 1))


@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_operand_packing_refuses_non_finite_inputs_naming_the_tensor(name):
    """NaN or inf would become a NaN scale factor (NaN rows) on the GPU: the reference's error."""
    x = {n: torch.randn(1, 130, 2, 128) for n in ("q", "k", "v")}
    x[name][0, 129, 1, 3] = float("nan") if name != "k" else float("inf")
    with pytest.raises(ValueError, match=rf"^{name} contains NaN or inf"):
        pack.prepare_operands(x["q"], x["k"], x["v"])


def test_launch_args_match_the_reference_constants():
    q = torch.zeros(1, 300, 2, 128)
    ops = pack.prepare_operands(q, q, q)
    args = sm100.build_launch_args(ops, 1 / math.sqrt(128), FP4Params(), num_sms=148)
    c = reference.log2_scale(1 / math.sqrt(128))
    assert args.qk_log2 == c
    a = torch.tensor(AFFINE_WAN[0], dtype=torch.float32)
    assert args.affine_ac == (a * torch.tensor(c, dtype=torch.float32)).item()
    assert args.num_ctas == 2 * 2  # two query-tile pairs (300 rows) x two heads < 148 SMs
    with pytest.raises(ValueError, match="scale"):
        sm100.build_launch_args(ops, 0.0, FP4Params(), 148)


# ------------------------------------------------- layouts checked against the DSL's own
def test_scale_factor_swizzle_matches_cute_layout():
    from wan_fp4.kernels.sm100.dsl_layouts import sf_layout_offsets

    rows, cols, batch, vec = 256, 8, 2, 16
    coords = [(m, kb, l) for l in range(batch) for m in range(0, rows, 7) for kb in range(cols)]
    dsl = sf_layout_offsets((rows, cols * vec, batch), vec, [(m, kb * vec, l) for m, kb, l in coords])
    ours = pack.sf_offsets(rows, cols, batch)
    assert [ours[l, m, kb].item() for m, kb, l in coords] == dsl


def test_p_scale_word_matches_cute_atom():
    # The softmax WGs write row m's four E8M0 bytes as word 4*(m % 32) + m // 32 (kernel.py).
    from wan_fp4.kernels.sm100.dsl_layouts import sf_atom_offsets

    coords = [(m, 32 * kb) for m in range(128) for kb in range(4)]
    dsl = sf_atom_offsets(32, coords)
    assert dsl == [4 * (4 * (m % 32) + m // 32) + kb for m in range(128) for kb in range(4)]


# -------------------------------------------------------------------------------------- AOT
# The prebuilt sm100a kernel (wan_fp4/kernels/prebuilt/sm100a, loaded by sm100/aot.py through the
# general mechanism in wan_fp4/kernels/aot.py) is checked here up to the launch: the shim links,
# needs only libc, its symbols resolve and its signature is what launch.py passes, the loader
# refuses stale artifacts and falls back to JIT. Launching it needs a Blackwell GPU (none here):
# `wan-fp4 check --kernels sm100-cute` (scripts/verify_sm100.py) on a B200/GB200 runs it (WAN_FP4_SM100_PREBUILT=0 runs the JIT kernel).
REBUILD = "python scripts/build_prebuilt.py --only sm100"


def _copy_artifacts(dst, source_hash=None):
    """The committed .h/.o in dst, with a manifest naming source_hash (default: the committed one)."""
    import json
    import shutil

    from wan_fp4.kernels.sm100 import aot as sm100_aot

    src = sm100_aot.PREBUILT.directory
    for ext in (".h", ".o"):
        shutil.copy(src / f"{sm100_aot.NAME}{ext}", dst / f"{sm100_aot.NAME}{ext}")
    man = json.loads((src / "manifest.json").read_text())
    if source_hash is not None:
        man["source_hash"] = source_hash
    (dst / "manifest.json").write_text(json.dumps(man))
    return dst


def test_aot_export(tmp_path):
    from wan_fp4.kernels import aot
    from wan_fp4.kernels.sm100 import aot as sm100_aot

    out = subprocess.run([sys.executable, "-m", "wan_fp4.kernels.sm100.aot", str(tmp_path)],
                         capture_output=True, text=True, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stderr[-2000:]
    header = (tmp_path / "wan_fp4_direct_p_fp4_sm100a.h").read_text()
    assert "cute_dsl_wan_fp4_direct_p_fp4_sm100a_wrapper" in header
    assert (tmp_path / "wan_fp4_direct_p_fp4_sm100a.o").read_bytes()[:4] == b"\x7fELF"
    # a fresh export has the committed wrapper signature, which is what launch.py passes
    committed = (sm100_aot.PREBUILT.directory / f"{sm100_aot.NAME}.h").read_text()
    sig = [t for t, _ in aot.wrapper_signature(header, sm100_aot.NAME)]
    assert sig == [t for t, _ in aot.wrapper_signature(committed, sm100_aot.NAME)] == list(sm100_aot.SIGNATURE)


def test_prebuilt_manifest_matches_kernel_sources():
    """CI catches a kernel edit without a rebuild (the loader would ignore the stale artifact)."""
    from wan_fp4.kernels.sm100 import aot as sm100_aot

    pb = sm100_aot.PREBUILT
    man = pb.read_manifest()
    assert man is not None, f"no {pb.directory}/manifest.json: run `{REBUILD}` and commit the .h/.o/manifest"
    assert man["source_hash"] == pb.source_hash(), (
        f"the prebuilt sm100a kernel was built from other sources ({man['source_hash']} != {pb.source_hash()}): "
        f"run `{REBUILD}` and commit wan_fp4/kernels/prebuilt/sm100a/*.h, *.o and manifest.json")
    assert man["arch"] == "sm_100a" and sm100_aot.NAME in man["kernels"]
    assert pb.check(sm100_aot.NAME) is None
    for ext in (".h", ".o"):
        assert (pb.directory / f"{sm100_aot.NAME}{ext}").is_file(), f"run `{REBUILD}`"


def test_prebuilt_shim_links_on_first_use_and_resolves(tmp_path, monkeypatch, shim_toolchain):
    """First use links the shim from the committed .o into the cache; the .so needs only libc; both
    shim symbols resolve by ctypes; the signature is the one launch.py packs."""
    import dataclasses

    from wan_fp4.kernels import aot
    from wan_fp4.kernels.sm100 import aot as sm100_aot
    from wan_fp4.kernels.sm100.launch import scalar_args

    monkeypatch.setenv("WAN_FP4_CACHE", str(tmp_path / "cache"))
    pb = dataclasses.replace(sm100_aot.PREBUILT, directory=_copy_artifacts(tmp_path))
    so = pb.find(sm100_aot.NAME)
    assert so == pb.cache_dir(pb.source_hash()) / f"lib{sm100_aot.NAME}.so"
    assert so.is_relative_to(tmp_path / "cache" / "sm100a")
    assert pb.find(sm100_aot.NAME, build=False) == so  # found again without relinking
    ldd = subprocess.run(["ldd", str(so)], capture_output=True, text=True).stdout
    for dep in ("libcudart", "libcuda.so", "cute_dsl", "cutlass", "libnvrtc"):
        assert dep not in ldd, f"{so.name} depends on {dep}:\n{ldd}"
    shim = aot.bind(so, sm100_aot.NAME)
    assert callable(shim.load) and callable(shim.run)
    assert shim.signature == sm100_aot.SIGNATURE
    # launch.py passes 8 pointers, then scalar_args(args), then the stream handle
    q = torch.zeros(1, 300, 2, 128)
    args = sm100.build_launch_args(pack.prepare_operands(q, q, q), 1 / math.sqrt(128), FP4Params(), 148)
    kinds = {int: ("int32_t",), float: ("float",)}
    assert [k for a in scalar_args(args) for k in kinds[type(a)]] == list(sm100_aot.SIGNATURE[9:-1])
    if not torch.cuda.is_available():
        # everything up to the launch: loading the module needs a driver, so it reports an error
        # (and the launcher logs it and returns None: JIT)
        assert shim.load() != 0
        assert pb.launcher(sm100_aot.NAME, expect=sm100_aot.SIGNATURE) is None


def test_prebuilt_refused_when_sources_changed(tmp_path, monkeypatch, caplog):
    """A manifest hash other than the sources' makes the loader refuse the artifact (even with a
    linked .so next to it) and log why once; sm100_attention then JIT-compiles."""
    import dataclasses
    import logging

    from wan_fp4.kernels.sm100 import aot as sm100_aot

    monkeypatch.setenv("WAN_FP4_CACHE", str(tmp_path / "cache"))
    d = _copy_artifacts(tmp_path, source_hash="0123456789abcdef")
    (d / f"lib{sm100_aot.NAME}.so").write_bytes(b"")
    pb = dataclasses.replace(sm100_aot.PREBUILT, directory=d)
    with caplog.at_level(logging.INFO, logger="wan_fp4.sm100"):
        assert pb.find(sm100_aot.NAME) is None
        assert pb.launcher(sm100_aot.NAME, expect=sm100_aot.SIGNATURE) is None
    msgs = [r.getMessage() for r in caplog.records if r.name == "wan_fp4.sm100"]
    assert len(msgs) == 1, msgs  # logged once
    assert "JIT instead of prebuilt" in msgs[0] and "other kernel sources" in msgs[0] and REBUILD in msgs[0]
    assert not (tmp_path / "cache").exists()  # nothing linked for a stale artifact
    # the real loader, and the switch that forces JIT
    monkeypatch.setattr(sm100_aot, "PREBUILT", pb)
    assert sm100_aot.PREBUILT.launcher(sm100_aot.NAME) is None
    monkeypatch.setenv("WAN_FP4_SM100_PREBUILT", "0")
    assert not pb.enabled()


def test_shim_generation_rejects_unsupported_wrappers():
    from wan_fp4.kernels import aot

    hdr = ("static inline int32_t cute_dsl_k_wrapper(k_Kernel_Module_t *module, k_Tensor_a_t a, "
           "cudaStream_t stream) {")
    with pytest.raises(ValueError, match="not supported"):
        aot.wrapper_signature(hdr, "k")
    with pytest.raises(ValueError, match="stream last"):
        aot.wrapper_signature("cute_dsl_k_wrapper(k_Kernel_Module_t *module, void *p, int32_t n) {", "k")


# ------------------------------------------------------------- the P map, modelled bit-exactly
@pytest.mark.parametrize("affine", [AFFINE_WAN, (1.50, 1.20)])
@pytest.mark.parametrize("margin", [110.0, 112.0])
def test_kernel_p_map_model_matches_reference_with_guard(affine, margin):
    # The guard's m per row (the host pre-pass, pack.guard_row_reference) through the kernel's
    # arithmetic (emulate.p_map: sub.rn, mul.rn, ..., fma(-m, c, log2 6)) gives the reference's
    # codes and exponents, also for scores far above the shiftless range.
    from wan_fp4.kernels.sm100 import emulate

    torch.manual_seed(2)
    c = reference.log2_scale(1 / math.sqrt(128))
    s = torch.randn(64, 128) * torch.logspace(-1, 3.5, 64).unsqueeze(-1) + torch.linspace(-500, 3000, 64).unsqueeze(-1)
    anchor = s[:, ::4].amax(-1, keepdim=True)
    m = reference.guard_reference(anchor, margin)
    m[0] = 0.0  # a row with m = 0 behaves as the shiftless map
    codes, e, e8m0, qsum = emulate.p_map(s, c, affine, valid=97, m=m)
    ref_s = s.clone()
    ref_s[:, 97:] = -math.inf
    ref_codes, ref_e = reference.fp4_p_codes(ref_s, m, c, affine)
    assert torch.equal(codes, ref_codes)
    assert torch.equal(e.to(torch.float32), ref_e)
    assert ref_codes.any(dim=-1).all(), "every row keeps some mass under the guard"
    assert torch.equal(qsum, ref_codes.unflatten(-1, (4, 32)).sum(-1))
    c0, e0, _, _ = emulate.p_map(s[:1], c, affine, valid=97)
    assert torch.equal(c0, codes[:1]) and torch.equal(e0, e[:1])


def test_guard_pre_pass_is_the_reference_m():
    # m from pack.guard_row_reference equals the reference's own (anchors in logical key order,
    # same dequantised operands, same torch ops), and the LSE formula adds m * scale back.
    from wan_fp4.modes import FP4_SCALE_SHIFT

    torch.manual_seed(3)
    b, sq, skv, h, margin = 2, 200, 300, 3, 110.0
    q = torch.randn(b, sq, h, 128, dtype=torch.bfloat16) * 4
    k = torch.randn(b, skv, h, 128, dtype=torch.bfloat16) * 4
    v = torch.randn(b, skv, h, 128, dtype=torch.bfloat16)
    ops = pack.prepare_operands(q, k, v, guard_margin=margin)
    assert ops.m.shape == (b * h, sq) and ops.m.dtype == torch.float32 and ops.m.is_contiguous()
    q_hat = formats.nvfp4_quantize_qk(q).dequantize().transpose(1, 2)
    k_hat = formats.nvfp4_quantize_qk(k).dequantize().transpose(1, 2)
    anchors = reference.anchor_indices(skv)
    want = reference.guard_reference(q_hat @ k_hat[:, :, anchors].transpose(-1, -2), margin)
    assert torch.equal(ops.m.view(b, h, sq), want.squeeze(-1))
    assert pack.prepare_operands(q, k, v).m is None
    # launch arguments: the guard flag follows fp4.guard_margin and must agree with the operands
    args = sm100.build_launch_args(ops, 1 / math.sqrt(128), FP4Params(guard_margin=margin), 148)
    assert args.guard == 1
    assert sm100.build_launch_args(pack.prepare_operands(q, k, v), 1 / math.sqrt(128), FP4Params(), 148).guard == 0
    with pytest.raises(ValueError, match="disagree"):
        sm100.build_launch_args(ops, 1 / math.sqrt(128), FP4Params(), 148)
    # LSE: the kernel's denominator sum 2^(e - L) q gives the reference's LSE with m
    _, ref_lse = reference.attention(q, k, v, "direct-p-fp4", fp4=FP4Params(guard_margin=margin), return_lse=True)
    c = reference.log2_scale(1 / math.sqrt(128))
    s = q_hat @ k_hat.transpose(-1, -2)
    pad = -(-skv // 128) * 128 - skv
    s = torch.nn.functional.pad(s, (0, pad), value=-math.inf)
    qc, e = reference.fp4_p_codes(s, want, c, AFFINE_WAN)
    denom = (qc * torch.exp2(e - FP4_SCALE_SHIFT).repeat_interleave(32, dim=-1)).sum(-1)
    lse = sm100.lse_from_denominator(denom, ops.m.view(b, h, sq), 1 / math.sqrt(128))
    assert torch.allclose(lse, ref_lse, rtol=0, atol=1e-4)


@pytest.mark.parametrize("affine", [AFFINE_WAN, (1.50, 1.20)])
def test_kernel_p_map_model_matches_reference(affine):
    from wan_fp4.kernels.sm100 import emulate

    torch.manual_seed(1)
    c = reference.log2_scale(1 / math.sqrt(128))
    s = torch.randn(64, 128) * torch.logspace(-1, 2.5, 64).unsqueeze(-1)  # raw scores, wide range
    s[0, :] = 0.0
    s[1, :32] = -1e30  # a block far below the E8M0 range
    codes, e, e8m0, qsum = emulate.p_map(s, c, affine, valid=100)
    ref_s = s.clone()
    ref_s[:, 100:] = -math.inf
    ref_codes, ref_e = reference.fp4_p_codes(ref_s, torch.zeros(64, 1), c, affine)
    assert torch.equal(codes, ref_codes)
    assert torch.equal(e.to(torch.float32), ref_e)
    assert not codes[:, 100:].any()
    assert torch.equal(qsum, ref_codes.unflatten(-1, (4, 32)).sum(-1))
    # The published byte is e - L (the reference's exp2(e - L)), floored at E8M0 byte 0.
    from wan_fp4.modes import FP4_SCALE_SHIFT
    shifted = ref_e - FP4_SCALE_SHIFT
    in_range = shifted >= -127
    assert torch.equal(e8m0.to(torch.float32)[in_range] - 127, shifted[in_range])
    assert (e8m0[~in_range] == 0).all()


# ------------------------------------------------ the P map, executed from the kernel's PTX
def _ptx_value(ptx, env, operand):
    """An operand of the P-map PTX: an FP32 immediate (0fXXXXXXXX), a bound register, or a
    register the kernel sets once from an integer (mov.b32 %r, N: an FP32 constant's bits)."""
    import struct

    def from_bits(u: int) -> torch.Tensor:
        return torch.tensor(struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0], dtype=torch.float32)

    if operand.startswith("0f"):
        return from_bits(int(operand[2:], 16))
    if operand in env:
        return env[operand]
    defs = re.findall(rf"mov\.b32\s+{re.escape(operand)}, (-?\d+);", ptx)
    assert len(defs) == 1, f"{operand} is neither bound nor a constant set once: {defs}"
    return from_bits(int(defs[0]))


def _run_ptx(ptx, lines, env):
    """Execute straight-line FP32 PTX (the P map's inline asm) on CPU tensors, instruction by
    instruction with PTX's rounding: .rn ops in FP32, fma with one rounding, PTX max/min."""
    f32 = torch.float32
    for line in lines:
        op, *args = re.split(r"[\s,]+", line.strip().rstrip(";"))
        dst, src = args[0], [_ptx_value(ptx, env, a) for a in args[1:]]
        env[dst] = {
            "neg.f32": lambda a: -a,
            "sub.rn.f32": lambda a, b: (a - b).to(f32),
            "mul.rn.f32": lambda a, b: (a * b).to(f32),
            "add.rn.f32": lambda a, b: (a + b).to(f32),
            "fma.rn.f32": lambda a, b, c: (a.double() * b.double() + c.double()).to(f32),
            "cvt.rmi.f32.f32": torch.floor,
            "max.f32": torch.fmax,  # PTX max/min return the non-NaN operand
            "min.f32": torch.fmin,
            "cvt.rzi.s32.f32": lambda a: torch.trunc(a).to(torch.int32),
            "cvt.rn.f32.s32": lambda a: a.to(f32),
        }[op](*src)
    return env


def _asm_blocks(ptx, first):
    """The instruction lines of every inline-asm block that starts with `first`."""
    return [b.strip().splitlines() for b in re.findall(rf"^{re.escape(first)}\n(.*?)^\}}", ptx, re.M | re.S)]


@pytest.mark.parametrize("affine", [AFFINE_WAN, (1.50, 1.20)])
@pytest.mark.parametrize("margin", [None, 110.0])
def test_ptx_p_map_executed_on_cpu_matches_reference(ptx, affine, margin):
    """The kernel's own P-map instructions and constants, taken from its PTX and executed here
    (row offset fma(-m, c, log2 6); per 32-key block g, clamp, e; bias fma(A, qb, B)), then the
    packed fma(s, fl(A c), bias) and the E2M1 conversion the PTX tests count, give the
    reference's codes and block exponents in every P block of both softmax warpgroups."""
    torch.manual_seed(4)
    c = reference.log2_scale(1 / math.sqrt(128))
    s = torch.randn(64, 128) * torch.logspace(-1, 2.5, 64).unsqueeze(-1)
    s[:, 100:] = -math.inf  # keys past S_kv
    s[1, :32] = -1e30  # a block far below the E8M0 range
    if margin is None:
        m = torch.zeros(64, 1)
    else:
        s += torch.linspace(-500, 3000, 64).unsqueeze(-1)
        m = reference.guard_reference(s[:, :100:4].amax(-1, keepdim=True), margin)
    want_codes, want_e = reference.fp4_p_codes(s, m, c, affine)

    c32, a32, b32 = (torch.tensor(x, dtype=torch.float32) for x in (c, *affine))
    ac = (a32.double() * c32.double()).to(torch.float32)  # the launch argument fl(A c)
    rows = _asm_blocks(ptx, ".reg .f32 nm;")
    g_blocks = _asm_blocks(ptx, ".reg .f32 g;")
    bias_blocks = _asm_blocks(ptx, ".reg .f32 fe, qb;")
    assert len(rows) == 2 and len(g_blocks) == len(bias_blocks) == 2 * 4  # 2 WGs x 4 P blocks
    # The constants in the PTX are the reference's (random scores rarely sit on a boundary where
    # one ulp of log2 6 or of the rounding bias would change a code, so compare them directly).
    f32 = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731
    const = {"fma.rn.f32": f32(LOG2_6), "add.rn.f32": f32(NEAREST_POW2_BIAS),
             "max.f32": f32(P_EXP_MIN), "min.f32": f32(P_EXP_MAX)}
    for line in [*rows[0], *g_blocks[0]]:
        op, *args = re.split(r"[\s,]+", line.strip().rstrip(";"))
        if op in const and args[1] in ("nm", "g"):
            assert torch.equal(_ptx_value(ptx, {}, args[-1]), const.pop(op)), line
    assert not const, f"P-map constants not found in the PTX: {sorted(const)}"
    checked = 0
    for row in rows:
        m_reg, c_reg = re.search(r"neg\.f32 nm, (%r\d+);\s*fma\.rn\.f32 %r\d+, nm, (%r\d+),", "\n".join(row)).groups()
        env = _run_ptx(ptx, row, {m_reg: m, c_reg: c32})
        mine = [g for g in g_blocks if re.match(rf"sub\.rn\.f32 g, %r\d+, {re.escape(m_reg)};", g[0])]
        assert len(mine) == 4
        for j, g in enumerate(mine):
            bmax_reg = re.match(r"sub\.rn\.f32 g, (%r\d+),", g[0]).group(1)
            env[bmax_reg] = s[:, 32 * j:32 * (j + 1)].amax(-1, keepdim=True)
            _run_ptx(ptx, g, env)
            e_reg = re.match(r"cvt\.rzi\.s32\.f32 (%r\d+), g;", g[-1]).group(1)
            (bias,) = [b for b in bias_blocks if b[0] == f"cvt.rn.f32.s32 fe, {e_reg};"]
            a_reg, b_reg = re.match(r"fma\.rn\.f32 %r\d+, (%r\d+), qb, (%r\d+);", bias[-1]).groups()
            env.update({a_reg: a32, b_reg: b32})
            out_reg = re.match(r"fma\.rn\.f32 (%r\d+),", bias[-1]).group(1)
            _run_ptx(ptx, bias, env)
            y = (s[:, 32 * j:32 * (j + 1)].double() * ac.double() + env[out_reg].double()).to(torch.float32)
            codes = formats.e2m1_round(y.nan_to_num(nan=0.0).clamp(min=0.0))
            assert torch.equal(env[e_reg].to(torch.float32), want_e[:, j:j + 1]), f"block {j}: e"
            assert torch.equal(codes, want_codes[:, 32 * j:32 * (j + 1)]), f"block {j}: codes"
            checked += 1
    assert checked == 8
