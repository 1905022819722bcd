"""The sm100a kernel's TMEM column map and a model of the column lifetimes (pure Python).

kernel.py takes its TMEM columns from here, and the tests run `check_schedule` on the issue
order kernel.py implements (`schedule`), so a change to either is checked without a GPU.

One CTA work item = two 128-row query tiles (stage 0 = even tile, stage 1 = odd tile) of one
(batch, head). 512 columns, one tcgen05.alloc; every column is used by exactly one of:

  columns   | what                          | written by                | read by
  ----------+-------------------------------+---------------------------+----------------------
  S_b +0..127   FP32 scores of stage b        QK_b(n) (tcgen05.mma)       softmax WG b
  S_b +0..15    P codes of stage b (E2M1)     softmax WG b (tcgen05.st)   PV_b(n) (operand A)
                  over score block 0, after the WG has read the whole bank
  S_b +16..23   SFQ of stage 1-b (E4M3)       MMA warp (tcgen05.cp)       QK_{1-b}(n or n+1)
  S_b +24..31   SFK of the key tile (E4M3)      after WG b has read score block 0 of its tile
                                                (the "early retire" barrier E_b)
  S_b +32..35   SFP of stage b (E8M0 P scales) MMA warp (tcgen05.cp)      PV_b(n)
  S_b +36..39   SFV of the key tile (E8M0)      after WG b has written P (barrier P_b)
  S_b +40..127  unused once the scores are read
  O_b (256 + 128 b) +0..127  FP32 output of stage b   PV_b (accumulates over n)   epilogue WG

with S_0 = 0, S_1 = 128. The scale factors that the block-scaled MMAs read from TMEM therefore
live in score columns that are already consumed: those of stage b's QK in the other stage's
bank (a QK overwrites its whole bank), those of stage b's PV in its own bank next to its P.

Issue order of the MMA warp (one thread):
  for n in 0..N:  for b in 0, 1:
      if n > 0: wait P_b(n-1); cp SFP_b, SFV(n-1) -> S_b+32; PV_b(n-1)
      wait E_{1-b}(n-1) (b = 0, n > 0) or E_0(n) (b = 1, n < N)
      if n < N: cp SFQ_b, SFK(n) -> S_{1-b}+16; QK_b(n) -> S_b
so a stage's next QK follows its PV (no third score bank: paper-notes §6), and the two softmax
WGs overlap except for one 32-column score load.

Ordering (check_schedule): tcgen05 ops issued by one thread run asynchronously and may complete
out of order. The PTX ISA (tcgen05 memory consistency, "pipelined instruction pairs") orders only
an MMA after an earlier MMA on the same accumulator with the same shape, and an MMA after an
earlier tcgen05.cp; everything else needs tcgen05.commit + an mbarrier wait (a commit tracks
every tcgen05 op the thread issued before it). One pattern in this schedule relies on more:
QK_b(n) overwrites all of S_b while PV_b(n-1), issued just before it, may still read the P codes
(S_b+0..15) and P/V scales (S_b+32..39) there; likewise the next work item's first QK_b after the
last PV_b. That is the assumption MMA_ISSUE_ORDER: the tensor core executes one thread's MMAs in
issue order even across accumulators (FlashAttention-4's Blackwell kernels rely on it the same
way). check_schedule reports the pattern unless the assumption is granted; the kernel's debug
option pv_qk_sync (kernel.py) puts a commit + mbarrier wait between PV_b and QK_b, which needs
no assumption (schedule(..., pv_qk_sync=True)).
"""
from __future__ import annotations

from dataclasses import dataclass, field

TMEM_COLS = 512
BANK = 128
S_BANK = (0, 128)  # score banks of stage 0 / 1
O_BANK = (256, 384)  # output banks of stage 0 / 1
P_CODES = (0, 16)  # (offset in the bank, columns): 128 E2M1 codes per row
QK_SF = (16, 16)  # SFQ (8 columns) then SFK (8): the other stage's QK scale factors
PV_SF = (32, 8)  # SFP (4 columns) then SFV (4): this stage's PV scale factors
EARLY_RETIRE_COLS = 32  # the softmax WG signals E_b after reading score block 0 (32 columns)
# The one ordering the schedule takes beyond the PTX ISA's guarantees (module docstring).
MMA_ISSUE_ORDER = "mma-issue-order"


