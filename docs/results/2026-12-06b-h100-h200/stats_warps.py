"""Runs 1-4 of 2026-12-06's second run (job.sh says which code they ran on): the column
statistics' programs at one warp (no reduction across warps at a program's end) against four, by
a working state's module constants: STATS_WARPS, STATS_ROWS (keys per loaded tile; a warp holds
the same tile either way), STATS_CHUNKS, _WARPS_PER_SM (the warps the chunk rule gives each SM),
FOLD_READS, STATS_HEADS_FIRST (run 2 only: a chunk's programs of every head dispatched together;
its variants ph, w1h, w1x2fh, w1x3fh and w1r16x2fh left ALL with it),
STATS_RUNTIME_CHUNK (one compiled loop for every chunk length), STATS_AHEAD (each tile's loads
issued a step before it is added) and STATS_MAXNREG (ptxas's register limit). Bytes against the
torch path, then the statistics launch alone, the pre-pass and the whole call from CUDA graphs,
variants alternated per round, each against "plain". At the end, each compiled statistics
kernel's registers and how many of its loop's loads issue before its first read of a loaded value
(its SASS, cuobjdump). A job script, not part of the package."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from profile_sm90_device import _graph_ms  # noqa: E402
from wan_fp4.eval.device_check import mismatch  # noqa: E402
from wan_fp4.kernels import prepare  # noqa: E402
from wan_fp4.kernels.sm90 import host  # noqa: E402
from wan_fp4.kernels.sm90.layout import v_layout_args  # noqa: E402

SHORT = (512, 256, 128, 64, 32, 16, 8)
LONG = (512, 256, 128, 64)
# name: (warps, rows, chunks, warps per SM, FOLD_READS, chunk length a runtime argument, loads a tile
# ahead, ptxas's register limit)
ALL = {"plain": (4, 32, LONG, 4, 8192, False, False, None),
       "w1": (1, 8, SHORT, 4, 8192, False, False, None),
       "w1x2": (1, 8, SHORT, 8, 8192, False, False, None),
       "w1x2f": (1, 8, SHORT, 8, 16384, False, False, None),
       "w1x3": (1, 8, SHORT, 12, 8192, False, False, None),
       "w1x2f_rt": (1, 8, SHORT, 8, 16384, True, False, None),
       "w1x2f_ahead": (1, 8, SHORT, 8, 16384, False, True, None),
       "w1x2f_ahead_rt": (1, 8, SHORT, 8, 16384, True, True, None),
       "plain_mr": (4, 32, LONG, 4, 8192, False, False, 168),
       "w1x2f_mr_rt": (1, 8, SHORT, 8, 16384, True, False, 168)}
VARIANTS = {n: ALL[n] for n in os.environ.get("VARIANTS", "plain,plain_mr,w1x2f,w1x2f_mr_rt").split(",")}
ROUNDS = int(os.environ.get("ROUNDS", 3))
SHAPES = ((40, 1024, 1024), (12, 1024, 1024), (40, 2048, 2048), (40, 4096, 4096), (12, 32760, 512),
          (12, 32760, 32760), (40, 32760, 32760), (40, 75600, 75600))
CALL_MAX = 4096 * 4096  # whole calls timed up to this many scores per head (and the 1.3B cross attention)
layout = v_layout_args("direct-p")
names = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
junk = torch.empty(4 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
sms = torch.cuda.get_device_properties(0).multi_processor_count


def use(name):
    global current
    current = name
    (prepare.STATS_WARPS, prepare.STATS_ROWS, prepare.STATS_CHUNKS, prepare._WARPS_PER_SM,
     prepare.FOLD_READS, prepare.STATS_RUNTIME_CHUNK, prepare.STATS_AHEAD, prepare.STATS_MAXNREG) = VARIANTS[name]


current = None
compiled = {}  # (variant, CHUNK, chunk_len) -> the statistics launch's CompiledKernel
real_stats = prepare._column_stats_kernel


class Spy:
    """prepare._column_stats_kernel, keeping each variant's compiled kernel for its SASS."""

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            ck = real_stats[grid](*args, **kwargs)
            compiled.setdefault((current, kwargs["CHUNK"], kwargs["chunk_len"]), ck)
            return ck
        return launch


prepare._column_stats_kernel = Spy()


