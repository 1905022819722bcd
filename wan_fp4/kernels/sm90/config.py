"""The sm90 kernel's launch options: the defaults every launch and every prebuilt kernel uses."""
from __future__ import annotations

from ...modes import DIRECT_P_HEADROOM, TILE_M, TILE_N
from .split import SPLIT_WAVE

# The CTA's shape, the same for every config: a producer warp group and N_WG consumer warp groups of
# WG_M query rows each (a query tile of modes.TILE_M rows)
WG_M = 64
N_WG = TILE_M // WG_M

# Chosen by measurement (BENCHMARKS.md): the PV tile is folded into FP32 every four key tiles
# (512 keys: half the fold FFMAs of every two), and each warp group issues QK(n+1) before PV(n)
# (intra, FA3's intra-warp-group order); together 2-4% faster for direct-p and 5-6% for fp8 at the
# Wan shapes, with the error against exact attention unchanged.
DEFAULT_CONFIG = {"stages": 2, "fold": 4, "intra": True, "f16_bytes": False, "cluster": 1, "headroom": 0,
                  "pingpong": 0, "sum_tree": False, "split_tail": False, "pdl": True, "tail_rows": False,
                  "sv_early": False, "quant_q": 0, "persistent": 0}
# pdl: the kernel launches as a programmatic dependent of the pre-pass's quantise launch (which lets
# it start at once), so its launch and barrier set-up run under that launch's last programs. Paired
# on H100s, the whole call from a CUDA graph at 1,024 tokens is 2.1-2.5% faster for direct-p on two
# machines and -0.2 to +0.7% on a third (fp8 2.6-3.5%), 0.7-1.4% at 2,048; from 4,096 up no change
# beyond what two identical kernels show (BENCHMARKS.md, 2026-12-05 tenth run).
# Per-mode changes: direct-p makes its P bytes through f16 (1.75 instead of 2.75 instructions per
# score; docs/SM90_GEN2.md item 1), bit-identical and 4-5% faster at the Wan shapes; and its codes
# with the row reference held (headroom, item 12: no row max per tile; 0 = the running max).
# fp8's two warp groups take turns to issue, each handing over once its products are done
# (pingpong 2, item 13): the same arithmetic, 1-3.5% faster at D128 in two runs, 1% slower at D64
# (direct-p loses 10% with it). direct-p splits a short launch's last partial wave by rows
# (tail_rows, split.py; item 41): the same bits, the kernel 2-3.6% faster at H40 1,024 tokens D128
# and 9% where every tile of a small launch splits; it has no turns to take, which fp8's has.
# sv_early: the epilogue's V scales are loaded while the last PV runs (the same bits). Paired on an
# H100 (BENCHMARKS.md, 2026-12-06 eleventh run): direct-p's kernel 1.1-1.5% faster for the Wan cross
# attention (512 keys), 2-3% at D64 short lengths (the trained model's self attention), within the
# spread at H40 1,024 tokens D128 and at H12 S32760; fp8 at D64 3.3-4.5% faster at 1,024 tokens, at
# D128 0.4-2.7% slower (so fp8's D128 keeps the scales' loads in the epilogue).
# quant_q: the kernel makes Q's E4M3 codes from BF16 Q (docs/SM90_GEN2.md item 59), so the pre-pass
# leaves Q out; 2 reads Q before the pdl wait, under the quantise launch (1, after it, was slower
# everywhere; it serves a config without pdl). The same bits; paired inside the whole call on an H100
# (BENCHMARKS.md, 2026-12-07 eleventh run), direct-p 0.8-1.8 us faster replayed at H40 1,024 tokens
# D128, 2.1-4.2 at 2,048 and 6-19 at 4,096; fp8 not faster (0.8-1.5 us slower at H40 1,024 with the
# inputs just written), so fp8 keeps its Q in the pre-pass. Where the kernel cannot take Q (not BF16
# and contiguous, or an LSE asked for) host.run runs the same kernel with quant_q 0.
MODE_CONFIG = {"direct-p": {"f16_bytes": True, "headroom": DIRECT_P_HEADROOM, "tail_rows": True, "sv_early": True,
                            "quant_q": 2},
               "fp8": {"pingpong": 2}}
