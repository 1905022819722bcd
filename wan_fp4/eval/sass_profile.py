"""Static profile of the sm90 kernel from its compiled code (CPU only, no GPU): registers, spills,
shared memory, and the instruction mix of the consumer's main loop in SASS.

The cubin comes from the CuTe DSL (kernels/sm90/compile.py); `cuobjdump` (the CUDA toolkit's, or
the copy bundled with triton) disassembles it. The consumer's main loop is the backward branch
whose body holds the most wgmma (QGMMA/HGMMA) instructions. Inside it, a forward conditional
branch skips a block that runs only sometimes (the last tile's key masking, the rescale when a
row max moved): the "steady" counts leave those blocks out, the "all" counts keep them.

Entry point for people: scripts/sm90_sass_profile.py.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

TENSOR_OPS = ("QGMMA", "HGMMA", "IGMMA")

# Instruction classes for the issue-slot model, by opcode (the part before the first dot) or by
# full opcode where the modifier decides. Order matters: the first match wins.
CLASSES = (
    ("wgmma", lambda op, base: base in TENSOR_OPS),
    ("wgmma fence/wait", lambda op, base: base == "WARPGROUP"),
    ("FFMA.SAT", lambda op, base: op.startswith("FFMA.SAT")),
    ("FFMA", lambda op, base: base == "FFMA"),
    ("FMUL", lambda op, base: base == "FMUL"),
    ("FADD", lambda op, base: base == "FADD"),
    ("FMNMX", lambda op, base: base == "FMNMX"),
    ("FSEL/FSETP", lambda op, base: base in ("FSEL", "FSETP")),
    ("MUFU.EX2", lambda op, base: op.startswith("MUFU.EX2")),
    ("MUFU other", lambda op, base: base == "MUFU"),
    ("F2F/F2FP/I2F", lambda op, base: base in ("F2F", "F2FP", "F2I", "I2F", "I2FP")),
    ("PRMT", lambda op, base: base == "PRMT"),
    ("SHFL", lambda op, base: base == "SHFL"),
    ("mbarrier/BAR", lambda op, base: base in ("SYNCS", "BAR", "WARPSYNC", "NANOSLEEP", "MEMBAR")),
    ("global/local mem", lambda op, base: base in ("LDG", "STG", "LDL", "STL", "LD", "ST", "LDS", "STS",
                                                   "LDSM", "STSM", "RED", "ATOM", "ATOMS")),
    ("uniform (U*)", lambda op, base: base.startswith("U") or base == "R2UR" or base == "S2UR"),
    ("int/move/pred", lambda op, base: base in ("IMAD", "IADD3", "VIADD", "LOP3", "ISETP", "SHF", "LEA", "MOV",
                                               "SEL", "IABS", "P2R", "R2P", "PLOP3", "S2R", "CS2R", "VIMNMX",
                                               "IMNMX", "FLO", "POPC", "BMSK", "SGXT")),
    ("branch/control", lambda op, base: base in ("BRA", "EXIT", "BSSY", "BSYNC", "CALL", "RET", "NOP", "YIELD",
                                                "ELECT", "ACQBULK", "ENDCOLLECTIVE", "BREAK")),
)


@dataclass(frozen=True)
class Instr:
    addr: int
    pred: str  # "" when unpredicated, else e.g. "@!P0"
    op: str  # full opcode with modifiers, e.g. "FFMA.SAT"
    args: str

    @property
    def base(self) -> str:
        return self.op.split(".")[0]


@dataclass
class LoopProfile:
    start: int
    end: int  # address of the backward branch
    tensor_ops: dict  # opcode (with shape) -> count, whole body
    all_counts: Counter  # class -> count, whole body
    steady_counts: Counter  # class -> count, body minus the conditionally skipped blocks
    skipped: list = field(default_factory=list)  # (from, to, Counter) per skipped block


_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Za-z0-9_.]*)\s*([^;]*);")


def find_cuobjdump() -> str | None:
    """cuobjdump from PATH, CUDA_HOME/bin, or the copy triton bundles; None if there is none."""
    exe = shutil.which("cuobjdump")
    if exe:
        return exe
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    cand = Path(home) / "bin" / "cuobjdump"
    if cand.exists():
        return str(cand)
    try:
        import triton
    except ImportError:
        return None
    cand = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return str(cand) if cand.exists() else None


def _cuobjdump(cubin: bytes, flag: str, exe: str) -> str:
    with tempfile.TemporaryDirectory(prefix="wan_fp4_sass_") as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        run = subprocess.run([exe, flag, str(path)], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"cuobjdump {flag} failed: {run.stderr.strip()[:300]}")
    return run.stdout


def parse_sass(text: str) -> list[Instr]:
    out = []
    for m in _LINE.finditer(text):
        out.append(Instr(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), m.group(4).strip()))
    return out


def resources(res_usage: str) -> dict:
    """cuobjdump -res-usage's REG/STACK/SHARED/LOCAL of the (single) kernel function."""
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", res_usage)
    if m is None:
        raise ValueError("no resource line in cuobjdump -res-usage output")
    return dict(zip(("reg", "stack", "shared_static", "local"), map(int, m.groups())))


