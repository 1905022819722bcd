"""What the latency tool times: the variants (stock, our modes, peer kernels, stacks), how one is
applied to a transformer and undone, and which of them can run here."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..modes import MODES
from .capture import KINDS, Replace
from .timing import Timer

BASELINE = "bf16-sdpa"


@dataclass(frozen=True)
class Variant:
    name: str
    label: str
    kind: str  # "stock" | "mode" | "fa4" | "peer" | "policy" | "stack"
    mode: str | None = None  # wan_fp4 attention mode; None on a stack: stock attention
    peer: str | None = None
    linears: str | None = None  # a stack's linears (eval.stacks.LINEARS)

    @property
    def compilable(self) -> bool:
        """Peers and fa4 replace calls through AttentionTap, which torch.compile does not trace."""
        return self.kind in ("stock", "mode", "policy", "stack")


VARIANTS = {
    "bf16-sdpa": Variant("bf16-sdpa", "stock diffusers BF16 (WanAttnProcessor, torch SDPA: cuDNN on Hopper)",
                         "stock"),
    "bf16-fa4": Variant("bf16-fa4", "BF16, flash-attn-4 for every attention call (wan_fp4 bf16 kernel)",
                        "fa4", mode="bf16"),
    "fp8": Variant("fp8", "wan_fp4 fp8 (the FP8 control; exp-based P)", "mode", mode="fp8"),
    "direct-p": Variant("direct-p", "wan_fp4 direct-p (E4M3 P without exp)", "mode", mode="direct-p"),
    "direct-p-fp4": Variant("direct-p-fp4", "wan_fp4 direct-p-fp4 (native on sm100, emulated elsewhere)",
                            "mode", mode="direct-p-fp4"),
    "cudnn-fp8": Variant("cudnn-fp8", "cuDNN FP8 SDPA for self-attention (external control; cross stock)",
                         "peer", peer="cudnn-fp8"),
    "sage1": Variant("sage1", "sageattention 1.x for self-attention (external control; cross stock)",
                     "peer", peer="sage1"),
    "float8-linears": Variant("float8-linears", "stock attention + torchao float8 linears (rowwise scales)",
                              "stack", linears="float8"),
    "direct-p+float8-linears": Variant("direct-p+float8-linears",
                                       "wan_fp4 direct-p + torchao float8 linears (rowwise scales)",
                                       "stack", mode="direct-p", linears="float8"),
}
ALIASES = {"bf16": "bf16-sdpa"}  # a user's "bf16" is stock diffusers BF16
DEFAULT_VARIANTS = ("bf16-sdpa", "bf16-fa4", "fp8", "direct-p", "direct-p-fp4", "cudnn-fp8")


class Skip(Exception):
    """A variant that cannot run here; the message says why."""


class Applied:
    """Context manager applying a variant to a transformer (and undoing it)."""

    def __init__(self, transformer, variant: Variant, *, timer: Timer, cross_attention=False,
                 policy_kwargs=None, peers=None):
        self.t, self.v, self.timer = transformer, variant, timer
        self.cross, self.policy_kwargs, self.peers = cross_attention, policy_kwargs or {}, peers or {}
        self.handle = None
        self.handlers = []  # innermost attention handlers (replacements)
        self.linears = None

    def __enter__(self):
        v = self.v
        if v.linears is not None:
            from .stacks import Linears

            self.linears = Linears(self.t, v.linears).__enter__()
        if v.kind in ("mode", "policy") or (v.kind == "stack" and v.mode is not None):
            from .. import processor

            kwargs = dict(self.policy_kwargs) if v.kind == "policy" else {}
            kwargs.setdefault("cross_attention", self.cross)
            try:
                self.handle = processor.enable(self.t, mode=kwargs.pop("mode", v.mode), **kwargs)
            except Exception:
                self.__exit__(None, None, None)  # `with` calls no __exit__ when __enter__ raises
                raise
        elif v.kind == "fa4":
            self.handlers = [Replace(self.peers["bf16-fa4"], kinds=KINDS, name=v.name)]
        elif v.kind == "peer":
            self.handlers = [Replace(self.peers[v.peer], kinds=("self",), name=v.peer)]
        return self

    def kernels(self) -> dict:
        if self.handle is None:
            return {}
        return {f"{m} / {k}": n for (m, k), n in sorted(self.handle.call_counts().items())}

    def reset_counts(self):
        if self.handle is not None:
            self.handle.reset_counts()

    def __exit__(self, *exc):
        if self.handle is not None:
            self.handle.disable()
        if self.linears is not None:
            self.linears.__exit__(*exc)
        return False


def resolve_peers(names, device) -> tuple[dict, dict]:
    """The peer callables the chosen variants need, and {variant: reason} for those not usable."""
    from .. import dispatch

    found, missing = {}, {}
    wanted = [n for n in names if VARIANTS.get(n) and VARIANTS[n].kind in ("peer", "fa4")]
    if not wanted:
        return found, missing
    device = torch.device(device)
    if device.type != "cuda":
        return found, {n: "needs a CUDA device (peer kernels are GPU-only)" for n in wanted}
    from .peers import available_peers

    for name in wanted:
        v = VARIANTS[name]
        if v.kind == "fa4":
            probe = torch.empty(1, 128, 1, 128, device=device, dtype=torch.bfloat16)
            ok, why = dispatch.kernel_available("fa4", probe, probe, probe, "bf16")
            if not ok:
                missing[name] = why
                continue
            found[name] = lambda q, k, v: dispatch.attention(q, k, v, mode="bf16", kernel="fa4")
        else:
            got, miss = available_peers([v.peer], device)
            if v.peer in miss:
                missing[name] = miss[v.peer]
            else:
                found[v.peer] = got[v.peer]
    return found, missing


def check_variants(names) -> tuple:
    names = tuple(ALIASES.get(n, n) for n in names)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise ValueError(f"--modes: unknown variant(s) {unknown}; known: {', '.join(VARIANTS)} "
                         f"(wan_fp4 modes: {', '.join(MODES)}; 'bf16' means bf16-sdpa)")
    if len(set(names)) != len(names):
        raise ValueError(f"--modes has duplicates: {names}")
    return names


def unavailable_stacks(names, device) -> dict:
    """{variant: reason} for the chosen stack variants that cannot run on `device`."""
    from .stacks import StackUnavailable, check_available

    missing = {}
    for name in names:
        v = VARIANTS.get(name)
        if v is not None and v.linears is not None:
            try:
                check_available(v.linears, device)
            except StackUnavailable as exc:
                missing[name] = str(exc)
    return missing