# Per (mode, head dim), over the mode's: fp8 at D128 sums each tile's p as a tree (its 32 additions
# per row half had been one dependent chain) and shares each K and V^T load between CTA pairs
# (cluster 2): together 0.35-0.7% (H12 S32760) and 1.0-1.6% (H40 S32760) faster in two paired
# runs, the same P bytes (BENCHMARKS.md, 2026-12-04 fifth run), 3-6% slower at 1,024-4,096 tokens;
# at D64 11% slower, so D64 keeps the mode's options. And its last partial wave split along the keys
# (split_tail, split.py): 2.0-3.2% faster at H12 S32760 in every round of a paired run, the plain
# kernel where the plan splits nothing (BENCHMARKS.md, 2026-12-05); at D64 0.7-2.8% faster there in
# every round, H40 unchanged (BENCHMARKS.md, 2026-12-05, second run).
HEAD_DIM_CONFIG = {("fp8", 128): {"sum_tree": True, "cluster": 2, "split_tail": True},
                   ("fp8", 64): {"split_tail": True, "sv_early": True}}
# Options only one mode has (the kernel refuses them in the other): a config list meant for both
# modes (wan-fp4 check --configs, build_prebuilt.py --sm90-config, the benches) skips the other.
MODE_ONLY = {"f16_bytes": "direct-p", "headroom": "direct-p", "sum_tree": "fp8", "tail_rows": "direct-p",
             "persistent": "direct-p"}


# A short launch's kernel, over (mode, D)'s defaults where the query and key lengths are both at most
# SHORT_TOKENS. There a CTA runs its few key tiles once and the launch a few rounds, so most of its
# code runs once a CTA, fetched again after the pre-pass's launches (the kernel alone takes 29 us
# after itself at B1 H40 1,024 tokens D128, 33 after other launches). Fold 1 (a loop body of two key
# tiles; direct-p D128's object 72 KB against fold 4's 114 KB), paired inside the whole call on H100s
# (replayed from a CUDA graph | with the inputs just written): direct-p D128 6.3-6.8% | 9.1-11.3%
# faster at H40 1,024, 1.4-2.4% at H12 1,024, within the spread at 2,048 tokens and slower from
# 4,096 (BENCHMARKS.md, 2026-12-06 fourteenth run); fp8 D128 4.6-5.6% | 8.0-9.2% at H40 1,024 and
# 2.8-3.6% | 5.2% at H12; direct-p D64 5.4-5.7% | 6.9-7.2% at H40 1,024 and 2.1% | 1.1% at the
# trained model's self attention (B2 H4 320; BENCHMARKS.md, 2026-12-07). fp8 D64 keeps its
# defaults: 2.1-2.8% | 0.2-0.7% slower at H40 1,024, 0-0.9% | 1.0-1.9% faster at the trained shape.
SHORT_TOKENS = 1024
SHORT_CONFIG = {("direct-p", 128): {"fold": 1}, ("fp8", 128): {"fold": 1}, ("direct-p", 64): {"fold": 1}}

# A persistent grid where both lengths are at most PERSISTENT_TOKENS: PERSISTENT_CTAS CTAs (one per
# SM of an H100/H200 SXM, as split.py's plans assume), each taking a new work unit from a counter
# when its last one is done (kernel.py), so no CTA waits for a later round's launch. The kernel starts
# every unit's pipelines afresh, which needs a unit's key tiles in multiples of twice the stages
# (host.launch refuses others; the rule leaves them to the grid of one unit a CTA). The same bits;
# paired inside the whole call on an H100 (BENCHMARKS.md, 2026-12-07 nineteenth run), direct-p D128
# replayed 0.8-1.2 us faster at H40 1,024 tokens (fold 1), 2.1-2.4 us at 2,048 and 0.7-2.8% at
# 4,096 (fold 4); longer lengths, D64 and fp8 not measured.
PERSISTENT_CTAS = SPLIT_WAVE
PERSISTENT_TOKENS = 4096
PERSISTENT_MODES = (("direct-p", 128),)


