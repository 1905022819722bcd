"""CPU-only checks of the sm90 CuTe kernel: it compiles for sm_90a, and its PTX/SASS has the
instructions the design asks for (FP8 wgmma, TMA, no exp in the direct-p P path, no spills).

Needs nvidia-cutlass-dsl; no GPU. Each compile takes a few seconds.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import torch

pytest.importorskip("cutlass")

from wan_fp4.kernels import sm90  # noqa: E402
from wan_fp4.kernels.sm90.compile import compile_kernel, cubin_of, ptx_of  # noqa: E402
from wan_fp4.kernels.sm90.config import N_WG  # noqa: E402
from wan_fp4.kernels.sm90.layout import ONES_ROWS, SIGMA, key_permutation, sm90_v_layout  # noqa: E402
from ptx_addressing import AddressAudit, global_accesses  # noqa: E402

# --keep-* also writes files, which ptx_of reads back later: a directory of this process's own, so
# that neither the working directory nor another test run's compiles can touch them.
DUMP = Path(tempfile.mkdtemp(prefix="wan_fp4_sm90_dump_"))
KEEP = f"--keep-ptx --keep-cubin --dump-dir {DUMP}"


@pytest.fixture(scope="module", params=["direct-p", "fp8"])
def built(request):
    # the plain kernel (fp8's default splits its last wave: split_tail, direct-p's a short launch's
    # by rows: tail_rows; their decode of the 1-D grid is 32-bit arithmetic bounded by
    # split.GRID_X_MAX, so the 64-bit audit below reads this one)
    ck = compile_kernel(request.param, 128, split_tail=False, tail_rows=False, options=KEEP)
    return request.param, ptx_of(ck), cubin_of(ck)


def test_ptx_targets_sm90a_with_fp8_wgmma_and_tma(built):
    mode, ptx, cubin = built
    assert ".target sm_90a" in ptx
    wgmma = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k32)\.f32\.e4m3\.e4m3", ptx)
    # QK^T is m64n128k32; PV is m64n136k32 in direct-p (D = 128 plus the ones rows), else m64n128k32
    assert "m64n128k32" in wgmma
    if mode == "direct-p":
        assert "m64n136k32" in wgmma
    assert "cp.async.bulk.tensor" in ptx  # TMA loads
    assert "setmaxnreg" in ptx  # producer / consumer register split
    assert not re.search(r"\b(ld|st)\.local", ptx), "register spills to local memory"
    assert len(cubin) > 0


def test_global_addressing_is_64_bit(built):
    """O, LSE and scale addresses: the batch index enters every one, and no 32-bit product of it
    (or of a runtime size/stride) is in any of them, so B*S*H*D >= 2^31 (Wan 720p, B >= 6) cannot
    wrap. (Q, K, V^T come by TMA: batch is a descriptor coordinate, strides are the host's Int64.)"""
    _, ptx, _ = built
    audit = AddressAudit(ptx)
    accesses = global_accesses(audit.instrs)
    assert any(a.op.startswith("st.global.v4.b32") for a in accesses)  # O: 16-byte chunks of rows
    assert any(a.op.startswith("st.global.b32") for a in accesses)  # LSE
    assert not any(a.op.startswith("st.global.b16") for a in accesses)  # no lone BF16 stores
    for a in accesses:
        assert audit.uses_batch(a), a.text
        bad = audit.narrow_products(a)
        assert not bad, f"{a.text}: 32-bit products in its address: {[b.text for b in bad]}"


def test_large_batch_keeps_the_kernel():
    # B6 H40 S75600 (Wan2.1-14B 720p, batch 6): B*S*H*D > 2^31, served by the 64-bit kernel
    assert sm90.shape_reason(6, 40, 75600, 75600) == ""
    assert sm90.shape_reason(1, 40, 2**20, 2**20) == ""
    assert "B=70000" in sm90.shape_reason(70000, 1, 128, 128)
    assert "empty" in sm90.shape_reason(1, 1, 0, 128)


def _ex2_count(ptx):
    return len(re.findall(r"ex2\.approx", ptx))


def test_direct_p_has_no_exp_in_the_p_path():
    # Q's codes from the pre-pass (quant_q 0): the kernel's own Q codes take the E4M3 conversion
    dp = ptx_of(compile_kernel("direct-p", 128, quant_q=0, options=KEEP))
    f8 = ptx_of(compile_kernel("fp8", 128, options=KEEP))
    # fp8 needs one ex2 per score (64 per thread per tile, per copy of the softmax code);
    # direct-p only the per-row rescale alpha (2 rows per thread, per copy): 32 times fewer
    assert _ex2_count(f8) >= 64
    assert 1 <= _ex2_count(dp)
    assert _ex2_count(dp) * 16 <= _ex2_count(f8)
    assert "prmt.b32" in dp  # P bytes packed by PRMT
    assert "cvt.rn.satfinite.e4m3x2.f32" not in dp
    assert "cvt.rn.satfinite.e4m3x2.f32" in f8


def test_fp8_folds_p_scale_into_the_exponent():
    # fp8's 256 rides in the exponent's argument (docs/NUMERICS.md, "fp8"): one ex2 per score and
    # no multiply by 256 per score; the epilogue's l carries the 256 already.
    f8 = ptx_of(compile_kernel("fp8", 128, split_tail=False, options=KEEP))  # split_tail's merge has ex2s too
    assert _ex2_count(f8) % 66 == 0  # per copy of the softmax code: 64 scores + 2 row rescales
    assert "0f43800000" not in f8  # 256.0
    # fp8's default takes turns (pingpong 2): the turn-taking named barriers
    assert re.search(r"\bbar(rier)?(\.cta)?\.arrive", f8) and re.search(r"\bbar(rier)?(\.cta)?\.sync", f8)


def _cuobjdump():
    exe = shutil.which("cuobjdump")
    if exe is None:
        try:
            import triton

            cand = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
            exe = str(cand) if cand.exists() else None
        except ImportError:
            exe = None
    return exe


def test_sass_has_qgmma_and_bounded_mufu_ex2(tmp_path):
    exe = _cuobjdump()
    if exe is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton) to disassemble the cubin")
    counts = {}
    for mode in ("direct-p", "fp8"):
        path = tmp_path / f"{mode}.cubin"
        path.write_bytes(cubin_of(compile_kernel(mode, 128, options=KEEP)))
        run = subprocess.run([exe, "-sass", str(path)], capture_output=True, text=True)
        if run.returncode != 0:
            pytest.skip(f"cuobjdump cannot read an sm_90a cubin: {run.stderr.strip()[:200]}")
        counts[mode] = (run.stdout.count("QGMMA"), run.stdout.count("MUFU.EX2"))
    assert counts["direct-p"][0] > 0 and counts["fp8"][0] > 0
    assert counts["direct-p"][1] >= 1  # 2 rows per thread per copy of the softmax code
    assert counts["fp8"][1] >= 64
    assert counts["direct-p"][1] * 16 <= counts["fp8"][1]


def _sass(tmp_path, mode="direct-p", head_dim=128, **cfg) -> str:
    """The SASS of the kernel of (mode, head_dim, cfg over its default config)."""
    exe = _cuobjdump()
    if exe is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton) to disassemble the cubin")
    path = tmp_path / f"{mode}_{head_dim}.cubin"
    path.write_bytes(cubin_of(compile_kernel(mode, head_dim, **cfg, options=KEEP)))
    run = subprocess.run([exe, "-sass", str(path)], capture_output=True, text=True)
    if run.returncode != 0:
        pytest.skip(f"cuobjdump cannot read an sm_90a cubin: {run.stderr.strip()[:200]}")
    return run.stdout


