"""CPU-only checks of the short-head pre-pass (wan_fp4/kernels/sm90/prepass.py): which inputs it
takes, that its V^T stores write the attention kernel's key order, and that it compiles for sm_90a
to one cluster exchange with 16-byte loads and stores, 64-bit addressing and no spills. Its bytes
against prepare_fp8's need the GPU: `wan-fp4 check --kernels sm90-cute` (probe "short-prepass")."""
from __future__ import annotations

import collections
import re
import tempfile
from pathlib import Path

import pytest
import torch

from wan_fp4.kernels import prepare
from wan_fp4.kernels.sm90 import prepass
from wan_fp4.kernels.sm90.layout import key_permutation

DUMP = Path(tempfile.mkdtemp(prefix="wan_fp4_prepass_dump_"))


def _qkv(b=1, s=1024, h=4, d=128, dtype=torch.bfloat16):
    return tuple(torch.randn(b, s, h, d).to(dtype) for _ in range(3))


def test_v_stores_write_the_attention_kernels_key_order():
    got = prepass.v_columns()
    assert [got[c] for c in range(128)] == key_permutation(128).tolist()


@pytest.mark.parametrize("d", [64, 128])
def test_every_thread_holds_whole_16_byte_rows_of_the_block(d):
    cg, rg, rows = prepass.geometry(d)
    assert cg * 8 == d and rg * rows == 128 and cg * rg == prepass.threads(d) and rows % 4 == 0


def test_the_short_path_takes_self_attention_of_at_most_1024_bf16_tokens():
    ok = _qkv()
    assert prepass.short_reason(*ok) == ""
    assert prepass.short_reason(*_qkv(s=1, d=64)) == ""
    fused = torch.randn(2, 700, 3, 3, 64).bfloat16().unbind(2)  # views of one QKV projection
    assert prepass.short_reason(*fused) == ""
    q, k, v = ok
    assert "self-attention" in prepass.short_reason(q, k[:, :512], v[:, :512])
    assert "at most 1024 tokens" in prepass.short_reason(*_qkv(s=1025))
    assert "head dim" in prepass.short_reason(*_qkv(d=96))
    many = torch.empty(1, 1, 1, 128, dtype=torch.bfloat16).expand(2, 8, 32768, 128)  # B * H = 65,536 heads
    assert "B * H <= 65535" in prepass.short_reason(many, many, many)
    assert "q must be bfloat16" in prepass.short_reason(*_qkv(dtype=torch.float16))
    odd = torch.randn(1, 300, 2, 130).bfloat16()[..., :128]  # rows 260 bytes apart: not 16-byte aligned
    assert "16-byte aligned" in prepass.short_reason(odd, odd, odd)
    strided = torch.randn(1, 300, 2, 256).bfloat16()[..., ::2]
    assert "contiguous" in prepass.short_reason(strided, strided, strided)


def test_operands_take_the_short_path_only_where_allowed_and_suited(monkeypatch):
    from wan_fp4.kernels.sm90 import config

    calls = []
    monkeypatch.setattr(prepass, "prepare_short", lambda q, k, v, mode: calls.append(mode) or "short")
    q, k, v = _qkv(s=300, h=2, d=64)
    # taken: the kernel follows as the pre-pass's programmatic dependent
    assert prepass.operands(q, k, v, "fp8", short=True) == ("short", config.SHORT_CONFIG) and calls == ["fp8"]
    assert config.SHORT_CONFIG == {"pdl": True}
    # off (the default until it has run on a GPU): prepare_fp8, here its torch path
    monkeypatch.setattr(config, "SHORT_PREPASS", False)
    ops, options = prepass.operands(q, k, v, "direct-p")
    assert isinstance(ops, prepare.PreparedFP8) and ops.v_ones_rows and options == {} and calls == ["fp8"]
    monkeypatch.setattr(config, "SHORT_PREPASS", True)
    assert prepass.operands(q, k, v, "direct-p")[0] == "short"
    # inputs it refuses go to prepare_fp8 whatever the switch says: the same bytes
    ops, options = prepass.operands(q, k[:, :100], v[:, :100], "direct-p", short=True)
    assert isinstance(ops, prepare.PreparedFP8) and options == {} and calls == ["fp8", "direct-p"]


def test_the_call_launches_the_kernel_with_the_options_that_follow_its_operands(monkeypatch):
    from wan_fp4.kernels.sm90 import host

    seen = []

    class Ops:
        def start_score_range_check(self, mode, scale):
            return type("Check", (), {"finish": lambda self: None})()

    def launch(ops, mode, d, scale=None, *, config=None, prebuilt=None):
        seen.append(config)
        return torch.zeros(1, 3, 1, d), None

    monkeypatch.setattr(host, "launch", launch)
    q, k, v = _qkv(s=3, h=1, d=64)
    for options in ({"pdl": True}, {}):
        monkeypatch.setattr(prepass, "operands", lambda q, k, v, mode, options=options: (Ops(), options))
        host.run(q, k, v, "direct-p", config={"fold": 2})
    assert seen == [{"pdl": True, "fold": 2}, {"fold": 2}]


