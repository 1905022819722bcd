"""Peers in the drift report: a peer attention function replaces the calls a mode would take, on the
stock processors through the attention tap, and feeds every per-mode part; which peers run here."""
import json
import sys

import pytest
import torch

from wan_fp4 import cli, dispatch
from wan_fp4.eval import drift as D
from wan_fp4.eval import peers as PEERS

GEOMETRY = ["--model", "tiny-random", "--height", "32", "--width", "32", "--frames", "5"]  # 2 blocks, random weights


def _direct_p(q, k, v):
    # what the direct-p mode computes here (the reference on CPU), reached through the peer path
    return dispatch.attention(q, k, v, mode="direct-p")


def _exact(q, k, v):
    out = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return out.transpose(1, 2)


@pytest.fixture
def fake_peers(monkeypatch):
    """Two peers registered like peers.py's own, with no device needs, so they run on this CPU."""
    for name, fn in (("fake-direct-p", _direct_p), ("fake-exact", _exact)):
        monkeypatch.setitem(PEERS._FACTORIES, name, lambda fn=fn: fn)
        monkeypatch.setitem(PEERS.PEER_LABELS, name, f"test peer {name}")


def test_a_peer_feeds_every_part_of_the_report_like_a_mode(tmp_path, fake_peers):
    out = tmp_path / "rep"
    argv = ["drift", *GEOMETRY, "--steps", "2", "--modes", "bf16,direct-p", "--peers", "fake-direct-p,fake-exact",
            "--policies", "none", "--time-repeats", "0", "--capture-steps", "last", "--capture-rows", "4",
            "--accuracy", "on", "--accuracy-prompts", "1", "--accuracy-seeds", "0", "--out", str(out)]
    assert cli.main(argv) == 0
    d = json.loads((out / "drift.json").read_text())
    md = (out / "drift.md").read_text()
    runs = {r["mode"]: r for r in d["runs"]}
    assert set(runs) == {"bf16", "direct-p", "peer:fake-direct-p", "peer:fake-exact"}

    # The peer computing direct-p lands exactly on the direct-p mode's numbers; had its output not
    # replaced the calls, it would sit on the control (0) like the exact peer.
    mode, peer, exact = runs["direct-p"], runs["peer:fake-direct-p"], runs["peer:fake-exact"]
    assert mode["rel_l2"] > 0
    assert (peer["cosine"], peer["rel_l2"], peer["max_abs"]) == (mode["cosine"], mode["rel_l2"], mode["max_abs"])
    assert peer["trajectory"] == mode["trajectory"]
    assert exact["rel_l2"] == 0.0 and exact["cosine"] == 1.0
    # self-attention only (no --cross-attention): 2 blocks x 2 steps x 2 CFG branches of each kind
    assert peer["kernels"] == {"peer:fake-direct-p / self": 8, "stock / cross": 8}

    frames = {f["mode"]: f for f in d["frames"]}
    assert frames["peer:fake-direct-p"]["psnr_db"] == frames["direct-p"]["psnr_db"]
    assert frames["peer:fake-direct-p"]["ssim"] == frames["direct-p"]["ssim"]

    errors = {(e["mode"], e["layer"]): e for e in d["layer_errors"]}
    for layer in (0, 1):
        got, want = errors[("peer:fake-direct-p", layer)], errors[("direct-p", layer)]
        assert got["kernel"] == "peer" and got["rel_l2"] == want["rel_l2"] > 0

    acc = d["accuracy"]
    assert list(acc["modes"]) == ["bf16", "direct-p", "peer:fake-direct-p", "peer:fake-exact"]
    assert acc["videos"]["peer:fake-direct-p"] == acc["videos"]["direct-p"]

    assert d["peers"] == {"run": {"peer:fake-direct-p": "test peer fake-direct-p",
                                  "peer:fake-exact": "test peer fake-exact"},
                          "skipped": {}, "kinds": ["self"]}
    for section in ("## Final latent", "## Per-layer", "## Decoded frames", "## Prompt accuracy"):
        assert "| peer:fake-direct-p |" in md.split(section)[1].split("\n## ")[0], section
    assert "peers (attention kernels that are not wan_fp4's" in md and "peers skipped" not in md


def test_cross_attention_sends_the_cross_calls_to_the_peer_too(tmp_path, fake_peers):
    out = tmp_path / "cross"
    argv = ["drift", *GEOMETRY, "--steps", "1", "--modes", "direct-p", "--peers", "fake-direct-p",
            "--cross-attention", "--policies", "none", "--time-repeats", "0", "--capture-steps", "none",
            "--decode-steps", "none", "--out", str(out)]
    assert cli.main(argv) == 0
    d = json.loads((out / "drift.json").read_text())
    runs = {r["mode"]: r for r in d["runs"]}
    assert runs["peer:fake-direct-p"]["kernels"] == {"peer:fake-direct-p / cross": 4,
                                                     "peer:fake-direct-p / self": 4}
    assert runs["peer:fake-direct-p"]["rel_l2"] == runs["direct-p"]["rel_l2"] > 0
    assert d["peers"]["kinds"] == ["self", "cross"]


def _refusing(q, k, v):
    raise RuntimeError(f"no plan for q {tuple(q.shape)}")