@pytest.mark.parametrize("mode,head_dim", [("direct-p", 128), ("fp8", 128), ("direct-p", 64)])
def test_sass_epilogue_stages_o_in_shared_memory_and_stores_whole_rows(tmp_path, mode, head_dim):
    """The epilogue's global loads (the V channel scales) all come before its first global store (a
    load after a store would wait for it: the compiler cannot rule out aliasing, one L2 round trip
    per column). O goes to shared memory as BF16 pairs (a 32-bit STS per pair: D / 8 per row, two
    rows per thread), then leaves as 16-byte chunks of whole rows (64 rows x D / 8 chunks over 128
    threads); the only other global stores are the two 32-bit LSE values of the thread's rows."""
    # the plain kernel's (fp8's default merges split tiles' partial states through global memory
    # first), with Q's codes from the pre-pass (direct-p's own Q codes are loads and stores too)
    sass = _sass(tmp_path, mode, head_dim, split_tail=False, tail_rows=False, quant_q=0)
    ops = re.findall(r"\b(LDG|STG|STS|LDS)(\.[A-Z0-9.]+)?\s", sass)
    first_store = next(i for i, (op, _) in enumerate(ops) if op == "STG")
    # every load of the kernel (the per-tile K scales, then one V scale per column a thread holds,
    # D / 4 of them) comes before the first store
    assert sum(op == "LDG" for op, _ in ops[:first_store]) >= head_dim // 4
    assert not any(op == "LDG" for op, _ in ops[first_store:]), ops
    stg = [suffix for op, suffix in ops if op == "STG"]
    assert stg.count(".E.128") == 64 * (head_dim // 8) // 128
    assert sorted(s for s in stg if s != ".E.128") == [".E", ".E"]  # the LSE of rows r and r + 8
    assert sum(op == "STS" and not suffix for op, suffix in ops) == 2 * head_dim // 8
    assert sum(op == "LDS" and suffix == ".128" for op, suffix in ops) == stg.count(".E.128")


@pytest.mark.parametrize("mode,head_dim", [("direct-p", 128), ("direct-p", 64), ("fp8", 128), ("fp8", 64)])
def test_sass_sv_early_loads_the_v_scales_under_the_last_pv(tmp_path, mode, head_dim):
    """sv_early (direct-p's default, and fp8's at D64): the epilogue's D / 4 V-scale loads are
    issued before the last PV's wait, at each place a last step is compiled, so none is left after
    the kernel's last wgmma wait; without it they all come after that wait. Plain kernels (fp8's
    split tiles read their partial states after the wait too)."""
    early = sm90.default_config(mode, head_dim)["sv_early"]
    assert early == (mode == "direct-p" or head_dim == 64)
    for sv_early in (early, not early):
        sass = _sass(tmp_path, mode, head_dim, split_tail=False, tail_rows=False, sv_early=sv_early)
        ops = re.findall(r"\b(LDG|WARPGROUP\.DEPBAR)\b", sass)
        last_wait = max(i for i, op in enumerate(ops) if op == "WARPGROUP.DEPBAR")
        after = ops[last_wait:].count("LDG")
        assert after == (0 if sv_early else head_dim // 4), (sv_early, after)
        assert ops[:last_wait].count("LDG") >= (head_dim // 4 if sv_early else 1)


@pytest.mark.parametrize("mode,head_dim", [("direct-p", 128), ("fp8", 128), ("fp8", 64)])
def test_sass_first_scales_load_before_the_first_waits(tmp_path, mode, head_dim):
    """The consumers' Q block scale and first K tile scale are both loaded before their first
    barrier wait (Q's tile), so the K scale's round trip runs under the first loads and QK(0):
    issued after QK(0)'s wait, it held every CTA's first softmax by one round trip. Default
    configs (fp8's D128 splits and pairs CTAs: the load comes from the segment's first tile), with
    Q's codes from the pre-pass (made in the kernel, the consumers wait for no Q tile)."""
    sass = _sass(tmp_path, mode, head_dim, quant_q=0)
    first_wgmma_wait = sass.index("WARPGROUP.DEPBAR")
    consumer = sass.rindex("SYNCS.PHASECHK", 0, sass.rindex("WARPGROUP.ARRIVE", 0, first_wgmma_wait))
    consumer = sass.rindex("SYNCS.PHASECHK", 0, consumer)  # Q's wait, then K(0)'s
    assert len(re.findall(r"\bLDG\b", sass[:consumer])) >= 2
    assert not re.search(r"\bLDG\b", sass[consumer:first_wgmma_wait + 400])


@pytest.mark.parametrize("cfg", [{}, {"headroom": 0}, {"f16_bytes": False, "headroom": 0}])
def test_sass_direct_p_keeps_everything_in_registers(tmp_path, cfg):
    assert not re.search(r"\b(STL|LDL)\b", _sass(tmp_path, **cfg)), "register spills"


def test_sass_direct_p_fp32_bytes_are_one_ffma_sat_per_score(tmp_path):
    """Without f16_bytes the P byte is FFMA.SAT (score scale folded in, clamp at 0 by .sat) + FADD
    + PRMT: one FFMA.SAT per score per softmax copy."""
    sass = _sass(tmp_path, f16_bytes=False, headroom=0)
    n_sat = sass.count("FFMA.SAT")
    assert n_sat > 0 and n_sat % 64 == 0  # 64 scores per thread per tile, per softmax copy
    assert sass.count("FADD") >= n_sat  # the magic-number add, one per score


@pytest.mark.parametrize("cfg", [{"fold": 1}, {"intra": True}, {"pingpong": 1}, {"pingpong": 2}, {"stages": 3},
                                 {"fold": 4}, {"fold": 4, "intra": True}, {"fold": 4, "pingpong": 1}])
def test_other_configs_compile(cfg):
    ptx = ptx_of(compile_kernel("direct-p", 128, **cfg, options=KEEP))
    assert "cvt.rn.relu.f16x2.f32" in ptx  # direct-p's default P bytes
    if cfg.get("pingpong"):  # the turn-taking named barriers
        assert re.search(r"\bbar(rier)?(\.cta)?\.arrive", ptx) and re.search(r"\bbar(rier)?(\.cta)?\.sync", ptx)


@pytest.mark.parametrize("mode", ["direct-p", "fp8"])
@pytest.mark.parametrize("head_dim", [128, 64])
def test_fold_4_compiles_for_both_modes_and_head_dims(mode, head_dim):
    """fold=4 (the PV tile sum folded into FP32 every 512 keys), over
    each mode's default (fp8: intra): FP8 wgmma for sm_90a, no local memory in the PTX."""
    ptx = ptx_of(compile_kernel(mode, head_dim, fold=4, options=KEEP))
    assert ".target sm_90a" in ptx
    dv = head_dim + 8 if mode == "direct-p" else head_dim
    assert f"m64n{dv}k32.f32.e4m3.e4m3" in ptx and "m64n128k32.f32.e4m3.e4m3" in ptx
    assert not re.search(r"\b(ld|st)\.local", ptx), "register spills to local memory"


def test_fold_is_1_2_or_4():
    from wan_fp4.kernels.sm90.kernel import Sm90Attention

    assert Sm90Attention("direct-p", 128, fold=4).fold == 4
    assert Sm90Attention("fp8", 128, fold=4, intra=True).fold == 4
    with pytest.raises(ValueError, match="fold must be 1, 2 or 4, got 3"):
        Sm90Attention("direct-p", 128, fold=3)


_SCHEDULE_TRACE = """
import sys, types
from wan_fp4.kernels.sm90.kernel import Sm90Attention
fold = int(sys.argv[1])
kern = Sm90Attention("direct-p", 128, fold=fold)
steps = []
kern.step = lambda *a: steps.append((a[-3], a[-4] is not None, a[-2], a[-1]))
kern.tail = types.MethodType(Sm90Attention.tail.__wrapped__, kern)

class Pipe:  # a consumer pipeline: wait_and_advance hands out a stage handle
    def wait_and_advance(self):
        return object()

group = max(fold, 2)
for n_tiles in range(1, 4 * group + 2):
    steps.clear()
    for g in range((n_tiles - 1) // group):  # consume's loop
        for i in range(group):
            kern.step(None, object(), group * g + i, *kern.fold_flags(i))
    kern.tail((), Pipe(), Pipe(), None, n_tiles, n_tiles - 1 - (n_tiles - 1) % group, 0)
    want = [(n, n < n_tiles - 1, n % fold != 0, n % fold == fold - 1 or n == n_tiles - 1)
            for n in range(n_tiles)]
    assert steps == want, (n_tiles, steps)
print("OK")
"""


@pytest.mark.parametrize("fold", [1, 2, 4])
def test_schedule_visits_every_tile_once_with_its_fold_flags(fold):
    """The schedule's steps, traced with Python ints (the kernel's own tail and
    fold_flags; the loop's groups of G = max(fold, 2) steps as consume runs them): every key tile
    once and in order, a next K tile for all but the last, acc_t zeroed by the first tile of each
    fold group (n % fold == 0), folded into acc_o after the group's last tile or the very last.
    In a fresh interpreter: compiling rewrites the jit functions' code in place."""
    import sys

    run = subprocess.run([sys.executable, "-c", _SCHEDULE_TRACE, str(fold)], capture_output=True, text=True,
                         cwd=str(Path(__file__).resolve().parent.parent))
    assert run.returncode == 0 and "OK" in run.stdout, run.stderr[-2000:]


def test_f16_bytes_compiles_to_the_relu_f16_conversion_and_is_direct_p_only():
    ptx = ptx_of(compile_kernel("direct-p", 128, f16_bytes=True, options=KEEP))
    assert ptx.count("cvt.rn.relu.f16x2.f32") > 0 and "fma.rn.sat.f32" not in ptx
    assert "cvt.rn.relu" not in ptx_of(compile_kernel("direct-p", 128, f16_bytes=False, headroom=0, options=KEEP))
    from wan_fp4.kernels.sm90.kernel import Sm90Attention

    with pytest.raises(ValueError, match="f16_bytes applies to mode 'direct-p' only"):
        Sm90Attention("fp8", 128, f16_bytes=True)
    assert sm90.applies("direct-p", {"f16_bytes": True}) and not sm90.applies("fp8", {"f16_bytes": True})
    assert sm90.applies("fp8", {"f16_bytes": False, "fold": 1})


_BAR = r"\bbar(?:rier)?(?:\.cta)?\.(sync|arrive)\s+(%r\d+|\d+)(?:, (\d+))?;"


@pytest.mark.parametrize("pingpong", [1, 2])
def test_warp_groups_take_turns_at_256_thread_barriers(pingpong):
    """pingpong: the turns are 256-thread named barriers (a warp group's 128 threads wait with
    bar.sync, the other's 128 arrive), the token enters at group 0's barrier TURN_BARRIER, and the
    ids stay clear of the epilogue's 128-thread barriers (O_BARRIER + group) and of barrier 0
    (__syncthreads); setmaxnreg 240/24 and no spills either way. Without pingpong, no 256-thread
    barrier."""
    from wan_fp4.kernels.sm90.kernel import CONSUMER_REGS, N_WG, O_BARRIER, PRODUCER_REGS, TURN_BARRIER

    assert TURN_BARRIER >= 1 and O_BARRIER >= TURN_BARRIER + N_WG and O_BARRIER + N_WG <= 16
    assert 128 * PRODUCER_REGS + 128 * N_WG * CONSUMER_REGS <= 65536
    ptx = ptx_of(compile_kernel("fp8", 64, pingpong=pingpong, options=KEEP))
    assert re.search(rf"setmaxnreg\.inc\.sync\.aligned\.u32\s+{CONSUMER_REGS}\b", ptx)
    assert re.search(rf"setmaxnreg\.dec\.sync\.aligned\.u32\s+{PRODUCER_REGS}\b", ptx)
    assert not re.search(r"\b(ld|st)\.local", ptx)
    bars = set(re.findall(_BAR, ptx))
    assert ("arrive", str(TURN_BARRIER), "256") in bars  # the token goes in
    assert {kind for kind, bid, n in bars if n == "256" and bid.startswith("%r")} == {"sync", "arrive"}
    assert {n for _, _, n in bars} <= {"", "128", "256"}  # "": bar.sync 0
    plain = set(re.findall(_BAR, ptx_of(compile_kernel("fp8", 64, pingpong=0, options=KEEP))))
    assert not any(n == "256" for _, _, n in plain)
    from wan_fp4.kernels.sm90.kernel import Sm90Attention

    with pytest.raises(ValueError, match="pingpong must be 0, 1 or 2"):
        Sm90Attention("direct-p", 128, pingpong=3)


_TMA = re.compile(r"cp\.async\.bulk\.tensor\.\S+ \[[^\]]*\], \[(%rd\d+),")


def _tma_loads(ptx):
    """(multicast, descriptor) of every TMA load in the PTX."""
    return [(".multicast::cluster" in line, m.group(1)) for line in ptx.splitlines() if (m := _TMA.search(line))]


@pytest.mark.parametrize("mode", ["direct-p", "fp8"])
@pytest.mark.parametrize("head_dim", [128, 64])
def test_cluster_2_multicasts_k_and_v_but_not_q(mode, head_dim):
    """cluster=2: one multicast load (into the cluster's shared memory) for each of K and V^T, from
    two descriptors; Q stays a per-CTA load, once per consumer warp group, from a third. The
    releases of K/V stages are cluster arrives (mapa'd to the peer's barriers), the barriers'
    initialisation and the exit are cluster-wide, and nothing spills."""
    ptx = ptx_of(compile_kernel(mode, head_dim, cluster=2, quant_q=0, options=KEEP))  # Q by TMA
    loads = _tma_loads(ptx)
    q = {desc for mc, desc in loads if not mc}
    kv = [desc for mc, desc in loads if mc]
    assert len(q) == 1 and sum(not mc for mc, _ in loads) == N_WG
    assert len(kv) == 2 and len(set(kv)) == 2 and not q & set(kv)
    assert all("shared::cluster" in line for line in ptx.splitlines() if ".multicast::cluster" in line)
    assert "mbarrier.arrive.shared::cluster.b64" in ptx and "mapa.shared::cluster" in ptx
    assert "barrier.cluster.arrive.relaxed" in ptx and ptx.count("barrier.cluster.wait") == 2
    assert not re.search(r"\b(ld|st)\.local", ptx)


def test_sum_tree_is_fp8s_and_changes_only_the_row_sum():
    """sum_tree (fp8; its default at D128): the tile's p summed as a tree instead of one chain; the
    same exponentials and P bytes, refused for direct-p (whose sum is accumulator column D)."""
    from wan_fp4.kernels.sm90.kernel import Sm90Attention

    with pytest.raises(ValueError, match="sum_tree applies to mode 'fp8' only"):
        Sm90Attention("direct-p", 128, sum_tree=True)
    assert sm90.applies("fp8", {"sum_tree": True}) and not sm90.applies("direct-p", {"sum_tree": True})
    chain = ptx_of(compile_kernel("fp8", 64, options=KEEP))
    tree = ptx_of(compile_kernel("fp8", 64, sum_tree=True, options=KEEP))
    assert chain != tree and _ex2_count(chain) == _ex2_count(tree)
    assert chain.count("cvt.rn.satfinite.e4m3x2.f32") == tree.count("cvt.rn.satfinite.e4m3x2.f32")


def test_cluster_1_has_no_cluster_code():
    """cluster=1 (the default but for fp8 at D128) loads everything per CTA and never touches
    another CTA."""
    for mode in ("direct-p", "fp8"):
        ptx = ptx_of(compile_kernel(mode, 128, cluster=1, options=KEEP))
        assert _tma_loads(ptx) and not any(mc for mc, _ in _tma_loads(ptx))
        assert "shared::cluster" not in ptx and "barrier.cluster" not in ptx and "mapa" not in ptx


def test_cluster_options_and_refusals():
    """cluster is 1 (default) or 2; anything else is refused by name."""
    from wan_fp4.kernels.sm90.kernel import Sm90Attention

    assert sm90.DEFAULT_CONFIG["cluster"] == 1
    for bad in (0, 3, 4):
        with pytest.raises(ValueError, match=f"cluster must be 1 or 2, got {bad}"):
            Sm90Attention("direct-p", 128, cluster=bad)


def test_prebuilt_names_carry_the_options_that_differ_from_the_mode_default():
    from wan_fp4.kernels.sm90 import aot

    assert all(sm90.default_config(m, d)["intra"] and sm90.default_config(m, d)["fold"] == 4
               for m in ("fp8", "direct-p") for d in (128, 64))
    assert aot.kernel_name("fp8", 128) == "wanfp4_sm90_fp8_d128"
    assert aot.kernel_name("fp8", 128, {"intra": False}) == "wanfp4_sm90_fp8_d128_intra0"
    # turns exclude direct-p's default tail_rows, which yields: the name says so
    assert aot.kernel_name("direct-p", 64, {"pingpong": True, "stages": 3}) == \
        "wanfp4_sm90_directp_d64_pingpong1_stages3_tail_rows0"
    assert sm90.default_config("direct-p", 128)["f16_bytes"] and not sm90.default_config("fp8", 128)["f16_bytes"]
    assert sm90.default_config("fp8", 128)["pingpong"] == 2 and sm90.default_config("direct-p", 128)["pingpong"] == 0
    # fp8 at D128 only: the tree row sum and CTA pairs; its D64 and direct-p keep cluster 1, the chain
    assert sm90.default_config("fp8", 128)["cluster"] == 2 and sm90.default_config("fp8", 128)["sum_tree"]
    assert all(sm90.default_config(m, d)["cluster"] == 1 and not sm90.default_config(m, d)["sum_tree"]
               for m, d in (("fp8", 64), ("direct-p", 128), ("direct-p", 64)))
    assert aot.kernel_name("fp8", 128, {"cluster": 1}) == "wanfp4_sm90_fp8_d128_cluster1"
    assert aot.kernel_name("fp8", 128, {"pingpong": 0}) == "wanfp4_sm90_fp8_d128_pingpong0"
    assert aot.kernel_name("direct-p", 128, {"f16_bytes": True}) == "wanfp4_sm90_directp_d128"
    assert (aot.kernel_name("direct-p", 128, {"f16_bytes": False, "headroom": 0})
            == "wanfp4_sm90_directp_d128_f16_bytes0_headroom0")
    assert (aot.kernel_name("direct-p", 128, {"fold": 2, "intra": False, "pingpong": 1})
            == "wanfp4_sm90_directp_d128_fold2_intra0_pingpong1_tail_rows0")
    assert aot.kernel_name("direct-p", 128, {"cluster": 2}) == "wanfp4_sm90_directp_d128_cluster2_tail_rows0"
    assert aot.kernel_name("fp8", 64, {"cluster": 1}) == "wanfp4_sm90_fp8_d64"


def test_head_dim_64_compiles():
    ptx = ptx_of(compile_kernel("direct-p", 64, options=KEEP))
    assert "m64n72k32" in ptx  # PV: 64 channels + 8 ones rows


def test_sigma_matches_the_wgmma_fragments():
    """The kernel packs each thread's S accumulator values into its own P A-operand registers;
    check against CuTe's own thread-value layouts that A column k then holds key SIGMA[k]."""
    import cutlass
    import cutlass.cute as cute
    import cutlass.utils.hopper_helpers as hh
    from cutlass.cute.nvgpu import OperandMajorMode, warpgroup

    f8, k = cutlass.Float8E4M3FN, OperandMajorMode.K
    got = {}

    @cute.jit
    def layouts():
        qk = hh.make_trivial_tiled_mma(f8, f8, k, k, cutlass.Float32, (1, 1, 1), (64, 128))
        pv = hh.make_trivial_tiled_mma(f8, f8, k, k, cutlass.Float32, (1, 1, 1), (64, 136),
                                       a_source=warpgroup.OperandSource.RMEM)
        got["c"] = [[qk.tv_layout_C((t, v)) for v in range(64)] for t in range(128)]
        got["a"] = [[pv.tv_layout_A((t, v)) for v in range(16)] for t in range(128)]

    cute.compile(layouts, options="--gpu-arch sm_90a")
    for t in range(128):
        for kb in range(4):
            for h in range(2):
                for g in range(2):
                    for a in range(4):
                        c_idx = got["c"][t][a % 2 + 2 * h + 4 * (4 * kb + 2 * g + a // 2)]  # m + 64 n
                        a_idx = got["a"][t][a + 4 * h + 8 * g]  # m + 64 k, within one k32 block
                        m_c, n_c = c_idx % 64, c_idx // 64
                        m_a, k_a = a_idx % 64, a_idx // 64
                        assert m_c == m_a
                        assert n_c == 32 * kb + SIGMA[k_a]


def test_v_layout_permutes_keys_and_appends_ones():
    gen = torch.Generator().manual_seed(3)
    v8t = (torch.randn(2, 3, 64, 256, generator=gen) * 50).to(torch.float8_e4m3fn)
    raw = v8t.view(torch.uint8)
    for direct in (True, False):
        out = sm90_v_layout(v8t, direct).view(torch.uint8)
        assert out.shape == (2, 3, 64 + (ONES_ROWS if direct else 0), 256)
        assert torch.equal(out[:, :, :64], raw[..., key_permutation(256)])
        for blk in range(0, 256, 32):
            for kk in range(32):
                assert torch.equal(out[:, :, :64, blk + kk], raw[..., blk + SIGMA[kk]])
        if direct:
            assert bool((out[:, :, 64] == 0x38).all()) and bool((out[:, :, 65:] == 0).all())
    with pytest.raises(ValueError, match="v8t"):
        sm90_v_layout(torch.zeros(2, 64, 256), True)


def test_is_supported_reasons():
    q = torch.randn(1, 130, 2, 128, dtype=torch.bfloat16)
    ok, why = sm90.is_supported(q, q, q, "direct-p")
    assert not ok and "CUDA" in why
    ok, why = sm90.is_supported(q, q, q, "bf16")
    assert not ok and "mode" in why
    with pytest.raises(ValueError, match="sm90_attention"):
        sm90.sm90_attention(q, q, q, "direct-p")


def test_prepass_writes_the_kernel_v_layout_under_interpreter():
    """What sm90_attention runs: the Triton pre-pass writing V^T straight into the kernel's layout
    equals the plain pre-pass followed by the layout's definition (sm90_v_layout), byte for byte."""
    code = (
        "import torch\n"
        "from wan_fp4.kernels.prepare import prepare_fp8\n"
        "from wan_fp4.kernels.sm90.layout import sm90_v_layout, v_layout_args\n"
        "g = torch.Generator().manual_seed(5)\n"
        "for d, s in ((128, 256), (64, 77)):\n"
        "    q, k, v = (torch.randn(1, s, 2, d, generator=g).bfloat16() for _ in range(3))\n"
        "    plain = prepare_fp8(q, k, v, backend='triton')\n"
        "    for mode in ('direct-p', 'fp8'):\n"
        "        want = sm90_v_layout(plain.v8t, mode == 'direct-p').view(torch.uint8)\n"
        "        got = prepare_fp8(q, k, v, backend='triton', **v_layout_args(mode)).v8t.view(torch.uint8)\n"
        "        assert torch.equal(got, want), (d, s, mode)\n"
        "print('OK')\n")
    pytest.importorskip("triton")
    import os
    import sys

    env = dict(os.environ, TRITON_INTERPRET="1")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=str(Path(__file__).resolve().parent.parent))
    assert run.returncode == 0 and "OK" in run.stdout, run.stderr[-2000:]


def test_aot_shim_links_and_symbols_resolve(tmp_path, shim_toolchain):
    """Export the default direct-p kernel, link the C shim, load it with ctypes and resolve both
    entry points (launching needs a GPU: `wan-fp4 check --kernels sm90-cute` compares it with JIT)."""
    import os
    import sys

    from wan_fp4.kernels.sm90 import aot

    # export_to_c needs the DSL runtime loaded in-process on a GPU-less box: do it in a child
    code = (
        "import sys\n"
        "from wan_fp4.kernels.sm90 import DEFAULT_CONFIG\n"
        "from wan_fp4.kernels.sm90.compile import compile_kernel\n"
        "compile_kernel('direct-p', 128, **DEFAULT_CONFIG).export_to_c(sys.argv[1], sys.argv[2])\n")
    import importlib.util

    base = Path(list(importlib.util.find_spec("nvidia_cutlass_dsl").submodule_search_locations)[0])
    libs = sorted(base.glob("cu*/lib/libcute_dsl_runtime.so"), reverse=True)
    if not libs:
        pytest.skip("no libcute_dsl_runtime.so")
    name = aot.kernel_name("direct-p", 128)
    env = dict(os.environ, LD_PRELOAD=str(libs[0]))
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path), name], capture_output=True, text=True,
                         env=env, cwd=str(Path(__file__).resolve().parent.parent))
    assert run.returncode == 0, run.stderr[-2000:]
    so = aot.link_shim(name, tmp_path, tmp_path / f"lib{name}.so")
    shim = aot.bind(so, name)
    assert callable(shim.load) and callable(shim.run)
    assert shim.signature == aot.SIGNATURE == aot.PREBUILT.signature  # what host.launch passes
    ldd = subprocess.run(["ldd", str(so)], capture_output=True, text=True).stdout
    assert "libcudart.so" not in ldd and "libcute_dsl" not in ldd  # static: needs only libc + driver


def test_aot_ignores_artifacts_of_other_sources(tmp_path):
    import json

    from wan_fp4.kernels.sm90 import aot

    name = aot.kernel_name("direct-p", 128)
    (tmp_path / "manifest.json").write_text(json.dumps({"source_hash": "stale", "kernels": {name: {}}}))
    (tmp_path / f"lib{name}.so").write_bytes(b"")
    assert aot.find("direct-p", 128, directory=tmp_path, build=False) is None
    (tmp_path / "manifest.json").write_text(json.dumps({"source_hash": aot.source_hash(), "kernels": {name: {}}}))
    assert aot.find("direct-p", 128, directory=tmp_path, build=False) == tmp_path / f"lib{name}.so"


def test_aot_prebuilt_manifest_matches_kernel_sources():
    """CI catches a kernel edit without a rebuild (the loader would ignore the stale artifacts)."""
    from wan_fp4.kernels.sm90 import aot

    rebuild = "python scripts/build_prebuilt.py --only sm90"
    man = aot.PREBUILT.read_manifest()
    assert man is not None, f"no prebuilt sm90a manifest: run `{rebuild}` and commit the .h/.o/manifest"
    assert man["source_hash"] == aot.source_hash(), (
        f"the prebuilt sm90a kernels were built from other sources ({man['source_hash']} != {aot.source_hash()}): "
        f"run `{rebuild}` and commit wan_fp4/kernels/prebuilt/sm90a/*.h, *.o and manifest.json")
    for mode in sm90.SUPPORTED_MODES:
        for d in sm90.SUPPORTED_HEAD_DIMS:
            for cfg in sm90.default_kernels(mode, d):  # the default, its plain kernel, short launches'
                name = aot.kernel_name(mode, d, cfg)
                assert aot.PREBUILT.check(name) is None, f"run `{rebuild}`"
                for ext in (".h", ".o"):
                    assert (aot.PREBUILT.directory / f"{name}{ext}").is_file(), f"run `{rebuild}`"


def test_launch_refuses_operands_off_a_16_byte_boundary():
    """The kernel assumes 16-byte aligned operands and stores O in 4-byte words: an `out` that is a
    view at an odd offset gets a clear error naming it, before anything is launched."""
    from wan_fp4.kernels import prepare

    q = torch.randn(1, 128, 2, 128, dtype=torch.bfloat16)
    ops = prepare.prepare_fp8(q, q, q, backend="torch", **sm90.layout.v_layout_args("direct-p"))
    room = torch.empty(1 * 128 * 2 * 128 + 1, dtype=torch.bfloat16)
    out = room[1:].view(1, 128, 2, 128)  # contiguous, 2 bytes past an aligned start
    with pytest.raises(ValueError, match="operand out must start on a 16-byte boundary"):
        sm90.launch(ops, "direct-p", 128, out=out)


def test_huge_scores_raise_instead_of_returning_the_output(monkeypatch):
    """sm90_attention checks the score range on the pre-pass's operands, as the reference does (the
    kernel's direct-p map assumes |m| < 2^19). The kernel is queued before the check waits, so
    the GPU does not idle on the host; its output is dropped and the call raises."""
    monkeypatch.setattr(sm90, "is_supported", lambda *a, **kw: (True, ""))
    from wan_fp4.kernels.sm90 import host

    launched = []

    def fake_launch(ops, mode, d, scale, **kw):
        launched.append(mode)
        b, h, _, _ = ops.q8.shape
        return torch.zeros(b, ops.seq_q, h, d), torch.zeros(b, h, ops.seq_q)

    monkeypatch.setattr(host, "launch", fake_launch)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 130, 1, 64, generator=g) for _ in range(3))
    with pytest.raises(ValueError, match="direct-p: q . k"):
        sm90.sm90_attention(q * 1e8, k, v, "direct-p")
    assert launched == ["direct-p"]
    assert sm90.sm90_attention(q, k, v, "direct-p").shape == q.shape  # ordinary inputs pass