@pytest.mark.parametrize("mode", ["direct-p", "fp8"])
@pytest.mark.parametrize("d", [64, 128])
def test_compiles_to_one_cluster_exchange_with_wide_accesses_and_no_spills(mode, d):
    pytest.importorskip("cutlass")
    from ptx_addressing import AddressAudit, global_accesses

    from wan_fp4.eval import sass_profile
    from wan_fp4.kernels.sm90.compile import cubin_of, ptx_of

    dump = DUMP / f"{mode}{d}"
    dump.mkdir(exist_ok=True)
    compiled = prepass.compile_prepass(mode, d, options=f"--keep-ptx --keep-cubin --dump-dir {dump}")
    ptx = ptx_of(compiled)
    wanted = r"\b((?:ld|st)\.global[\w.]*|barrier\.cluster\.\w+|ld\.shared::cluster\.\w+|cp\.async[\w.]*)"
    ops = collections.Counter(re.findall(wanted, ptx))
    rows = prepass.geometry(d)[2]
    # one barrier to exchange the column partials, one so that no CTA leaves while read
    assert ops["barrier.cluster.arrive"] == ops["barrier.cluster.wait"] == 2
    # every block's partials loaded before the sums wait on them: one load of each per block, unrolled
    assert ops["ld.shared::cluster.f64"] == ops["ld.shared::cluster.f32"] == prepass.MAX_BLOCKS
    # Q, K, V: 16 bytes per row of the thread
    assert ops["ld.global.v4.b32"] == 3 * rows
    assert ops["st.global.v2.b32"] == 2 * rows  # Q and K codes: 8 per row of the thread
    assert ops["st.global.v4.b32"] == d * prepass.PIECES // prepass.threads(d)  # V^T in 16-byte pieces
    assert ".local" not in ptx
    # the attention kernel may start once every CTA is past this (config.SHORT_CONFIG's pdl)
    assert ptx.count("griddepcontrol.launch_dependents") == 1
    audit = AddressAudit(ptx)
    for a in global_accesses(audit.instrs):
        assert not audit.narrow_products(a), a.text
    exe = sass_profile.find_cuobjdump()
    if exe is None:
        pytest.skip("no cuobjdump to read the SASS")
    cubin = cubin_of(compiled)
    instrs = sass_profile.parse_sass(sass_profile._cuobjdump(cubin, "-sass", exe))
    sass = collections.Counter(i.base for i in instrs)
    assert sass["LDL"] == sass["STL"] == 0
    # its statistics on BF16 pairs (max.NaN, which also carries the non-finite flags), not value by
    # value: at most 12 instructions per value of Q, K and V a thread holds, beside 600 for the
    # exchange and reductions (each value's own flag test and maximum took 17.5 at D128, 21 at D64)
    assert sass["HMNMX2"] >= 3 * 4 * rows  # K's maxima and minima, V's and Q's maxima: a word a row
    assert len(instrs) <= 12 * 3 * 8 * rows + 600, len(instrs)
    res = sass_profile.resources(sass_profile._cuobjdump(cubin, "-res-usage", exe))
    assert res["stack"] == 0
    assert res["reg"] * prepass.threads(d) <= 65536  # the CTA fits the register file


def test_prebuilt_objects_export_the_signature_prepare_short_passes():
    """Each (mode, D) has its pre-pass prebuilt, with the signature prepare_short passes, and the
    attention kernel that follows it (host.launch's config for at most 1,024 keys)."""
    from wan_fp4.kernels import aot
    from wan_fp4.kernels.sm90 import default_config
    from wan_fp4.kernels.sm90.aot import PREBUILT, kernel_name
    from wan_fp4.kernels.sm90.config import SHORT_CONFIG

    rebuild = "run `python scripts/build_prebuilt.py --only sm90`"
    for mode in ("direct-p", "fp8"):
        for d in (64, 128):
            name = prepass.prepass_name(mode, d)
            assert PREBUILT.check(name) is None, rebuild
            header = (PREBUILT.directory / f"{name}.h").read_text()
            assert tuple(t for t, _ in aot.wrapper_signature(header, name)) == prepass.SIGNATURE
            after = kernel_name(mode, d, {**default_config(mode, d, SHORT_CONFIG), "split_tail": False})
            assert PREBUILT.check(after) is None, rebuild
