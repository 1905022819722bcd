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
    def __init__(self, ptx: str):
        self.instrs = parse(ptx)
        self.defs: dict[str, list[Instr]] = {}
        for ins in self.instrs:
            for d in ins.dst:
                self.defs.setdefault(d, []).append(ins)
        self._taint: dict[str, frozenset] = {}

    def taint(self, reg: str, _stack=()) -> frozenset:
        """Which sources feed `reg`: 'batch' (%ctaid.z) and/or 'param32' (a 32-bit parameter)."""
        if reg in self._taint:
            return self._taint[reg]
        if reg == "%ctaid.z":
            return frozenset({"batch"})
        if reg in _stack:  # loop-carried: the other definitions decide
            return frozenset()
        found = set()
        for ins in self.defs.get(reg, ()):
            if ins.op.startswith("ld."):
                # a 32-bit parameter is a runtime size/stride; any other load is data
                if ins.op.startswith("ld.param") and ins.op.endswith("32"):
                    found.add("param32")
                continue
            for s in ins.src:
                if s.startswith("%"):
                    found |= self.taint(s, _stack + (reg,))
        self._taint[reg] = frozenset(found)
        return self._taint[reg]

    def chain(self, reg: str) -> list[Instr]:
        """Every instruction that (transitively) defines `reg` (address arithmetic only: stops at
        loads and parameter reads)."""
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
            if _MUL32.match(ins.op) and any(self.taint(s) for s in ins.src if s.startswith("%")):
                bad.append(ins)
        return bad

    def uses_batch(self, access: Instr) -> bool:
        return "batch" in self.taint(_address_reg(access))