def test_a_failing_peer_is_reported_in_every_part_and_the_rest_still_runs(tmp_path, monkeypatch):
    monkeypatch.setitem(PEERS._FACTORIES, "refusing", lambda: _refusing)
    monkeypatch.setitem(PEERS.PEER_LABELS, "refusing", "test peer that raises")
    out = tmp_path / "fail"
    argv = ["drift", *GEOMETRY, "--steps", "1", "--modes", "direct-p", "--peers", "refusing", "--policies", "none",
            "--time-repeats", "0", "--capture-steps", "first", "--capture-rows", "4", "--accuracy", "on",
            "--accuracy-prompts", "1", "--accuracy-seeds", "0", "--out", str(out)]
    assert cli.main(argv) == 0
    d = json.loads((out / "drift.json").read_text())
    md = (out / "drift.md").read_text()
    why = "RuntimeError: no plan for q (1, 8, 2, 32)"  # tiny: 8 tokens, 2 heads of 32
    runs = {r["mode"]: r for r in d["runs"]}
    assert runs["peer:refusing"]["error"] == why and runs["peer:refusing"]["rel_l2"] is None
    assert runs["direct-p"]["rel_l2"] > 0
    assert [f["mode"] for f in d["frames"]] == ["direct-p"]
    assert {e["error"] for e in d["layer_errors"] if e["mode"] == "peer:refusing"} == {why}
    assert d["accuracy"]["modes"]["peer:refusing"] == {"colour": None, "shape": None, "direction": None,
                                                        "all": None, "error": why}
    assert "| 1 | peer:refusing | **nan** |" in md and f"Failed: peer:refusing: {why}" in md


def _fake_cudnn_factory():
    return _exact


def test_default_peers_run_where_they_can_and_are_skipped_with_the_reason_elsewhere(monkeypatch):
    # CPU: skipped, never an error, unless named
    found, skipped = D.select_peers(None, "cpu")
    assert found == {} and "CUDA" in skipped["cudnn-fp8"]
    assert D.select_peers((), "cpu") == ({}, {})
    with pytest.raises(D.PeerUnavailable, match="cudnn-fp8 cannot run here: needs a CUDA GPU"):
        D.select_peers(("cudnn-fp8",), "cpu")

    # A GPU as the selection sees it: its compute capability, then the package import.
    capability = [(9, 0)]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability[0])
    monkeypatch.setitem(sys.modules, "cudnn", None)  # cudnn-frontend not installed
    found, skipped = D.select_peers(None, "cuda")
    assert found == {} and "cudnn-frontend" in skipped["cudnn-fp8"]
    monkeypatch.setitem(PEERS._FACTORIES, "cudnn-fp8", _fake_cudnn_factory)  # installed
    assert D.select_peers(None, "cuda") == ({"cudnn-fp8": _exact}, {})
    capability[0] = (10, 0)
    assert D.select_peers(None, "cuda") == ({"cudnn-fp8": _exact}, {})
    capability[0] = (8, 9)  # Ada: no cuDNN FP8 SDPA
    found, skipped = D.select_peers(None, "cuda")
    assert found == {} and skipped == {"cudnn-fp8": "needs compute capability sm90 or newer; this GPU is sm89"}
    with pytest.raises(D.PeerUnavailable, match="sm89"):
        D.select_peers(("cudnn-fp8",), "cuda")


def test_cli_refuses_a_named_peer_that_cannot_run_before_loading_anything(tmp_path, capsys):
    for peers, message in (("cudnn-fp8", "--peers: cudnn-fp8 cannot run here: needs a CUDA GPU; this run is on cpu"),
                           ("nope", "peers: unknown ['nope']"),
                           ("cudnn-fp8-kernel", "peers: unknown ['cudnn-fp8-kernel']"),  # FP8 codes, not outputs
                           ("cudnn-fp8,cudnn-fp8", "peers has duplicates")):
        with pytest.raises(SystemExit) as exc:
            cli.main(["drift", "--peers", peers, "--out", str(tmp_path / "r")])
        assert exc.value.code == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("q,kv", [((1, 320, 4, 64), (1, 320, 4, 64)),     # the trained model's video tokens
                                  ((1, 320, 4, 64), (1, 512, 4, 64)),     # its text keys (cross-attention)
                                  ((2, 7680, 12, 128), (2, 7680, 12, 128)), ((1, 5, 1, 16), (1, 3, 1, 16))])
def test_cudnn_fp8_takes_head_dim_64_and_any_lengths(q, kv):
    PEERS.check_cudnn_fp8_shapes(*(torch.empty(s, device="meta") for s in (q, kv, kv)))


@pytest.mark.parametrize("q,k,v,message", [
    ((1, 320, 4, 72), (1, 320, 4, 72), (1, 320, 4, 72), "head dim that is a multiple of 16, got 72"),
    ((1, 320, 4, 64), (1, 320, 2, 64), (1, 320, 2, 64), "must share batch, heads and head dim"),
    ((1, 320, 4, 64), (1, 512, 4, 64), (1, 320, 4, 64), "k and v their length"),
    ((320, 4, 64), (320, 4, 64), (320, 4, 64), r"takes \(B, S, H, D\) tensors"),
])
def test_cudnn_fp8_refuses_shapes_it_cannot_take(q, k, v, message):
    with pytest.raises(ValueError, match=message):
        PEERS.check_cudnn_fp8_shapes(*(torch.empty(s, device="meta") for s in (q, k, v)))