def test_prebuilt_kernel_without_the_dsl_counts_as_available_only_once_linkable(monkeypatch, tmp_path,
                                                                                 shim_toolchain):
    # Without the DSL to JIT, the sm90 kernel runs only from a linked shim library: one in the
    # prebuilt folder or the cache, or one linked on first use, which needs the DSL's runtime
    # library. A bare GPU image has neither, and there the kernel must count as unavailable, so that
    # dispatch picks another (the H200 image of 2026-11-30 was such a machine).
    import shutil

    from wan_fp4.kernels import aot as common
    from wan_fp4.kernels.sm90 import aot

    folder, cache = tmp_path / "prebuilt", tmp_path / "cache"
    shutil.copytree(aot.PREBUILT.directory, folder, ignore=shutil.ignore_patterns("*.so"))
    monkeypatch.setattr(aot.PREBUILT, "directory", folder)
    monkeypatch.setattr(sm90, "_dsl_available", lambda: False)
    monkeypatch.setenv("WAN_FP4_CACHE", str(cache))

    def answers():
        sm90.source_reason.cache_clear()  # answered once per process: ask afresh
        return [sm90.source_reason(mode, head_dim) for mode in ("direct-p", "fp8") for head_dim in (64, 128)]

    def no_runtime(*args, **kwargs):
        raise FileNotFoundError("no DSL runtime library to link against")

    try:
        with monkeypatch.context() as m:
            m.setattr(common, "link_shim", no_runtime)
            assert all(not ok and "nvidia-cutlass-dsl" in why for ok, why in answers())
        assert answers() == [(True, "")] * 4  # linked on first use
        linked = sorted(cache.rglob("*.so"))
        # every kernel a launch may pick: the split kernels and their plain ones, short and persistent
        # launches'
        assert [p.name for p in linked] == sorted(f"lib{aot.kernel_name(mode, d, cfg)}.so" for mode in ("direct-p", "fp8")
                                                  for d in (64, 128) for cfg in sm90.default_kernels(mode, d))
        # direct-p's 8 at each D (Q's codes made in the kernel or read) and D128's 4 persistent, fp8's 4 + 2
        assert len(linked) == 26
        for so in linked:  # brought along in the prebuilt folder, as for the H200
            shutil.move(so, folder / so.name)
        with monkeypatch.context() as m:
            m.setattr(common, "link_shim", no_runtime)
            assert answers() == [(True, "")] * 4
    finally:
        sm90.source_reason.cache_clear()


