"""Reading global-memory address arithmetic out of PTX (test helper, no GPU).

A kernel that indexes (B, ...) tensors overflows once B*S*H*D passes 2^31 if a batch offset is a
32-bit product. The PTX shows it: walk each global load/store's address back through the
instructions that define it and look for a 32-bit multiply (mul.lo/mad.lo/shl on .s32/.u32/.b32)
fed, directly or through other arithmetic, by the batch index (%ctaid.z, the grid's batch axis)
or by a 32-bit kernel parameter (a runtime size or stride). Widening multiplies (mul.wide /
mad.wide) and 64-bit arithmetic are what 64-bit addressing looks like.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_INSTR = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)\s+(.*?);\s*$")
_REG = re.compile(r"%[A-Za-z_][\w.]*")
_MUL32 = re.compile(r"^(mul\.lo|mad\.lo|mul|shl)\.(s32|u32|b32)$")


@dataclass(frozen=True)
class Instr:
    line: int
    op: str
    dst: tuple[str, ...]
    src: tuple[str, ...]
    text: str


def parse(ptx: str) -> list[Instr]:
    """Instructions with destination and source registers (%ctaid.z etc. kept as sources).
    A parameter load's source is the parameter's name, so 32-bit parameters are recognisable."""
    out = []
    for i, raw in enumerate(ptx.splitlines()):
        line = raw.split("//", 1)[0]
        m = _INSTR.match(line)
        if not m or m.group(1).startswith("."):
            continue
        op, args = m.group(1), m.group(2)
        if op.startswith(("st.", "bra", "ret", "bar", "mbarrier", "wgmma", "tcgen05", "cp.", "fence")):
            dst, src = (), tuple(_REG.findall(args))
        else:
            if args.startswith("{"):  # vector destination {%a, %b}
                head, _, tail = args[1:].partition("}")
            else:
                head, _, tail = args.partition(",")
            dst, src = tuple(_REG.findall(head)), tuple(_REG.findall(tail))
            if op.startswith("ld.param"):
                src = (re.search(r"\[([^\]]+)\]", tail).group(1),)
        out.append(Instr(i + 1, op, dst, src, raw.strip()))
    return out


def global_accesses(instrs: list[Instr], kinds=("st.global", "ld.global")) -> list[Instr]:
    return [ins for ins in instrs if ins.op.startswith(kinds)]


def _address_reg(ins: Instr) -> str:
    m = re.search(r"\[(%\w+)", ins.text)
    if m is None:
        raise ValueError(f"no register address in {ins.text!r}")
    return m.group(1)


class AddressAudit:
    """index: the special registers that carry the batch (or work-item) index, e.g. %ctaid.z for a
    (tile, head, batch) grid, %ctaid.x/%nctaid.x for a persistent grid whose work index encodes
    the batch."""

    def __init__(self, ptx: str, index=("%ctaid.z",)):
        self.instrs = parse(ptx)
        self.defs: dict[str, list[Instr]] = {}
        for ins in self.instrs:
            for d in ins.dst:
                self.defs.setdefault(d, []).append(ins)
        self.taint = self._propagate(set(index))

    def _quotient_product(self, ins: Instr) -> str | None:
        """For `mul.lo t, q, d` with q = div(a, d) (how a remainder a - (a/d)*d is lowered):
        a, whose value bounds the product; else None."""
        if not _MUL32.match(ins.op) or len(ins.src) != 2:
            return None
        for q, d in (ins.src, ins.src[::-1]):
            for qdef in self.defs.get(q, ()):
                if qdef.op.startswith("div.") and len(qdef.src) == 2 and qdef.src[1] == d:
                    return qdef.src[0]
        return None

    def _propagate(self, index) -> dict[str, frozenset]:
        """Fixed point over every definition (loop-carried registers included): which sources
        feed each register, 'batch' (an index register) and/or 'param32' (a 32-bit parameter, i.e.
        a runtime size or stride). Loaded data other than parameters carries no taint. A quotient
        or remainder a/d, a%d (and (a/d)*d) is bounded by a, so it carries a's taint only."""
        taint: dict[str, set] = {}
        bounded = {}
        for ins in self.instrs:
            a = self._quotient_product(ins)
            if a is not None:
                bounded[ins.line] = a
        changed = True
        while changed:
            changed = False
            for ins in self.instrs:
                if not ins.dst:
                    continue
                if ins.op.startswith("ld."):
                    t = {"param32"} if ins.op.startswith("ld.param") and ins.op.endswith("32") else set()
                else:
                    if ins.line in bounded:
                        srcs = (bounded[ins.line],)
                    elif ins.op.startswith(("div.", "rem.")):
                        srcs = ins.src[:1]
                    else:
                        srcs = ins.src
                    t = set()
                    for s in srcs:
                        if s in index:
                            t.add("batch")
                        t |= taint.get(s, set())
                for d in ins.dst:
                    cur = taint.setdefault(d, set())
                    if not t <= cur:
                        cur |= t
                        changed = True
        self._bounded = bounded
        return {r: frozenset(t) for r, t in taint.items()}

    def chain(self, reg: str) -> list[Instr]:
        """Every instruction that (transitively) defines `reg` (address arithmetic only: stops at
        loads)."""
        seen, todo, out = set(), [reg], []
        while todo:
            r = todo.pop()
            if r in seen:
                continue
            seen.add(r)
            for ins in self.defs.get(r, ()):
                out.append(ins)
                if ins.op.startswith("ld."):
                    continue
                todo.extend(s for s in ins.src if s.startswith("%"))
        return sorted(set(out), key=lambda i: i.line)

    def narrow_products(self, access: Instr) -> list[Instr]:
        """32-bit multiplies in `access`'s address chain fed by the batch index or a 32-bit
        parameter: the products that can overflow at large batch or size."""
        bad = []
        for ins in self.chain(_address_reg(access)):
            if (_MUL32.match(ins.op) and ins.line not in self._bounded
                    and any(self.taint.get(s) for s in ins.src)):
                bad.append(ins)
        return bad

    def wide_param_products(self, access: Instr) -> list[Instr]:
        """64-bit multiplies in `access`'s address chain with a 64-bit kernel parameter (a host
        stride passed as Int64) as an operand."""
        params64 = {d for ins in self.instrs if ins.op.startswith("ld.param") and ins.op.endswith("64")
                    for d in ins.dst}
        return [ins for ins in self.chain(_address_reg(access))
                if re.match(r"^(mul\.lo|mad\.lo)\.(s64|u64)$", ins.op) and params64 & set(ins.src)]

    def uses_batch(self, access: Instr) -> bool:
        return "batch" in self.taint.get(_address_reg(access), ())


