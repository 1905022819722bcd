"""Per-layer attention-output error on inputs captured from the model.

`AttentionTap` sees every attention call a Wan transformer makes, with its site (block index,
self/cross, denoising step): it temporarily replaces diffusers' `transformer_wan.dispatch_attention_fn`,
which both the stock `WanAttnProcessor` and `WanDirectPAttnProcessor` call for every attention
(diffusers 0.42.*; the tap fails loudly when a run makes no call through it), and learns the site
from forward pre-hooks on each block's attn1/attn2. Handlers see (site, call, q, k, v) and may
record, time or replace the call; `Replace` sends chosen kinds to another attention function (a
peer kernel: the latency tool and the drift report run peers through it).

`capture_attention` stores q/k/v of chosen layers and steps during a (bf16) run, within a byte
budget; `attention_errors` then runs each mode's kernel on the captured inputs and compares the
output with exact float32 attention on a subset of query rows (kernels run on all rows, so
per-block scales are those of the real call).
"""
from __future__ import annotations

import contextlib
import math
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..pipelines import trained

KINDS = ("self", "cross")


@dataclass(frozen=True)
class Site:
    """Where an attention call happened. index: the call's number within one module call (the I2V
    image branch makes a second one); forward: transformer calls since the tap opened; step: the
    denoising step when the tap knows the pipeline, else None."""

    layer: int
    kind: str
    index: int
    forward: int
    step: int | None


Handler = Callable[..., torch.Tensor]  # handler(site, call, q, k, v) -> out


def _step_of(pipe):
    """Denoising step of the pipeline's current transformer call, from its timestep."""
    t = getattr(pipe, "_current_timestep", None)
    timesteps = getattr(getattr(pipe, "scheduler", None), "timesteps", None)
    if t is None or timesteps is None:
        return None
    hits = (timesteps.cpu() == torch.as_tensor(t).cpu().to(timesteps.dtype)).nonzero()
    return int(hits[0, 0]) if len(hits) else None


def _transformer_of(model):
    t = getattr(model, "transformer", model)
    blocks = getattr(t, "blocks", None)
    if not isinstance(blocks, torch.nn.ModuleList) or not all(hasattr(b, "attn1") and hasattr(b, "attn2")
                                                              for b in blocks):
        raise TypeError(f"expected a Wan pipeline or WanTransformer3DModel, got {type(model).__name__}")
    return t


class AttentionTap:
    """Route every attention call of a Wan transformer through `handlers` (first = outermost).

        with AttentionTap(pipe, [my_handler]) as tap: pipe(...)

    A handler is `handler(site, call, q, k, v) -> out` where `call(q, k, v)` runs the rest of the
    chain (finally diffusers' dispatcher with the processor's own arguments). Only one tap may be
    open at a time (they patch one module global)."""

    _lock = threading.Lock()
    _open = None

    def __init__(self, model, handlers=(), pipe=None):
        self.transformer = _transformer_of(model)
        self.pipe = pipe if pipe is not None else (model if model is not self.transformer else None)
        self.handlers = list(handlers)
        self.calls = 0
        self.forwards = 0
        self._site = None
        self._step = None
        self._hooks = []
        self._original = None

    # ------------------------------------------------------------------ hooks
    def _enter_module(self, layer, kind):
        def pre(module, args):
            self._site = [layer, kind, 0, self.forwards - 1, self._step]
        return pre

    def _leave_module(self, module, args, out):
        self._site = None

    def _count_forward(self, module, args):
        self.forwards += 1
        # Once per transformer call (it may sync the device): the pipeline's current step.
        self._step = _step_of(self.pipe) if self.pipe is not None else None

    def _dispatch(self, query, key, value, *args, **kwargs):
        original = self._original
        if self._site is None:  # a call from outside the transformer's attention modules
            return original(query, key, value, *args, **kwargs)
        layer, kind, index, fwd, step = self._site
        self._site[2] += 1
        self.calls += 1
        site = Site(layer, kind, index, fwd, step)

        def call(q, k, v, _i=0):
            if _i == len(self.handlers):
                return original(q, k, v, *args, **kwargs)
            return self.handlers[_i](site, lambda a, b, c: call(a, b, c, _i + 1), q, k, v)

        return call(query, key, value)

    # ------------------------------------------------------------------ context
    def __enter__(self):
        from diffusers.models.transformers import transformer_wan

        with AttentionTap._lock:
            if AttentionTap._open is not None:
                raise RuntimeError("another AttentionTap is open; close it first (taps patch one global)")
            AttentionTap._open = self
        self._module = transformer_wan
        self._original = transformer_wan.dispatch_attention_fn
        transformer_wan.dispatch_attention_fn = self._dispatch
        self._hooks.append(self.transformer.register_forward_pre_hook(self._count_forward))
        for i, block in enumerate(self.transformer.blocks):
            for kind, module in (("self", block.attn1), ("cross", block.attn2)):
                self._hooks.append(module.register_forward_pre_hook(self._enter_module(i, kind)))
                self._hooks.append(module.register_forward_hook(self._leave_module))
        return self

    def __exit__(self, *exc):
        self._module.dispatch_attention_fn = self._original
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        with AttentionTap._lock:
            AttentionTap._open = None
        return False

    def check_seen(self) -> None:
        """Raise when the transformer ran but no attention call came through the tap."""
        if self.forwards and not self.calls:
            raise RuntimeError("AttentionTap saw transformer calls but no attention call: diffusers' Wan "
                               "attention no longer goes through transformer_wan.dispatch_attention_fn "
                               "(wan-fp4 supports diffusers 0.42.*)")