def loads_before_use(ck):
    """(registers, loads of the loop body issued before its first read of a loaded value, loads in it)."""
    import subprocess
    import tempfile

    import triton

    from wan_fp4.eval.sass_profile import parse_sass
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(ck.asm["cubin"])
        f.flush()
        sass = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True).stdout
    ins = parse_sass(sass)
    back = [i for i in ins if i.base == "BRA" and i.pred and int(i.args.split()[0], 16) < i.addr]
    if not back:
        raise ValueError("no loop (one tile a program)")
    top = int(back[-1].args.split()[0], 16)  # the loop: from its backward branch's target to the branch
    body = [i for i in ins if top <= i.addr < back[-1].addr]
    ldg = [n for n, i in enumerate(body) if i.base == "LDG"]
    uses = [n for n, i in enumerate(body) if i.base in ("F2F", "HFMA2", "PRMT")]
    return getattr(ck, "n_regs", "?"), sum(i < min(uses or [len(body)]) for i in ldg), len(ldg)


def flush():
    junk.fill_(1)


SET = os.environ.get("SET", "short")  # short: the shapes whose whole call is timed; long: the rest
for h, sq, skv in SHAPES:
    if (sq * skv <= CALL_MAX or skv == 512) != (SET == "short"):
        continue
    q = torch.randn(1, sq, h, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, skv, h, 128, device="cuda", dtype=torch.bfloat16) + 2.0 * torch.randn(
        1, 1, h, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, skv, h, 128, device="cuda", dtype=torch.bfloat16)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    stats = torch.empty(prepare.RANGE_STATS, device="cuda")
    bad, shape = {}, {}
    for name in VARIANTS:
        use(name)
        chunk = prepare.stats_chunk(skv, h, sms)
        n_chunks = -(-skv // chunk)
        shape[name] = f"{chunk}-key chunks, {n_chunks * h} programs, folded {h * -(-skv // 128) * n_chunks <= prepare.FOLD_READS}"
        got = prepare.prepare_fp8(q, k, v, **layout)
        bad[name] = [n for n in names if mismatch(getattr(got, n), getattr(want, n))]
    print(f"H{h} Sq{sq} Skv{skv}: bytes == torch path: "
          + ", ".join(f"{n} ({shape[n]}) {'yes' if not b else 'NO ' + ' '.join(b)}" for n, b in bad.items()), flush=True)
    calls = 20 if sq * skv <= 4096 * 4096 else 3
    parts = {"statistics": lambda: prepare._column_partials(k, v, stats),
             "pre-pass": lambda: prepare.prepare_fp8(q, k, v, **layout)}
    if sq * skv <= CALL_MAX or skv == 512:
        parts["call"] = lambda: host.run(q, k, v, "direct-p", prebuilt=True)
    flushed = _graph_ms(flush, calls) if sq * skv <= CALL_MAX else None
    for part, fn in parts.items():
        for cold in ((False, True) if flushed is not None and part == "call" else (False,)):
            times = {n: [] for n in VARIANTS}
            for r in range(ROUNDS):
                for name in list(VARIANTS)[::(1 if r % 2 == 0 else -1)]:
                    use(name)
                    ms = _graph_ms(lambda: (flush(), fn()), calls) - flushed if cold else _graph_ms(fn, calls)
                    times[name].append(ms * 1e3)
            base = times["plain"]
            print(f"H{h} Sq{sq} Skv{skv} {part}{' (L2 flushed first)' if cold else ''}: "
                  + "; ".join(f"{n} {min(t):.1f}-{max(t):.1f} us"
                              + ("" if n == "plain" else " (/plain " + " ".join(f"{a / b:.3f}" for a, b in zip(t, base)) + ")")
                              for n, t in times.items()), flush=True)
    use("plain")
    del q, k, v, want
    torch.cuda.empty_cache()

for (name, const, length), ck in sorted(compiled.items(), key=lambda x: (x[0][0], x[0][2])):
    try:
        regs, before, total = loads_before_use(ck)
        print(f"SASS {name} chunk {length} ({'runtime' if const == 0 else 'constant'}): {regs} registers, "
              f"{before} of the loop's {total} loads issued before its first read of a loaded value", flush=True)
    except Exception as e:  # the record is a diagnostic; the timings above stand without it
        print(f"SASS {name} chunk {length}: not read ({e})", flush=True)