# --------------------------------------------------------------- shared-memory offsets
_SMEM_BASE = "__dynamic_shmem__0"


def _operands(ins: Instr) -> list[str]:
    args = ins.text.split(None, 1)[1].rstrip(";").strip()
    return [a.strip() for a in args.split(",")]


def _imm(tok: str):
    try:
        return int(tok, 0)
    except ValueError:
        return None


class SmemOffsets:
    """Offsets of shared-memory addresses from the dynamic shared-memory base, modulo `modulus`:
    value(reg) = (based, residue) where based says the register is base + offset, and residue is
    offset % modulus (None when unknown). Products of an unknown index with a multiple of the
    modulus (a stage index times a stage size) keep a known residue."""

    def __init__(self, audit: AddressAudit, modulus: int):
        self.audit, self.m = audit, modulus
        self._memo: dict[str, tuple] = {}

    def _tok(self, tok: str, stack):
        if tok.startswith("%"):
            return self.value(tok, stack)
        n = _imm(tok)
        return (False, None) if n is None else (False, n % self.m)

    def value(self, reg: str, stack=()) -> tuple:
        if reg in self._memo:
            return self._memo[reg]
        if reg in stack:
            return (False, None)
        vals = {self._eval(ins, stack + (reg,)) for ins in self.audit.defs.get(reg, ())}
        out = vals.pop() if len(vals) == 1 else (False, None)
        if len(vals) > 0 and any(v[0] for v in vals):
            out = (False, None)
        if not stack:
            self._memo[reg] = out
        return out

    def _eval(self, ins: Instr, stack) -> tuple:
        ops = _operands(ins)
        unknown = (False, None)
        if ins.op.startswith("mov") and ops[1] == _SMEM_BASE:
            return (True, 0)
        if ins.op.startswith(("mov", "shfl.sync.idx")):
            return self._tok(ops[1], stack)
        if ins.op in ("add.s32", "add.u32"):
            (ba, ra), (bb, rb) = self._tok(ops[1], stack), self._tok(ops[2], stack)
            if ba and bb:
                return unknown
            return (ba or bb, None if ra is None or rb is None else (ra + rb) % self.m)
        if ins.op in ("shl.b32", "mul.lo.s32", "mul.lo.u32"):
            based, r = self._tok(ops[1], stack)
            k = _imm(ops[2])
            if based or k is None:
                return unknown
            factor = (1 << k) if ins.op == "shl.b32" else k
            if factor % self.m == 0:
                return (False, 0)
            return (False, None if r is None else (r * factor) % self.m)
        return unknown

    def of_access(self, ins: Instr) -> tuple:
        """(based, residue) of a shared-memory operand written [%r] or [%r+imm]."""
        m = re.search(r"\[(%\w+)(?:\+(-?\d+))?\]", ins.text)
        based, r = self.value(m.group(1))
        off = int(m.group(2) or 0)
        return based, None if r is None else (r + off) % self.m