def test_every_family_launches_through_one_prebuilt_or_jit_path(monkeypatch):
    """kernels.aot.Prebuilt.run_or_jit: prebuilt when usable (None), required (True) or never
    (False); a failed prebuilt launch is an error naming the kernel, never a silent JIT rerun; the
    shim must declare the family's signature."""
    import contextlib

    from wan_fp4.kernels.aot import Prebuilt

    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())  # no GPU here
    pb = Prebuilt(arch="x", gpu_arch="sm_x", family="test", src_dir=Path(__file__).parent, sources=(),
                  signature=("int32_t", "stream"))
    calls, usable = [], {"k": lambda *args: calls.append(("prebuilt", args)) or 0, "bad": lambda *args: 700}
    asked = []

    def launcher(name, expect=None):
        asked.append((name, expect))
        return usable.get(name)

    def jit():
        calls.append(("jit",))

    monkeypatch.setattr(pb, "launcher", launcher)
    pb.run_or_jit("k", (1, 2.0, 3), None, jit)
    pb.run_or_jit("none", (1,), None, jit)
    pb.run_or_jit("k", (1,), None, jit, prebuilt=False)
    assert calls == [("prebuilt", (1, 2.0, 3)), ("jit",), ("jit",)]
    assert asked == [("k", None), ("none", None)]  # never asked when prebuilt=False
    with pytest.raises(RuntimeError, match="no usable prebuilt test kernel none for D=64"):
        pb.run_or_jit("none", (), None, jit, prebuilt=True, missing=" for D=64")
    with pytest.raises(RuntimeError, match="prebuilt test kernel bad launch failed with error 700"):
        pb.run_or_jit("bad", (), None, jit)
    assert len(calls) == 3