# ------------------------------------------------------------------------- lifetime model
@dataclass
class Event:
    actor: str  # "tc" (the MMA warp's thread: its mma/cp and its waits, in issue order), "sm0", "sm1", "epi"
    name: str
    reads: list = field(default_factory=list)  # (first col, end col, value)
    writes: list = field(default_factory=list)  # (first col, end col, value)
    after: list = field(default_factory=list)  # names of events this one waits for (barriers)
    # tc only: "mma" or "cp" (asynchronous tensor-core ops) or "wait" (the issuing thread waits);
    # acc: an MMA's accumulator and shape (MMAs with equal acc are ordered by the ISA)
    kind: str = ""
    acc: str = ""


def _cols(bank_base, region):
    return bank_base + region[0], bank_base + region[0] + region[1]


def schedule(kv_tiles: int, work_items: int = 2, qk_sf=QK_SF, pv_sf=PV_SF, p_codes=P_CODES,
             early_retire_cols=EARLY_RETIRE_COLS, skip_early_retire_wait=False,
             pv_qk_sync=False) -> list[Event]:
    """The TMEM accesses of kernel.py's roles, per work item and key tile, with their barriers.
    pv_qk_sync: the kernel's debug option (a commit + wait after every PV)."""
    ev: list[Event] = []
    N = kv_tiles
    for w in range(work_items):
        # the softmax WGs: wait S_b(n); read block 0; E_b; read the rest; write P; P_b
        for b in range(2):
            s = S_BANK[b]
            for n in range(N):
                t = f"w{w}.n{n}"
                ev.append(Event(f"sm{b}", f"read0.{b}.{t}", reads=[(s, s + early_retire_cols, f"S.{b}.{t}")],
                                after=[f"QK.{b}.{t}"]))
                ev.append(Event(f"sm{b}", f"E.{b}.{t}"))
                ev.append(Event(f"sm{b}", f"read.{b}.{t}", reads=[(s + early_retire_cols, s + BANK, f"S.{b}.{t}")]))
                ev.append(Event(f"sm{b}", f"P.{b}.{t}", writes=[(*_cols(s, p_codes), f"P.{b}.{t}")]))
        # the MMA warp, in issue order
        for n in range(N + 1):
            for b in range(2):
                s, o = S_BANK[b], O_BANK[b]
                if n > 0:
                    t = f"w{w}.n{n - 1}"
                    after = [f"P.{b}.{t}"]
                    if n == 1 and w > 0:
                        after.append(f"epi.{b}.w{w - 1}")  # the epilogue drained O_b
                    ev.append(Event("tc", f"cpPV.{b}.{t}", writes=[(*_cols(s, pv_sf), f"SFPV.{b}.{t}")],
                                    after=after, kind="cp"))
                    reads = [(*_cols(s, p_codes), f"P.{b}.{t}"), (*_cols(s, pv_sf), f"SFPV.{b}.{t}")]
                    if n > 1:
                        reads.append((o, o + BANK, f"O.{b}.w{w}.n{n - 2}"))
                    ev.append(Event("tc", f"PV.{b}.{t}", reads=reads, writes=[(o, o + BANK, f"O.{b}.{t}")],
                                    kind="mma", acc=f"O{b}/pv"))
                    if pv_qk_sync:
                        ev.append(Event("tc", f"PVsync.{b}.{t}", after=[f"PV.{b}.{t}"], kind="wait"))
                wait = None
                if b == 0 and n > 0:
                    wait = f"E.1.w{w}.n{n - 1}"
                if b == 1 and n < N:
                    wait = f"E.0.w{w}.n{n}"
                if skip_early_retire_wait:
                    wait = None
                if n < N:
                    t = f"w{w}.n{n}"
                    other = S_BANK[1 - b]
                    ev.append(Event("tc", f"cpQK.{b}.{t}", writes=[(*_cols(other, qk_sf), f"SFQK.{b}.{t}")],
                                    after=[wait] if wait else [], kind="cp"))
                    ev.append(Event("tc", f"QK.{b}.{t}", reads=[(*_cols(other, qk_sf), f"SFQK.{b}.{t}")],
                                    writes=[(s, s + BANK, f"S.{b}.{t}")], kind="mma", acc=f"S{b}/qk"))
                elif wait:
                    ev.append(Event("tc", f"Ewait.{b}.w{w}", after=[wait], kind="wait"))
        for b in range(2):
            o = O_BANK[b]
            ev.append(Event("epi", f"epi.{b}.w{w}", reads=[(o, o + BANK, f"O.{b}.w{w}.n{N - 1}")],
                            after=[f"PV.{b}.w{w}.n{N - 1}"]))
    return ev