def classify(ins: Instr) -> str:
    for name, test in CLASSES:
        if test(ins.op, ins.base):
            return name
    return "other"


def _branch_target(ins: Instr) -> int | None:
    if ins.base != "BRA":
        return None
    m = re.match(r"(?:`\(.*?\)\s*)?0x([0-9a-f]+)", ins.args)
    return int(m.group(1), 16) if m else None


def main_loop(instrs: list[Instr]) -> LoopProfile:
    """The innermost loop with wgmma instructions: the smallest body closed by a conditional
    backward branch (an unconditional one is a wait's retry path jumping back, not a loop)."""
    best = None
    for ins in instrs:
        tgt = _branch_target(ins)
        if tgt is None or tgt >= ins.addr or not ins.pred:
            continue
        body = [i for i in instrs if tgt <= i.addr <= ins.addr]
        if any(i.base in TENSOR_OPS for i in body) and (best is None or len(body) < len(best[2])):
            best = (tgt, ins.addr, body)
    if best is None:
        raise ValueError("no loop with wgmma instructions in this SASS")
    start, end, body = best
    skipped = []
    for ins in body:
        tgt = _branch_target(ins)
        if ins.pred and tgt is not None and ins.addr < tgt <= end:
            block = [i for i in body if ins.addr < i.addr < tgt]
            skipped.append((ins.addr + 16, tgt, Counter(classify(i) for i in block)))
    in_skipped = set()
    for lo, hi, _ in skipped:
        in_skipped.update(i.addr for i in body if lo <= i.addr < hi)
    tensor = Counter(f"{i.op}" for i in body if i.base in TENSOR_OPS)
    return LoopProfile(start, end, dict(tensor), Counter(classify(i) for i in body),
                       Counter(classify(i) for i in body if i.addr not in in_skipped), skipped)


_LAUNCH_CONFIG = "!llvm.struct<(array<3 x i32>, array<3 x i32>, i64,"  # grid, block, dynamic shared bytes, ...


def dynamic_smem_bytes(compiled) -> int | None:
    """The dynamic shared memory the DSL's host code launches with: the constant its launch set-up
    stores in the launch config's third field (None when the host IR has no such store)."""
    for func in str(compiled.ir_module).split("llvm.func ")[1:]:  # SSA names are per function
        consts = dict(re.findall(r"(%\d+) = llvm\.mlir\.constant\((\d+) : i64\)", func))
        fields = {m.group(1) for m in re.finditer(r"(%\d+) = llvm\.getelementptr %\d+\[0, 2\] : \(!llvm\.ptr\) -> "
                                                  r"!llvm\.ptr, (.*)", func) if m.group(2).startswith(_LAUNCH_CONFIG)}
        for value, where in re.findall(r"llvm\.store (%\d+), (%\d+) : i64", func):
            if where in fields and value in consts:
                return int(consts[value])
    return None