def test_a_shim_of_another_signature_is_refused(monkeypatch, tmp_path):
    """Prebuilt.launcher checks the shim's declared C types against the family's `signature`."""
    from wan_fp4.kernels import aot as common
    from wan_fp4.kernels.aot import Prebuilt, Shim

    pb = Prebuilt(arch="x", gpu_arch="sm_x", family="test", src_dir=tmp_path, sources=(),
                  signature=("int32_t", "stream"))
    monkeypatch.delenv("WAN_FP4_PREBUILT", raising=False)
    monkeypatch.delenv("WAN_FP4_TEST_PREBUILT", raising=False)
    monkeypatch.setattr(pb, "find", lambda name: tmp_path / "lib.so")
    monkeypatch.setattr(common, "bind", lambda so, name: Shim(None, lambda: 0, lambda *a: 0, ("float", "stream")))
    assert pb.launcher("k") is None
    monkeypatch.setattr(common, "bind", lambda so, name: Shim(None, lambda: 0, lambda *a: 0, ("int32_t", "stream")))
    assert pb.launcher("k2") is not None


def test_build_prebuilt_makes_each_variant_at_each_head_dim_in_the_modes_it_applies_to():
    """scripts/build_prebuilt.py --sm90-config C --sm90-head-dims 128 64: the kernels a launch of
    the config may run (with split_tail or tail_rows, the plain kernel beside the split one) per
    (mode, D) the config applies to (f16_bytes is direct-p's only), named as the loader looks them
    up."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "scripts" / "build_prebuilt.py"
    spec = importlib.util.spec_from_file_location("build_prebuilt", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    p8 = {"f16_bytes": False, "headroom": 0}
    names = [e[0] for e in script.sm90_variant_entries([{"cluster": 2}, p8], (128, 64))]
    # fp8 at D128 runs cluster 2 by default (HEAD_DIM_CONFIG): those kernels are the default's
    # a cluster excludes direct-p's tail_rows (it yields); elsewhere direct-p's plain kernel comes too;
    # direct-p's each again with Q's codes read (quant_q 0, host.run's fallback)
    dp = [f"wanfp4_sm90_directp_d{d}_{c}" for d in (128, 64) for c in ("cluster2_tail_rows0", "cluster2_quant_q0_tail_rows0")]
    p8_names = [f"wanfp4_sm90_directp_d{d}_f16_bytes0_headroom0{q}{t}" for d in (128, 64)
                for q in ("", "_quant_q0") for t in ("", "_tail_rows0")]
    assert names == dp + ["wanfp4_sm90_fp8_d64_cluster2", "wanfp4_sm90_fp8_d64_cluster2_split_tail0"] + p8_names
    assert [e[0] for e in script.sm90_variant_entries([{"stages": 3}])] == [
        "wanfp4_sm90_directp_d128_stages3", "wanfp4_sm90_directp_d128_stages3_tail_rows0",
        "wanfp4_sm90_directp_d128_quant_q0_stages3", "wanfp4_sm90_directp_d128_quant_q0_stages3_tail_rows0",
        "wanfp4_sm90_fp8_d128_stages3", "wanfp4_sm90_fp8_d128_split_tail0_stages3"]


def test_headroom_option_checks_with_hmnmx2_and_a_vote_and_is_refused_where_it_does_not_apply():
    """headroom=C (codes; direct-p's default is DIRECT_P_HEADROOM): the pack's f16x2 words feed
    max.f16x2, one warp vote decides the reference move; refused for fp8, without f16_bytes, or
    out of range."""
    from wan_fp4.kernels.sm90 import aot
    from wan_fp4.kernels.sm90.kernel import Sm90Attention
    from wan_fp4.modes import DIRECT_P_HEADROOM

    assert sm90.default_config("direct-p", 128)["headroom"] == DIRECT_P_HEADROOM == 24
    assert sm90.default_config("fp8", 128)["headroom"] == 0
    ptx = ptx_of(compile_kernel("direct-p", 128, options=KEEP))
    assert ptx.count("max.f16x2") >= 31 and "vote.sync.any.pred" in ptx
    assert not re.search(r"\b(ld|st)\.local", ptx)
    assert "max.f16x2" not in ptx_of(compile_kernel("direct-p", 128, headroom=0, options=KEEP))
    assert aot.kernel_name("direct-p", 128, {"headroom": 24}) == "wanfp4_sm90_directp_d128"
    assert aot.kernel_name("direct-p", 128, {"headroom": 0}) == "wanfp4_sm90_directp_d128_headroom0"
    assert not sm90.applies("fp8", {"headroom": 24}) and sm90.applies("direct-p", {"headroom": 24})
    for bad, match in [(dict(mode="fp8", headroom=8), "headroom needs"), (dict(f16_bytes=False, headroom=8), "headroom needs"),
                       (dict(headroom=65), "headroom must be"), (dict(headroom=True), "headroom must be")]:
        kw = {"mode": "direct-p", "f16_bytes": True, **bad}
        with pytest.raises(ValueError, match=match):
            Sm90Attention(kw.pop("mode"), 128, **kw)


@pytest.mark.parametrize("mode", ["direct-p", "fp8"])
@pytest.mark.parametrize("head_dim", [128, 64])
def test_split_tail_merges_through_a_ticket_and_l2(mode, head_dim):
    """split_tail: a 1-D grid (the plan's CTA order), each split segment's partial state stored,
    a gpu-scope acq_rel ticket (atom.add) after a gpu fence, the merger reading the slots through
    L2 (ld.global.cg); nothing spills."""
    ptx = ptx_of(compile_kernel(mode, head_dim, split_tail=True, options=KEEP))
    plain = ptx_of(compile_kernel(mode, head_dim, split_tail=False, tail_rows=False, options=KEEP))
    # atom's scope is .gpu unless it says otherwise
    assert re.search(r"atom\.global\.acq_rel(\.gpu)?\.add\.[su]32", ptx), "the ticket"
    assert "fence.acq_rel.gpu" in ptx and "ld.global.cg.b32" in ptx
    assert not re.search(r"\b(ld|st)\.local", ptx)
    assert "%ctaid.y" not in ptx and "%ctaid.z" not in ptx  # one grid dimension
    assert "atom" not in plain and "%ctaid.z" in plain


@pytest.mark.parametrize("mode", ["direct-p", "fp8"])
def test_split_tail_keeps_the_main_loop(mode):
    """The CTA's work is decoded once and again after the loop (a volatile %ctaid.x read), so the
    main loop keeps the default's instructions per key tile within 1%."""
    from wan_fp4.eval.sass_profile import find_cuobjdump, profile

    if find_cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton) to disassemble the cubin")
    base = profile(mode, 128, split_tail=False, tail_rows=False)["loop"].steady_counts
    split = profile(mode, 128, split_tail=True, tail_rows=False)["loop"].steady_counts
    assert split["wgmma"] == base["wgmma"]
    assert sum(split.values()) <= 1.01 * sum(base.values()), (sum(split.values()), sum(base.values()))


def test_tail_rows_idles_one_warp_group_and_keeps_the_main_loop():
    """tail_rows (direct-p's default; split.cta_work by rows): a one-dimensional grid, its index decoded by
    the launch's multiply-shift divisors (no division sequence per CTA, which made a first build
    1.8-5% slower on many short CTAs); a split tile's CTA runs one consumer warp group while the
    other only waits for and releases each K and V stage; the main loop keeps the plain kernel's
    instructions per key tile within 1%. The option yields to split_tail, pingpong and clusters
    when those are asked for, and the kernel refuses it beside them."""
    from wan_fp4.eval.sass_profile import find_cuobjdump, profile
    from wan_fp4.kernels.sm90.kernel import Sm90Attention

    assert all(sm90.default_config("direct-p", d)["tail_rows"] for d in (64, 128))
    assert not any(sm90.default_config("fp8", d)["tail_rows"] for d in (64, 128))
    ptx = ptx_of(compile_kernel("direct-p", 128, options=KEEP))
    plain = ptx_of(compile_kernel("direct-p", 128, tail_rows=False, options=KEEP))
    assert "%ctaid.y" not in ptx and "%ctaid.z" not in ptx and "%ctaid.z" in plain
    assert not re.search(r"\b(div|rem)\.[su]32", ptx)
    # the idle group: a loop of two mbarrier waits and two arrivals, no tensor product
    assert ptx.count("mbarrier.arrive") > plain.count("mbarrier.arrive")
    for extra in ({"split_tail": True}, {"pingpong": 2}, {"cluster": 2}):
        assert sm90.default_config("direct-p", 128, extra)["tail_rows"] is False
        with pytest.raises(ValueError, match="tail_rows excludes"):
            Sm90Attention("direct-p", 128, **{**sm90.default_config("direct-p", 128, extra), "tail_rows": True})
    if find_cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton) to disassemble the cubin")
    base = profile("direct-p", 128, tail_rows=False)["loop"].steady_counts
    rows = profile("direct-p", 128)["loop"].steady_counts
    assert rows["wgmma"] == base["wgmma"]
    assert sum(rows.values()) <= 1.01 * sum(base.values()), (sum(rows.values()), sum(base.values()))