def check_schedule(events: list[Event], assume: tuple = ()) -> list[str]:
    """Problems with the schedule: a column read before its value is written or after another
    value overwrote it, or two roles touching a column without a barrier between them.

    Happens-before, from what the hardware guarantees:
    - program order of each role's thread ("sm0", "sm1", "epi");
    - "tc" is the MMA warp: its waits happen in program order, so every op it issues follows all
      its earlier waits; its asynchronous ops (mma, cp) are ordered among themselves only as the
      PTX ISA pairs them: an MMA after an earlier cp, and an MMA after an earlier MMA on the same
      accumulator and shape;
    - a wait on a tc op (`after`, through a tcgen05.commit issued right after it) follows every tc
      op issued up to that one: a commit tracks them all;
    - assume=(MMA_ISSUE_ORDER,): also every MMA after every earlier MMA (module docstring).
    """
    unknown = set(assume) - {MMA_ISSUE_ORDER}
    if unknown:
        raise ValueError(f"unknown assumptions {sorted(unknown)}; known: {MMA_ISSUE_ORDER!r}")
    idx = {e.name: i for i, e in enumerate(events)}
    preds = [set() for _ in events]
    last = {}
    issued = []  # tc events so far, in issue order
    tc_waits = set()  # everything the tc thread has waited for so far
    for i, e in enumerate(events):
        for a in e.after:
            if a not in idx:
                raise KeyError(f"{e.name} waits for unknown event {a}")
            j = idx[a]
            preds[i].add(j)
            if events[j].actor == "tc":  # commit semantics: all tc ops issued up to j
                preds[i] |= {k for k in range(j + 1) if events[k].actor == "tc" and events[k].kind != "wait"}
        if e.actor != "tc":
            if e.actor in last:
                preds[i].add(last[e.actor])
            last[e.actor] = i
            continue
        tc_waits |= preds[i]
        preds[i] |= tc_waits
        if e.kind == "mma":
            for k in issued:
                f = events[k]
                if f.kind == "cp" or (f.kind == "mma" and (f.acc == e.acc or MMA_ISSUE_ORDER in assume)):
                    preds[i].add(k)
        issued.append(i)
    # topological order: events are listed per actor in program order; compute reachability
    order, state = [], {}

    def visit(i):
        stack = [(i, iter(sorted(preds[i])))]
        state[i] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                order.append(node)
                stack.pop()
            elif state.get(nxt) is None:
                state[nxt] = 1
                stack.append((nxt, iter(sorted(preds[nxt]))))
            elif state[nxt] == 1:
                raise ValueError(f"deadlock: wait cycle through {events[nxt].name}")

    for i in range(len(events)):
        if i not in state:
            visit(i)
    before = [set() for _ in events]  # before[i]: events that happen before i
    for i in order:
        for p in preds[i]:
            before[i] |= before[p] | {p}

    def hb(a, b):
        return a in before[b]

    writer = {}
    for i, e in enumerate(events):
        for c0, c1, v in e.writes:
            writer.setdefault(v, i)
    problems = []
    for i, e in enumerate(events):
        for c0, c1, v in e.reads:
            w = writer.get(v)
            if w is None or not hb(w, i):
                problems.append(f"{e.name} reads {v} [{c0},{c1}) not ordered after its write")
                continue
            for j, f in enumerate(events):
                if j in (i, w):
                    continue
                for d0, d1, u in f.writes:
                    if u != v and d0 < c1 and c0 < d1 and not (hb(j, w) or hb(i, j)):
                        problems.append(f"{f.name} writes {u} [{d0},{d1}) while {e.name} still needs "
                                        f"{v} [{c0},{c1})")
    for i, e in enumerate(events):  # every column inside the allocation
        for c0, c1, v in e.reads + e.writes:
            if not (0 <= c0 < c1 <= TMEM_COLS):
                problems.append(f"{e.name}: {v} [{c0},{c1}) outside the {TMEM_COLS} columns")
    return problems