def profile(mode: str, head_dim: int, exe: str | None = None, **config) -> dict:
    """Compile the sm90 kernel for (mode, D, config) on the CPU and profile it statically."""
    from ..kernels.sm90 import default_config
    from ..kernels.sm90.config import N_WG
    from ..kernels.sm90.compile import compile_kernel, cubin_of

    exe = exe or find_cuobjdump()
    if exe is None:
        raise RuntimeError("no cuobjdump (CUDA toolkit or triton's bundled copy) to disassemble the cubin")
    cfg = default_config(mode, head_dim, config)
    dump = tempfile.mkdtemp(prefix="wan_fp4_sass_dump_")
    try:
        compiled = compile_kernel(mode, head_dim, options=f"--keep-cubin --dump-dir {dump}", **config)
        cubin = cubin_of(compiled)
    finally:
        shutil.rmtree(dump, ignore_errors=True)
    instrs = parse_sass(_cuobjdump(cubin, "-sass", exe))
    loop = main_loop(instrs)
    threads = 128 * (N_WG + 1)
    return {
        "mode": mode, "head_dim": head_dim, "config": cfg, "threads": threads,
        "resources": resources(_cuobjdump(cubin, "-res-usage", exe)),
        "dynamic_smem": dynamic_smem_bytes(compiled),
        "setmaxnreg": [i.op + " " + i.args for i in instrs if i.base == "USETMAXREG"],
        "spill_instrs": sum(i.base in ("LDL", "STL") for i in instrs),
        "max_register": max((int(r) for i in instrs for r in re.findall(r"\bR(\d+)\b", i.args)), default=0),
        "tensor_total": sum(i.base in TENSOR_OPS for i in instrs),
        "loop": loop,
        "instrs": instrs,
        # wgmma per key tile: QK^T over D in k32 steps, PV over the tile's 128 keys in k32 steps
        "tiles_per_iteration": loop.steady_counts["wgmma"] / (head_dim // 32 + 128 // 32),
    }


def table(prof: dict) -> str:
    """The profile as text: resources, then the main loop's counts per warp per 128-key tile."""
    res, loop, tiles = prof["resources"], prof["loop"], prof["tiles_per_iteration"]
    lines = [
        f"{prof['mode']} D{prof['head_dim']} config={prof['config']} threads={prof['threads']}",
        f"  registers: launch {res['reg']}/thread, setmaxnreg {prof['setmaxnreg']}, highest register used "
        f"R{prof['max_register']}; stack {res['stack']} B, local {res['local']} B, spill instructions (LDL/STL) "
        f"{prof['spill_instrs']}",
        f"  shared memory: dynamic {prof['dynamic_smem']} B + static {res['shared_static']} B",
        f"  main loop {loop.start:#x}..{loop.end:#x}: {tiles:g} key tiles per iteration, wgmma {loop.tensor_ops}",
        f"  {'class':<20}{'steady/tile':>12}{'all/tile':>10}",
    ]
    for name, _ in CLASSES + (("other", None),):
        a, b = loop.steady_counts.get(name, 0), loop.all_counts.get(name, 0)
        if a or b:
            lines.append(f"  {name:<20}{a / tiles:>12g}{b / tiles:>10g}")
    lines.append(f"  {'total':<20}{sum(loop.steady_counts.values()) / tiles:>12g}"
                 f"{sum(loop.all_counts.values()) / tiles:>10g}")
    for lo, hi, cnt in loop.skipped:
        lines.append(f"  skipped when not taken {lo:#x}..{hi:#x}: {dict(cnt)}")
    return "\n".join(lines)