def test_launch_splits_only_when_the_plan_does(monkeypatch):
    """host.launch with split_tail: the split kernel, the plan's (split, segments) and a workspace
    when the last wave is split; the plain kernel (the same bits) when it is not (whole waves, or
    segments too short to pay for the merge)."""
    from wan_fp4.kernels import prepare
    from wan_fp4.kernels.sm90 import aot, host
    from wan_fp4.kernels.sm90.layout import v_layout_args
    from wan_fp4.kernels.sm90.split import plan

    calls = []
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: type("S", (), {"cuda_stream": 7})())
    monkeypatch.setattr(aot.PREBUILT, "run_or_jit", lambda name, args, *a, **k: calls.append((name, args)))
    for h, s, want_split in ((1, 8192, (64, 2)), (66, 256, None), (40, 1024, None)):
        q = torch.randn(1, s, h, 128, dtype=torch.bfloat16)
        ops = prepare.prepare_fp8(q, q, q, backend="torch", **sm90.layout.v_layout_args("direct-p"))
        sm90.launch(ops, "direct-p", 128, config={"split_tail": True})  # direct-p's tail_rows yields
        name, args = calls[-1]
        assert args[15:17] == (want_split or (0, 1))  # after 11 pointers and b, h, s_q, s_kv
        # operands with Q's codes (a full pre-pass): the kernel reads them (quant_q 0)
        if want_split:
            assert name == aot.kernel_name("direct-p", 128, {"split_tail": True, "quant_q": 0})
            assert host.split_workspace(plan(1, h, s, s), 128, "direct-p") == 64 * 2 * 2 * 128 * (68 + 4)
        else:
            assert name == aot.kernel_name("direct-p", 128, {"tail_rows": False, "quant_q": 0})
    # direct-p's default: a short launch's last wave split by rows (segments 2, no workspace), a long
    # one's or one whose last wave is too full, the plain kernel; up to 1,024 tokens the short
    # launches' kernels (config.length_config)
    for h, s, want_split in ((40, 1024, (56, 2)), (3, 1000, (24, 2)), (12, 1024, None), (12, 32760, None)):
        q = torch.randn(1, s, h, 128, dtype=torch.bfloat16)
        ops = prepare.prepare_fp8(q, q, q, backend="torch", **sm90.layout.v_layout_args("direct-p"))
        sm90.launch(ops, "direct-p", 128)
        name, args = calls[-1]
        assert args[15:17] == (want_split or (0, 1))
        short = {"fold": 1, "quant_q": 0} if s <= 1024 else {"quant_q": 0}
        assert name == aot.kernel_name("direct-p", 128, {**short, **({} if want_split else {"tail_rows": False})})


def test_short_launches_run_the_smaller_kernel_unless_the_caller_names_a_config(monkeypatch):
    """Measured faster inside the whole call (BENCHMARKS.md, 2026-12-06 fourteenth run and
    2026-12-07): fold 1 for direct-p at D128 and D64 and fp8 at D128 where both lengths are at most
    1,024 tokens, direct-p D128's object the smaller one; fp8 at D64 measured mixed and keeps its
    defaults."""
    from wan_fp4.kernels import prepare
    from wan_fp4.kernels.sm90 import aot

    for args in (("direct-p", 128, 1024, 1024), ("direct-p", 64, 320, 320), ("fp8", 128, 1024, 1000)):
        assert sm90.length_config(*args).get("fold") == 1, args
    for args in (("direct-p", 128, 1025, 1024), ("direct-p", 128, 32760, 512), ("fp8", 128, 1024, 1025),
                 ("fp8", 64, 320, 320)):
        assert "fold" not in sm90.length_config(*args), args  # longer, Wan's cross attention, fp8 at D64
    folder = aot.PREBUILT.directory
    small = (folder / f"{aot.kernel_name('direct-p', 128, {'fold': 1})}.o").stat().st_size
    assert small < 0.75 * (folder / f"{aot.kernel_name('direct-p', 128)}.o").stat().st_size
    calls = []
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: type("S", (), {"cuda_stream": 7})())
    monkeypatch.setattr(aot.PREBUILT, "run_or_jit", lambda name, args, *a, **k: calls.append(name))
    q = torch.randn(1, 1024, 12, 128, dtype=torch.bfloat16)
    ops = prepare.prepare_fp8(q, q, q, backend="torch", **sm90.layout.v_layout_args("direct-p"))
    sm90.launch(ops, "direct-p", 128)
    sm90.launch(ops, "direct-p", 128, config={})
    # operands with Q's codes (a full pre-pass): the kernels that read them (quant_q 0)
    assert calls == [aot.kernel_name("direct-p", 128, {"fold": 1, "tail_rows": False, "quant_q": 0}),
                     aot.kernel_name("direct-p", 128, {"tail_rows": False, "quant_q": 0})]