class Replace:
    """Handler that runs the attention calls of `kinds` ("self", "cross") with `fn(q, k, v) -> out`
    instead of the rest of the chain, and passes the others on. `fn` gets diffusers' (B, S, H, D)
    tensors and must apply the default 1/sqrt(D) scale, unmasked: what Wan's processor asks of
    every call. `calls` counts calls per (who ran them, kind): `name` or "stock"."""

    def __init__(self, fn, kinds=("self",), name: str = "peer"):
        if not kinds or any(k not in KINDS for k in kinds):
            raise ValueError(f"kinds must be drawn from {KINDS}, got {kinds!r}")
        self.fn, self.kinds, self.name = fn, tuple(kinds), name
        self.calls: Counter = Counter()

    def __call__(self, site: Site, call, q, k, v):
        if site.kind in self.kinds:
            self.calls[(self.name, site.kind)] += 1
            return self.fn(q, k, v)
        self.calls[("stock", site.kind)] += 1
        return call(q, k, v)

    def kernels(self) -> dict:
        """Calls as "who / kind": n, the drift report's kernel column."""
        return {f"{who} / {kind}": n for (who, kind), n in sorted(self.calls.items())}


# --------------------------------------------------------------------------- capture
@dataclass
class Captured:
    layer: int
    kind: str
    step: int | None
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.q, self.k, self.v))


@dataclass
class Capture:
    """q/k/v captured at chosen (layer, kind, step), first transformer call of each step (the
    conditional branch under CFG), main attention call only (index 0), within max_bytes."""

    layers: frozenset | None = None  # None: all
    steps: frozenset | None = None   # None: all; steps are 0-based denoising steps
    kinds: tuple = ("self",)
    max_bytes: int = 4 << 30
    store: str = "cpu"
    records: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    _first_forward: dict = field(default_factory=dict)

    def __post_init__(self):
        for k in self.kinds:
            if k not in KINDS:
                raise ValueError(f"kinds must be drawn from {KINDS}, got {k!r}")
        if self.max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {self.max_bytes}")

    @property
    def nbytes(self) -> int:
        return sum(r.nbytes for r in self.records)

    def __call__(self, site: Site, call, q, k, v):
        step = site.step if site.step is not None else site.forward
        first = self._first_forward.setdefault(step, site.forward)
        wanted = (site.index == 0 and site.kind in self.kinds and site.forward == first
                  and (self.layers is None or site.layer in self.layers)
                  and (self.steps is None or step in self.steps))
        if wanted:
            need = sum(t.numel() * t.element_size() for t in (q, k, v))
            if self.nbytes + need > self.max_bytes:
                self.skipped.append({"layer": site.layer, "kind": site.kind, "step": step,
                                     "reason": f"over the capture budget of {self.max_bytes / 2**30:.2f} GiB"})
            else:
                self.records.append(Captured(site.layer, site.kind, step,
                                             *(t.detach().to(self.store, copy=True) for t in (q, k, v))))
        return call(q, k, v)