def length_config(mode: str, head_dim: int, s_q: int, s_kv: int) -> dict:
    """The options a launch of these lengths takes over (mode, D)'s defaults: SHORT_CONFIG's where
    both lengths are at most SHORT_TOKENS, and persistent (PERSISTENT_CTAS) where both are at most
    PERSISTENT_TOKENS and the key tiles allow it."""
    cfg = dict(SHORT_CONFIG.get((mode, head_dim), {})) if max(s_q, s_kv) <= SHORT_TOKENS else {}
    if (mode, head_dim) in PERSISTENT_MODES and max(s_q, s_kv) <= PERSISTENT_TOKENS \
            and persistent_fits(s_kv, default_config(mode, head_dim, cfg)):
        cfg["persistent"] = PERSISTENT_CTAS
    return cfg


def persistent_fits(s_kv: int, cfg: dict) -> bool:
    """Whether a persistent launch of config `cfg` (a whole default_config) takes `s_kv` keys: its
    units' key tiles a multiple of twice the stages (every unit starts at stage 0 of one phase)."""
    return -(-s_kv // TILE_N) % (2 * cfg["stages"]) == 0


def default_config(mode: str, head_dim: int, config: dict | None = None) -> dict:
    """The kernel options `launch` uses for `mode` at `head_dim`, with `config`'s over them. A
    default tail_rows yields to the options it excludes (split_tail, pingpong, cluster > 1) when
    `config` asks for one of them; asked for together with one, the kernel refuses."""
    cfg = {**DEFAULT_CONFIG, **MODE_CONFIG.get(mode, {}), **HEAD_DIM_CONFIG.get((mode, head_dim), {}), **(config or {})}
    if "tail_rows" not in (config or {}) and (cfg["split_tail"] or cfg["pingpong"] or cfg["cluster"] > 1):
        cfg["tail_rows"] = False
    return cfg


def launch_configs(mode: str, head_dim: int, config: dict | None = None) -> list[dict]:
    """The kernels a launch of this config may run: the config's, and with split_tail or tail_rows
    the same without it (host.launch runs that one where the plan splits nothing); with quant_q,
    all of these again as reading_q_codes gives them: host.run's, where the kernel cannot take Q.
    Prebuilt together."""
    cfg = default_config(mode, head_dim, config)
    split = cfg["split_tail"] or cfg["tail_rows"]
    kernels = [cfg] + ([{**cfg, "split_tail": False, "tail_rows": False}] if split else [])
    return kernels + ([reading_q_codes(k) for k in kernels] if cfg["quant_q"] else [])


def reading_q_codes(config: dict) -> dict:
    """`config` for operands whose Q codes the pre-pass made: quant_q 0, and not persistent (which
    needs quant_q). The same bits."""
    return {**config, "quant_q": 0, "persistent": 0}


def default_kernels(mode: str, head_dim: int) -> list[dict]:
    """Every kernel a launch with no config of its own may run at (mode, D): launch_configs of each
    config length_config gives there (the defaults, SHORT_CONFIG's, and either persistent where
    PERSISTENT_MODES has (mode, D)), each once (all prebuilt)."""
    lengths = [{}] + ([SHORT_CONFIG[mode, head_dim]] if (mode, head_dim) in SHORT_CONFIG else [])
    if (mode, head_dim) in PERSISTENT_MODES:
        lengths += [{**c, "persistent": PERSISTENT_CTAS} for c in lengths]
    kernels = []
    for config in lengths:
        kernels += [k for k in launch_configs(mode, head_dim, config) if k not in kernels]
    return kernels


def applies(mode: str, config: dict) -> bool:
    """Whether `config` (options over a default_config of the mode) is a kernel of `mode`: not when
    it turns on an option that only another mode has."""
    return all(not val or MODE_ONLY.get(key, mode) == mode for key, val in config.items())