def test_persistent_launches_where_measured_and_only_where_every_unit_starts_afresh(monkeypatch):
    """Measured faster inside the whole call (BENCHMARKS.md, 2026-12-07 nineteenth run, H100; the same
    bits): direct-p D128 with both lengths at most 4,096 tokens and key tiles a multiple of 4 runs a
    persistent grid of 132 CTAs; other lengths, D64 and fp8 keep one unit a CTA. The launch takes
    the kernel that makes Q's codes, refuses key counts whose units would not start at stage 0, and
    refuses statistics without room for the unit counter after them (its atomics would land on
    memory the operands do not own)."""
    import dataclasses
    import types

    from wan_fp4.kernels import prepare
    from wan_fp4.kernels.sm90 import aot, host
    from wan_fp4.kernels.sm90.config import PERSISTENT_CTAS
    from wan_fp4.kernels.sm90.kernel import UNIT_COUNTER
    from wan_fp4.kernels.sm90.layout import v_layout_args

    assert UNIT_COUNTER == prepare.UNIT_COUNTER == prepare.RANGE_STATS and PERSISTENT_CTAS == 132
    for s_q, s_kv in ((1024, 1024), (1000, 1000), (77, 512), (2048, 2048), (4096, 3000), (300, 4096)):
        assert sm90.length_config("direct-p", 128, s_q, s_kv)["persistent"] == 132, (s_q, s_kv)
    for mode, d, s_q, s_kv in (("direct-p", 128, 1100, 1100), ("direct-p", 128, 4097, 4097),
                               ("direct-p", 128, 32760, 32760), ("direct-p", 128, 32760, 512),
                               ("direct-p", 128, 640, 640), ("direct-p", 64, 1024, 1024), ("fp8", 128, 1024, 1024)):
        assert "persistent" not in sm90.length_config(mode, d, s_q, s_kv), (mode, d, s_q, s_kv)
    # every kernel a rule can pick is prebuilt (default_kernels), the persistent ones direct-p D128's alone
    for mode in sm90.SUPPORTED_MODES:
        for d in sm90.SUPPORTED_HEAD_DIMS:
            persistent = [c for c in sm90.default_kernels(mode, d) if c["persistent"]]
            assert len(persistent) == (4 if (mode, d) == ("direct-p", 128) else 0), (mode, d)
            assert all(c["quant_q"] for c in persistent)
    launched = []
    monkeypatch.setattr(host.PREBUILT, "run_or_jit", lambda name, args, *a, **k: launched.append((name, args)))
    monkeypatch.setattr(host.torch.cuda, "current_stream", lambda device=None: types.SimpleNamespace(cuda_stream=0))
    g = torch.Generator().manual_seed(0)
    for (s, h), name in (((1024, 40), {"fold": 1, "persistent": 132}), ((2048, 3), {"persistent": 132})):
        q = torch.randn(1, s, h, 128, generator=g).bfloat16()
        ops = prepare.prepare_fp8(q, q, q, backend="torch", **v_layout_args("direct-p"))
        host.launch(ops, "direct-p", 128)  # Q's codes from the pre-pass: no persistent kernel reads them
        assert "persistent" not in launched[-1][0] and "_quant_q0" in launched[-1][0]
        words = torch.zeros(prepare.UNIT_COUNTER + 1)
        ops = dataclasses.replace(ops, q8=None, q_source=q, range_stats=words[: prepare.RANGE_STATS])
        host.launch(ops, "direct-p", 128)
        split = launched[-1][1][15]  # after 11 pointers and b, h, s_q, s_kv
        cfg = {**name, **({} if split else {"tail_rows": False})}
        assert launched[-1][0] == aot.kernel_name("direct-p", 128, cfg), (s, h)
        # the statistics of the torch path have no counter word after them
        with pytest.raises(ValueError, match="ops.range_stats: persistent needs"):
            host.launch(dataclasses.replace(ops, range_stats=torch.zeros(prepare.RANGE_STATS)), "direct-p", 128)
    q = torch.randn(1, 1100, 2, 128, generator=g).bfloat16()
    ops = prepare.prepare_fp8(q, q, q, backend="torch", **v_layout_args("direct-p"))
    ops = dataclasses.replace(ops, q8=None, q_source=q, range_stats=torch.zeros(8)[: prepare.RANGE_STATS])
    host.launch(ops, "direct-p", 128)
    assert "persistent" not in launched[-1][0]  # 9 key tiles: the rule leaves it to one unit a CTA
    with pytest.raises(ValueError, match="persistent needs key tiles .* got 9 for 1100 keys"):
        host.launch(ops, "direct-p", 128, config={"persistent": 132})


def test_persistent_kernel_takes_units_from_the_counter_and_keeps_the_main_loop():
    """persistent (config.length_config's short direct-p D128 launches): a grid capped at the
    option's CTAs, whose producer warp asks the counter for each next unit with one atomic add (and
    one more, the last request's, that puts it back to 0); nothing spills; with fresh pipeline
    states per unit the main loop's waits name constant barriers, so a key tile costs within 1% of
    the one-unit kernel's instructions (docs/SM90_GEN2.md item 68)."""
    from wan_fp4.eval.sass_profile import find_cuobjdump, profile

    for cfg in ({"persistent": 132}, {"fold": 1, "persistent": 132}):
        ptx = ptx_of(compile_kernel("direct-p", 128, **cfg, options=KEEP))
        plain = ptx_of(compile_kernel("direct-p", 128, **{**cfg, "persistent": 0}, options=KEEP))
        adds = re.findall(r"\batom(\.\w+)*\.add\.[su]32", ptx)
        assert len(adds) == 2 and not re.findall(r"\batom(\.\w+)*\.add\.[su]32", plain), cfg
        assert not re.search(r"\b(ld|st)\.local", ptx), "register spills to local memory"
    if find_cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton) to disassemble the cubin")
    base = profile("direct-p", 128)["loop"].steady_counts
    units = profile("direct-p", 128, persistent=132)["loop"].steady_counts
    assert units["wgmma"] == base["wgmma"]
    assert sum(units.values()) <= 1.01 * sum(base.values()), (sum(units.values()), sum(base.values()))


def test_persistent_refusals():
    from wan_fp4.kernels.sm90.kernel import Sm90Attention

    for options in ({"quant_q": 0}, {"split_tail": True}, {"pingpong": 2}, {"cluster": 2}):
        with pytest.raises(ValueError, match="persistent needs quant_q and excludes"):
            Sm90Attention("direct-p", 128, **{"quant_q": 2, "pdl": True, "persistent": 132, **options})


def test_split_tail_is_fp8s_default_with_its_plain_kernel_beside_it():
    """Measured faster (BENCHMARKS.md, 2026-12-05, both runs): fp8 at D128 and D64 splits its last
    partial wave; the launches the plan does not split run the same kernel without the option,
    prebuilt too. direct-p keeps it off (0.9945x at H40 S75600)."""
    from wan_fp4.kernels.sm90 import aot

    for d in (128, 64):
        assert sm90.default_config("fp8", d)["split_tail"] is True
        names = [aot.kernel_name("fp8", d, c) for c in sm90.launch_configs("fp8", d)]
        assert names == [f"wanfp4_sm90_fp8_d{d}", f"wanfp4_sm90_fp8_d{d}_split_tail0"]
    assert not any(sm90.default_config("direct-p", d)["split_tail"] for d in (128, 64))
    # direct-p splits a short launch's last wave by rows instead, its plain kernel beside it, and
    # makes Q's codes in the kernel, both again with Q's codes from the pre-pass (host.run's fallback)
    for d in (128, 64):
        names = [aot.kernel_name("direct-p", d, c) for c in sm90.launch_configs("direct-p", d)]
        assert names == [f"wanfp4_sm90_directp_d{d}", f"wanfp4_sm90_directp_d{d}_tail_rows0",
                         f"wanfp4_sm90_directp_d{d}_quant_q0", f"wanfp4_sm90_directp_d{d}_quant_q0_tail_rows0"]


@pytest.mark.parametrize("mode", ["direct-p", "fp8"])
def test_pdl_waits_for_the_launch_before_it_ahead_of_any_global_memory_access(mode):
    """pdl (every config's default: the kernel as a programmatic dependent of the pre-pass's
    quantise launch): every thread passes one griddepcontrol.wait before the first global load,
    store or TMA copy, so the kernel never reads codes still being written; without pdl there is no
    grid dependency control. (The launch attribute is host code, not in the PTX: the GPU check
    compares the output with and without it.) With Q's codes from the pre-pass (quant_q 0);
    direct-p's default quant_q 2 reads BF16 Q before its waits, which
    test_quant_q_makes_q_codes_before_the_first_product places."""
    assert all(sm90.default_config(m, d)["pdl"] for m in ("direct-p", "fp8") for d in (64, 128))
    ptx = ptx_of(compile_kernel(mode, 128, split_tail=False, tail_rows=False, quant_q=0, options=KEEP))
    body = ptx[ptx.index("{", ptx.index(".entry")):]
    assert body.count("griddepcontrol.wait") == 1
    first = re.search(r"\b(ld\.global|st\.global|atom\.global|red\.global|cp\.async\.bulk)", body)
    assert first and body.index("griddepcontrol.wait") < first.start(), first
    no_pdl = compile_kernel(mode, 128, pdl=False, split_tail=False, quant_q=0, options=KEEP)
    assert "griddepcontrol" not in ptx_of(no_pdl)