@contextlib.contextmanager
def capture_attention(pipe_or_transformer, *, layers=None, steps=None, kinds=("self",), max_bytes=4 << 30,
                      store="cpu", pipe=None):
    """`with capture_attention(pipe, layers=..., steps=...) as cap: pipe(...)`; then cap.records."""
    cap = Capture(frozenset(layers) if layers is not None else None,
                  frozenset(steps) if steps is not None else None, tuple(kinds), int(max_bytes), store)
    with AttentionTap(pipe_or_transformer, [cap], pipe=pipe) as tap:
        yield cap
    tap.check_seen()


# Two prompts of the trained model's world: its default (one object), and two objects moving two ways
TRAINED_PROMPTS = (trained.DEFAULT_PROMPT,
                   "a blue square moving up and a small yellow ball moving left on a gray background")


def trained_model_calls(prompts=TRAINED_PROMPTS, *, seed: int = 0, guidance: float = 5.0, kinds=("self", "cross")):
    """(steps, records): q, k, v of every layer's attention calls of `kinds` that the embedded
    trained model makes while it denoises each prompt on the CPU (bf16, its own defaults), at its
    first, middle and last step (the spread over denoising at a seventh of all steps' cost; steps
    maps those words to step indices). The conditional CFG call of each step only (Capture)."""
    from ..pipelines import load_pipeline

    d = trained.DEFAULTS
    n = d["steps"]
    steps = {"first": 0, "middle": n // 2, "last": n - 1}
    pipe = load_pipeline(trained.NAME, "cpu", torch.bfloat16)
    pipe.set_progress_bar_config(disable=True)
    records = []
    for prompt in prompts:
        with capture_attention(pipe, kinds=kinds, steps=steps.values()) as cap:
            pipe(prompt=prompt, negative_prompt="", height=d["height"], width=d["width"], num_frames=d["frames"],
                 num_inference_steps=n, guidance_scale=guidance,
                 generator=torch.Generator("cpu").manual_seed(seed), output_type="latent")
        records += cap.records
    return steps, records


def capture_bytes(transformer, tokens: int, text_tokens: int = 512, kinds=("self",), dtype_bytes: int = 2) -> int:
    """Bytes one captured call of each kind takes (batch 1)."""
    inner = transformer.config.num_attention_heads * transformer.config.attention_head_dim
    per = {"self": 3 * tokens * inner, "cross": (tokens + 2 * text_tokens) * inner}
    return sum(per[k] for k in kinds) * dtype_bytes


def plan_layers(num_layers: int, per_layer_bytes: int, n_steps: int, max_bytes: int, must=()) -> list[int]:
    """The layers to capture within max_bytes: all when they fit, else an even spread that keeps the
    first and last layer and those in `must` (e.g. guard layers) as far as the budget allows."""
    if num_layers < 1 or n_steps < 1:
        raise ValueError(f"num_layers and n_steps must be positive, got {num_layers}, {n_steps}")
    fit = int(max_bytes // max(1, per_layer_bytes * n_steps))
    if fit >= num_layers:
        return list(range(num_layers))
    if fit < 1:
        raise ValueError(f"max_bytes={max_bytes} holds no layer: one layer over {n_steps} step(s) takes "
                         f"{per_layer_bytes * n_steps} bytes; raise the capture budget")
    chosen = [m % num_layers for m in must][:fit]
    rest = fit - len(set(chosen))
    if rest > 0:
        spread = torch.linspace(0, num_layers - 1, rest).round().long().tolist()
        for i in spread:
            if i not in chosen:
                chosen.append(i)
        i = 0
        while len(set(chosen)) < fit and i < num_layers:  # spread collided with `must`: fill up
            if i not in chosen:
                chosen.append(i)
            i += 1
    return sorted(set(chosen))


# --------------------------------------------------------------------------- errors
def _exact(q, k, v, rows):
    """Exact attention in float32 of the query rows `rows` over all keys, (B, R, H, D)."""
    qs = q[:, rows].float().transpose(1, 2)
    out = torch.nn.functional.scaled_dot_product_attention(qs, k.float().transpose(1, 2),
                                                            v.float().transpose(1, 2))
    return out.transpose(1, 2)


def _rows(sq: int, count: int, device) -> torch.Tensor:
    if count >= sq:
        return torch.arange(sq, device=device)
    return torch.linspace(0, sq - 1, count, device=device).round().long().unique()


def attention_errors(records, modes, *, device=None, rows: int = 1024, fp4=None, peers=None,
                     progress: bool = True) -> list[dict]:
    """Per captured call and mode: rel-L2, cosine and max |err| of `wan_fp4.attention(mode)` against
    exact float32 attention, on `rows` evenly spread query rows; likewise each of `peers`
    ({label: fn(q, k, v)}, kernel "peer"), whose rows carry the label as their mode. A kernel that
    fails (e.g. direct-p-fp4 overflowing without its guard) gets NaN metrics and the error message."""
    from tqdm.auto import tqdm

    from .. import dispatch
    from . import metrics

    if rows < 1:
        raise ValueError(f"rows must be positive, got {rows}")
    peers = dict(peers or {})
    kernels = [(m, None) for m in modes] + list(peers.items())
    out = []
    with tqdm(total=len(records) * len(kernels), desc="attention error", unit="call", disable=not progress) as bar:
        for rec in records:
            dev = torch.device(device) if device is not None else rec.q.device
            q, k, v = (t.to(dev) for t in (rec.q, rec.k, rec.v))
            idx = _rows(q.shape[1], rows, dev)
            exact = _exact(q, k, v, idx)
            for mode, peer in kernels:
                row = {"layer": rec.layer, "kind": rec.kind, "step": rec.step, "mode": mode,
                       "tokens": q.shape[1], "keys": k.shape[1], "heads": q.shape[2], "rows": int(idx.numel())}
                try:
                    if peer is None:
                        row["kernel"] = dispatch.kernel_for(q, mode, k, v)
                        got = dispatch.attention(q, k, v, mode=mode, fp4=fp4)[:, idx]
                    else:
                        row["kernel"] = "peer"
                        got = peer(q, k, v)[:, idx]
                    row.update(metrics.compare(got, exact))
                except (FloatingPointError, RuntimeError, ValueError) as exc:
                    row.update(cosine=math.nan, rel_l2=math.nan, max_abs=math.nan, finite=False,
                               error=f"{type(exc).__name__}: {exc}")
                out.append(row)
                bar.update()
            del q, k, v, exact
    return out


def plot_layer_errors(errors: list[dict], path, *, title: str, smoke: bool) -> None:
    """rel-L2 of each mode's attention output vs exact, per layer, one panel per kind, one line per
    (mode, step)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in KINDS if any(e["kind"] == k for e in errors)]
    fig, axes = plt.subplots(1, max(1, len(kinds)), figsize=(6.5 * max(1, len(kinds)), 4.2),
                             constrained_layout=True, squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        rows = [e for e in errors if e["kind"] == kind]
        styles = ("-", "--", ":", "-.")
        steps_all = sorted({e["step"] for e in rows}, key=lambda s: (s is None, s))
        for c, mode in enumerate(dict.fromkeys(e["mode"] for e in rows)):
            for j, step in enumerate(steps_all):
                pts = sorted((e["layer"], e["rel_l2"]) for e in rows if e["mode"] == mode and e["step"] == step)
                if not pts:
                    continue
                ys = [y if y is not None and math.isfinite(y) else float("nan") for _, y in pts]
                ax.plot([x for x, _ in pts], ys, marker="o", ms=3, color=f"C{c}", ls=styles[j % len(styles)],
                        label=f"{mode}, step {step}")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_yscale("log")
        ax.set_xlabel("layer (block index)")
        ax.set_ylabel("rel. L2 of attention output vs exact fp32")
        ax.set_title(f"{kind}-attention")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    if smoke:
        title += "\nSMOKE TEST (random weights): not a quality figure"
    fig.suptitle(title, color="firebrick" if smoke else "black")
    fig.savefig(path, dpi=110)
    plt.close(fig)