def test_quant_q_swizzle_is_the_q_tiles_layout():
    """quant_q writes Q's codes by hand into sQ: its XOR mask (kernel.Q_SWIZZLE_MASK) must be the
    swizzle sm90_utils.make_smem_layout_a gives the Q tile, over rows of D bytes stacked plainly
    (offset w * 64 * D + r * D + c, then bits 4.. XOR bits 7..)."""
    import cutlass
    import cutlass.cute as cute
    import cutlass.utils as utils
    import cutlass.utils.hopper_helpers as sm90_utils

    from wan_fp4.kernels.sm90.kernel import Q_SWIZZLE_MASK

    seen = {}

    @cute.jit
    def layouts():
        for d in (128, 64):
            lay = sm90_utils.make_smem_layout_a(utils.LayoutEnum.ROW_MAJOR, (64, 128, d), cutlass.Float8E4M3FN, N_WG)
            seen[d] = (str(lay.inner), str(lay.offset), str(lay.outer))

    layouts()
    for d, (swizzle, offset, outer) in seen.items():
        bits, base, shift = (int(x) for x in re.fullmatch(r"S<(\d),(\d),(\d)>", swizzle).groups())
        assert (base, shift, offset) == (4, 3, "0")
        assert Q_SWIZZLE_MASK[d] == ((1 << bits) - 1) << base
        assert outer == f"((8,8),({d},1),(1,{N_WG})):(({d},{8 * d}),(1,0),(0,{64 * d}))"


@pytest.mark.parametrize("mode,head_dim", [("direct-p", 128), ("direct-p", 64), ("fp8", 128), ("fp8", 64)])
def test_quant_q_makes_q_codes_before_the_first_product(tmp_path, mode, head_dim):
    """quant_q: no TMA load of Q; each consumer thread loads whole 16-byte runs of BF16 Q, takes
    the amax with max.NaN on BF16 pairs, exchanges it at a 256-thread named barrier, writes 16-byte
    chunks of E4M3 codes, fences them for the async proxy and meets again before the first QGMMA;
    the scale goes to q_scale and the range statistics by a reduction. quant_q 2 reads Q before
    the pdl wait, 1 after it. Every config takes it: fp8's short D128 kernel with its CTA pairs and
    split tail too."""
    plain = _sass(tmp_path, mode, head_dim, fold=1, quant_q=0)
    for n in (1, 2):
        sass = _sass(tmp_path, mode, head_dim, fold=1, quant_q=n)
        assert sass.count("UTMALDG") == plain.count("UTMALDG") - N_WG  # Q's loads gone (K's and V^T's stay)
        first = sass.index("QGMMA")
        pro = sass[:first]
        assert pro.count("LDG.E.128") == head_dim // 16
        assert "HMNMX2.BF16_V2.NAN" in pro and "F2FP.SATFINITE.E4M3.F32" in pro
        assert pro.count("STS.128") == head_dim // 32
        assert pro.count("BAR.SYNC.DEFER_BLOCKING 0x9, 0x100") == 2
        fence = pro.rindex("FENCE.VIEW.ASYNC.S")
        assert pro.rindex("STS.128") < fence < pro.rindex("BAR.SYNC.DEFER_BLOCKING 0x9, 0x100")
        assert sass.count("REDG.E.MAX") == plain.count("REDG.E.MAX") + 2
        # quant_q 2: the producer's wait, and the consumers' after their prologue's last barrier;
        # quant_q 1: one wait for every thread before any load
        assert sass.count("ACQBULK") == n
        if n == 2:
            assert pro.rindex("BAR.SYNC.DEFER_BLOCKING 0x9, 0x100") < sass.rindex("ACQBULK") < sass.index("REDG")
        else:
            assert sass.index("ACQBULK") < sass.index("LDG.E.128")
    assert "HMNMX2.BF16" not in plain


def test_quant_q_refusals():
    from wan_fp4.kernels.sm90.kernel import Sm90Attention

    with pytest.raises(ValueError, match="quant_q must be"):
        Sm90Attention("direct-p", 128, quant_q=3)
    with pytest.raises(ValueError, match="needs pdl"):
        Sm90Attention("direct-p", 128, quant_q=2, pdl=False)


def test_run_leaves_q_to_the_kernel_where_quant_q_can(monkeypatch):
    """A config with quant_q (direct-p's default, not fp8's): the pre-pass skips Q and the kernel
    gets BF16 Q, unless Q is not BF16 and contiguous or an LSE is asked for (its shift reads Q's
    codes); then the pre-pass makes them and the launch runs the kernel with quant_q 0 on them (the
    same bits), as it does for any caller handing it operands with Q's codes (the check, the
    benches)."""
    import dataclasses
    import types

    from wan_fp4.kernels import prepare
    from wan_fp4.kernels.sm90 import aot, host
    from wan_fp4.kernels.sm90.layout import v_layout_args

    real, seen, launched = prepare.prepare_fp8, [], []

    def spy(*a, **kw):
        seen.append(kw["quantise_q"])
        return real(*a, **kw)

    def fake_run_or_jit(name, args, device, jit, prebuilt=None, missing=""):
        launched.append(name)

    monkeypatch.setattr(prepare, "prepare_fp8", spy)
    monkeypatch.setattr(host.PREBUILT, "run_or_jit", fake_run_or_jit)
    monkeypatch.setattr(host.torch.cuda, "current_stream", lambda device=None: types.SimpleNamespace(cuda_stream=0))
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 130, 2, 64, generator=g).bfloat16() for _ in range(3))
    short = {"fold": 1}
    host.run(q, k, v, "direct-p")  # the defaults: quant_q 2 at every length (config.MODE_CONFIG)
    host.run(q, k, v, "direct-p", return_lse=True)
    host.run(q.transpose(1, 2).contiguous().transpose(1, 2), k, v, "direct-p")
    host.run(q.half(), k, v, "direct-p")
    host.run(q, k, v, "direct-p", config={**short, "quant_q": 0})
    host.run(q, k, v, "fp8")
    host.run(q, k, v, "fp8", config={**short, "quant_q": 2})
    assert seen == [False, True, True, True, True, True, False]
    made, read = aot.kernel_name("direct-p", 64, sm90.default_config("direct-p", 64, short)), \
        aot.kernel_name("direct-p", 64, sm90.default_config("direct-p", 64, {**short, "quant_q": 0}))
    assert launched[:5] == [made, read, read, read, read]
    assert read.endswith("_quant_q0") and "quant_q" not in made
    assert "quant_q" not in launched[5] and "_quant_q2" in launched[6]  # fp8 takes it when asked
    # operands with Q's codes from a full pre-pass: quant_q 0 whatever the config asks
    ops = real(q, k, v, backend="torch", **v_layout_args("direct-p"))
    host.launch(ops, "direct-p", 64, config={**short, "quant_q": 2})
    assert launched[-1] == read
    # operands without them need a config with quant_q and a BF16 q_source
    ops = dataclasses.replace(ops, q8=None, q_source=q)  # as quantise_q=False leaves them
    with pytest.raises(ValueError, match="has no quant_q"):
        host.launch(ops, "direct-p", 64, config={**short, "quant_q": 0})
    with pytest.raises(ValueError, match="q: quant_q needs BF16"):
        host.launch(dataclasses.replace(ops, q_source=q.half()), "direct-p", 64, config=short)
    host.launch(ops, "direct-p", 64, config=short)
    assert launched[-1] == made


@pytest.mark.parametrize("gain", [1.0, 800.0, 6400.0, 1e8])
def test_score_range_check_without_q_codes_requantises_q(gain):
    """With Q's codes made in the kernel (q8 None), a check past the loose bound quantises Q again on
    the host: the same verdict as with the pre-pass's codes, near the limit and past it."""
    import dataclasses

    from wan_fp4.kernels import prepare

    g = torch.Generator().manual_seed(1)
    q = torch.zeros(1, 200, 2, 64)
    q[:, :, :, 5] = gain  # one large channel: the row norms sit far below the scales' bound
    q = (q + torch.randn(q.shape, generator=g)).bfloat16()
    k, v = (torch.randn(1, 200, 2, 64, generator=g).bfloat16() * 30 for _ in range(2))
    ops = prepare.prepare_fp8(q, k, v, backend="torch")
    verdicts = []
    for o in (ops, dataclasses.replace(ops, q8=None, q_source=q)):
        try:
            o.check_score_range("direct-p", 0.125)
            verdicts.append("ok")
        except ValueError as e:
            verdicts.append(str(e))
    assert verdicts[0] == verdicts[1]
