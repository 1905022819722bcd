"""Training the embedded model on the procedural world, in resumable pieces on one GPU.

Three stages share one state directory, and every call continues where the last stopped, until
its wall-clock budget runs out (so a 10-minute job limit is no obstacle):

1. `vae`: the AutoencoderKLWan on freshly rendered clips, cropped around the main object: a
   reconstruction loss (L1 + L2, weighted up where an object covers the pixel, since objects are a
   small part of a frame and all the detector reads) of the posterior mean, plus a small L2 on that
   mean. The mean is what the data stage encodes, so the decoder trains on exactly what it will see.
   Its per-channel latent mean and std are measured afterwards and written into its config
   (`latents_mean`/`latents_std`), which WanPipeline uses to un-normalise, and a round trip of
   rendered clips is read back by the adherence detector: the ceiling of the model's accuracy.
2. `data`: a fixed set of clips is rendered, encoded (posterior mean, normalised) and its captions
   tokenized to `MAX_SEQUENCE_LENGTH`, exactly as WanPipeline tokenizes prompts.
3. `transformer`: the WanTransformer3DModel and the UMT5 text encoder together, with Wan's flow
   matching objective: x_t = (1 - s) x0 + s e, the model predicts e - x0 at timestep 1000 s, with s
   drawn from the flow-shifted distribution the sampler uses; the caption is replaced by the empty
   prompt with probability `cfg_dropout` (classifier-free guidance). An exponential moving average
   of both is what gets exported.

Everything is seeded from `TrainConfig.seed`; GPU kernels are not bit-deterministic, so a rerun
reproduces the losses closely, not bit for bit.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from . import trained, world


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 20261130
    size: int = 128
    frames: int = 17
    # VAE: fully convolutional in space, so it trains on crops of the full-size clips (objects at
    # the scale it decodes them, in a quarter of the pixels); but not in time: one trained on 9
    # frames decoded the later frames of a 17-frame clip as noise, so it trains at the full length.
    vae_size: int = 64  # crop side
    vae_frames: int = 17
    vae_batch: int = 32
    vae_lr: float = 8e-4
    vae_object_weight: float = 4.0  # extra reconstruction weight on pixels an object covers
    vae_latent_l2: float = 1e-4  # keeps the deterministic latents' scale in check
    vae_budget_s: float = 300.0
    # data
    clips: int = 12288
    encode_batch: int = 64
    # transformer + text encoder
    batch: int = 256  # a step is launch-bound at this size (~4,000 small ops), so a larger batch is nearly free
    text_tokens: int = 96  # the encoder runs on this many tokens (captions are shorter); zeros pad to 512
    lr: float = 4e-4
    warmup: int = 200
    weight_decay: float = 0.01
    cfg_dropout: float = 0.1
    flow_shift: float = 3.0  # the sampler's (UniPC, flow_shift 3.0): train on the same noise levels
    ema_decay: float = 0.998
    # torch.compile backend for the transformer's training forward ("" = eager). A step is
    # launch-bound (thousands of small ops), which fusing attacks; "inductor" is the one to try on a GPU.
    compile_backend: str = ""
    log_every: int = 50


def _autocast(device: torch.device):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


class Trainer:
    """Holds the state directory; `run(budget_s)` advances whichever stage is unfinished."""

    def __init__(self, state_dir, config: TrainConfig = TrainConfig(), device=None, log=print):
        self.dir = Path(state_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.log = log
        self.parts = trained.build_components(config.seed)
        self.history = self._load_json("history.json", {"vae": [], "transformer": [], "events": []})

    def init_from(self, export_dir, history: dict | None = None) -> None:
        """Start an empty state from an exported pipeline (the VAE as trained, the transformer and
        text encoder from its EMA weights, a fresh optimizer): for a state directory that was lost."""
        if (self.dir / "vae_done.pt").is_file():
            raise FileExistsError(f"{self.dir} already holds a trained VAE; init_from needs an empty state")
        from diffusers import AutoencoderKLWan, WanTransformer3DModel
        from transformers import UMT5EncoderModel

        export_dir = Path(export_dir)
        vae = AutoencoderKLWan.from_pretrained(export_dir / "vae", torch_dtype=torch.float32)
        config = {k: v for k, v in vae.config.items() if not k.startswith("_")}  # no paths: weights-only loadable
        torch.save({"model": vae.state_dict(), "config": config, "step": -1}, self.dir / "vae_done.pt")
        tr = WanTransformer3DModel.from_pretrained(export_dir / "transformer", torch_dtype=torch.float32)
        te = UMT5EncoderModel.from_pretrained(export_dir / "text_encoder", torch_dtype=torch.float32)
        self.parts["transformer"].load_state_dict(tr.state_dict())
        self.parts["text_encoder"].load_state_dict(te.state_dict())
        if history is not None:
            self.history = history
        self._event(f"state initialised from {export_dir}")

    # -- state files -------------------------------------------------------------------------
    def _load_json(self, name, default):
        path = self.dir / name
        return json.loads(path.read_text()) if path.is_file() else default

    def _save_json(self, name, value):
        (self.dir / name).write_text(json.dumps(value, indent=1))

    def _event(self, text):
        self.history["events"].append({"time": time.time(), "text": text})
        self.log(text)

    @property
    def stage(self) -> str:
        if not (self.dir / "vae_done.pt").is_file():
            return "vae"
        if not (self.dir / "data.pt").is_file():
            return "data"
        return "transformer"

    def run(self, budget_s: float, transformer_steps: int | None = None) -> dict:
        """Advance training for up to `budget_s` seconds of wall time (the current step finishes)."""
        deadline = time.time() + budget_s
        if self.stage == "vae":
            self.train_vae(deadline)
        if self.stage == "data" and time.time() < deadline:
            self.encode_data()
        if self.stage == "transformer" and time.time() < deadline:
            self.train_transformer(deadline, transformer_steps)
        self._save_json("history.json", self.history)
        return self.history

    # -- stage 1: the VAE ---------------------------------------------------------------------
    def train_vae(self, deadline: float) -> None:
        """Train until `deadline` or until the VAE has had `vae_budget_s` of training in all."""
        cfg, dev = self.config, self.device
        vae = self.parts["vae"].to(dev).train()
        opt = torch.optim.AdamW(vae.parameters(), lr=cfg.vae_lr, weight_decay=0.0)
        path = self.dir / "vae.pt"
        step, elapsed = 0, 0.0
        if path.is_file():
            state = torch.load(path, map_location=dev)
            vae.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
            step, elapsed = state["step"], state["elapsed"]
        gen = torch.Generator().manual_seed(cfg.seed + 100 + step)
        start = time.time()
        deadline = min(deadline, start + cfg.vae_budget_s - elapsed)
        self._event(f"vae: from step {step} ({elapsed:.0f} s trained)")
        step = self._vae_steps("vae", vae, list(vae.parameters()), opt, gen, step, deadline)
        elapsed += time.time() - start
        torch.save({"model": vae.state_dict(), "opt": opt.state_dict(), "step": step, "elapsed": elapsed}, path)
        if elapsed >= cfg.vae_budget_s:
            self._finish_vae(vae, step)

    def _vae_loss(self, vae, x: torch.Tensor, weight: torch.Tensor, frozen_encoder: bool = False) -> dict:
        """Weighted L1 + L2 reconstruction of the posterior mean, plus the latent L2."""
        with _autocast(self.device):
            with torch.set_grad_enabled(not frozen_encoder and torch.is_grad_enabled()):
                mean = vae.encode(x).latent_dist.mean
            recon = vae.decode(mean).sample
        err = recon.float() - x
        l1 = (weight * err.abs()).mean() / weight.mean()
        l2 = (weight * err.pow(2)).mean() / weight.mean()
        latent_l2 = mean.float().pow(2).mean()
        return {"loss": l1 + l2 + self.config.vae_latent_l2 * latent_l2, "l1": l1, "l2": l2, "latent_l2": latent_l2}

    def _vae_steps(self, key: str, vae, params: list, opt, gen: torch.Generator, step: int, deadline: float) -> int:
        """Optimise `params` of the VAE on fresh batches until `deadline`, logging under
        history[key] ("vae", or "decoder" with the encoder frozen); returns the step reached."""
        while time.time() < deadline:
            terms = self._vae_loss(vae, *self._vae_batch(gen, self.device), frozen_encoder=key == "decoder")
            opt.zero_grad(set_to_none=True)
            terms.pop("loss").backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            if step % self.config.log_every == 0:
                row = {"step": step, **{k: float(v.detach()) for k, v in terms.items()}, "time": time.time()}
                self.history.setdefault(key, []).append(row)
                self.log(f"{key} step {step}: l1 {row['l1']:.4f} l2 {row['l2']:.5f} latent l2 {row['latent_l2']:.3f}")
        return step

    def finetune_decoder(self, budget_s: float) -> None:
        """Train the frozen VAE's decoder alone for `budget_s` seconds more: sharper frames (the
        detector's shape test reads corners) with the encoder, and so the latent space the
        transformer learnt, unchanged. Continues from the last decoder step; needs a finished VAE."""
        cfg, dev = self.config, self.device
        if self.stage == "vae":
            raise RuntimeError("finetune_decoder needs a finished VAE (the vae stage is not done)")
        state = torch.load(self.dir / "vae_done.pt", map_location=dev)
        vae = self._frozen_vae(state)
        params = list(vae.decoder.parameters()) + list(vae.post_quant_conv.parameters())
        for p in params:
            p.requires_grad_(True)
        vae.decoder.train()
        opt = torch.optim.AdamW(params, lr=cfg.vae_lr / 2, weight_decay=0.0)
        rows = self.history.get("decoder", [])
        step = rows[-1]["step"] if rows else 0
        gen = torch.Generator().manual_seed(cfg.seed + 700 + step)
        self._event(f"decoder: fine-tuning from step {step} for {budget_s:.0f} s")
        step = self._vae_steps("decoder", vae, params, opt, gen, step, time.time() + budget_s)
        vae.eval().requires_grad_(False)
        torch.save({**state, "model": vae.state_dict()}, self.dir / "vae_done.pt")
        self._record_roundtrip(vae, f"decoder: done at step {step}")
        self._save_json("history.json", self.history)

    def _vae_batch(self, gen: torch.Generator, dev) -> tuple[torch.Tensor, torch.Tensor]:
        """Clips rendered at full size and cropped to `vae_size` around the main object's mid-clip
        position (jittered, clamped to the frame), with their per-pixel loss weight."""
        cfg = self.config
        specs = [world.sample_clip(gen, cfg.size, cfg.vae_frames) for _ in range(cfg.vae_batch)]
        x, cover = world.render(specs, dev, with_coverage=True)
        crop, jitter = cfg.vae_size, cfg.vae_size / 4
        xs, ws = [], []
        for i, spec in enumerate(specs):
            cx, cy = spec.main.centre(cfg.vae_frames // 2)
            left, top = (int(min(max(c - crop / 2 + jitter * (2 * float(torch.rand((), generator=gen)) - 1), 0),
                                 cfg.size - crop)) for c in (cx, cy))
            xs.append(x[i, :, :, top:top + crop, left:left + crop])
            ws.append(1.0 + cfg.vae_object_weight * cover[i, :, :, top:top + crop, left:left + crop])
        return torch.stack(xs), torch.stack(ws)

    @torch.no_grad()
    def _finish_vae(self, vae, step: int) -> None:
        """Measure the latent statistics WanPipeline normalises with and freeze the VAE."""
        cfg, dev = self.config, self.device
        vae.eval()
        gen = torch.Generator().manual_seed(cfg.seed + 300)
        means = []
        for _ in range(8):
            x = world.render([world.sample_clip(gen, cfg.size, cfg.frames) for _ in range(cfg.encode_batch)], dev)
            with _autocast(dev):
                means.append(vae.encode(x).latent_dist.mean.float())
        z = torch.cat(means).transpose(0, 1).reshape(vae.config.z_dim, -1)
        mean, std = z.mean(1), z.std(1)
        vae.register_to_config(latents_mean=[float(v) for v in mean], latents_std=[float(v) for v in std])
        torch.save({"model": vae.state_dict(), "config": dict(vae.config), "step": step},
                   self.dir / "vae_done.pt")
        self._record_roundtrip(vae, f"vae: done at step {step}; latent std per channel "
                                    f"{[round(float(v), 3) for v in std]}")

    def _record_roundtrip(self, vae, done: str) -> None:
        self.history["vae_roundtrip"] = self.vae_roundtrip(vae)
        self._event(f"{done}; round trip read back by the detector: {self.history['vae_roundtrip']['accuracy']}")

    @torch.no_grad()
    def vae_roundtrip(self, vae, clips: int = 64) -> dict:
        """The adherence detector on VAE round trips of rendered full-size clips: what a perfect
        transformer could score at best."""
        from ..eval import adherence

        cfg, dev = self.config, self.device

        def roundtrip(x):
            with _autocast(dev):
                return vae.decode(vae.encode(x.to(dev)).latent_dist.mean).sample
        result = adherence.validate(clips, seed=cfg.seed + 600, size=cfg.size, frames=cfg.frames,
                                    batch=min(clips, cfg.encode_batch), transform=roundtrip)
        quartiles = {shape: [round(float(q), 3) for q in torch.tensor(f).quantile(torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0]))]
                     for shape, f in result.fills.items() if f}
        return {"clips": clips, "accuracy": result.accuracy, "fill_quartiles": quartiles,
                "failures": result.failures[:8]}

    def _frozen_vae(self, state: dict | None = None):
        """The finished VAE, from vae_done.pt (or its already loaded `state`), frozen."""
        if state is None:
            state = torch.load(self.dir / "vae_done.pt", map_location=self.device)
        vae = self.parts["vae"]
        vae.load_state_dict(state["model"])
        vae.register_to_config(latents_mean=state["config"]["latents_mean"],
                               latents_std=state["config"]["latents_std"])
        return vae.to(self.device).eval().requires_grad_(False)

    def normalise(self, vae, mean_latents: torch.Tensor) -> torch.Tensor:
        mean = torch.tensor(vae.config.latents_mean, device=mean_latents.device).view(1, -1, 1, 1, 1)
        std = torch.tensor(vae.config.latents_std, device=mean_latents.device).view(1, -1, 1, 1, 1)
        return (mean_latents - mean) / std

    # -- stage 2: the encoded data set --------------------------------------------------------
    @torch.no_grad()
    def encode_data(self) -> None:
        cfg, dev = self.config, self.device
        vae = self._frozen_vae()
        specs = world.sample_clips(cfg.clips, seed=cfg.seed + 400, size=cfg.size, frames=cfg.frames)
        latents = []
        for start in range(0, cfg.clips, cfg.encode_batch):
            x = world.render(specs[start:start + cfg.encode_batch], dev)
            with _autocast(dev):
                mu = vae.encode(x).latent_dist.mean.float()
            latents.append(self.normalise(vae, mu).to(torch.bfloat16))
        captions = [s.caption for s in specs]
        ids, mask = tokenize(self.parts["tokenizer"], captions)
        torch.save({"latents": torch.cat(latents).cpu(), "ids": ids, "mask": mask, "captions": captions},
                   self.dir / "data.pt")
        self._event(f"data: {cfg.clips} clips encoded")

    # -- stage 3: transformer and text encoder -------------------------------------------------
    def train_transformer(self, deadline: float, max_steps: int | None = None) -> None:
        cfg, dev = self.config, self.device
        data = torch.load(self.dir / "data.pt")
        latents = data["latents"].to(dev)
        ids, mask = data["ids"].to(dev), data["mask"].to(dev)
        empty_ids, empty_mask = (t.to(dev) for t in tokenize(self.parts["tokenizer"], [""]))
        transformer = self.parts["transformer"].to(dev).train()
        text_encoder = self.parts["text_encoder"].to(dev).train()
        params = list(transformer.parameters()) + list(text_encoder.parameters())
        opt = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.99), weight_decay=cfg.weight_decay)
        forward = torch.compile(transformer, backend=cfg.compile_backend) if cfg.compile_backend else transformer
        ema = [p.detach().clone() for p in params]
        path = self.dir / "transformer.pt"
        step = self.history["transformer"][-1]["step"] if self.history["transformer"] else 0
        if path.is_file():
            state = torch.load(path, map_location=dev)
            transformer.load_state_dict(state["transformer"])
            text_encoder.load_state_dict(state["text_encoder"])
            opt.load_state_dict(state["opt"])
            ema = [t.to(dev) for t in state["ema"]]
            step = state["step"]
        gen = torch.Generator(dev).manual_seed(cfg.seed + 500 + step)
        self._event(f"transformer: from step {step}")
        n = latents.shape[0]
        while time.time() < deadline and (max_steps is None or step < max_steps):
            idx = torch.randint(n, (cfg.batch,), generator=gen, device=dev)
            x0 = latents[idx].float()
            drop = torch.rand(cfg.batch, generator=gen, device=dev) < cfg.cfg_dropout
            b_ids = torch.where(drop[:, None], empty_ids, ids[idx])
            b_mask = torch.where(drop[:, None], empty_mask, mask[idx])
            u = torch.rand(cfg.batch, generator=gen, device=dev)
            sigma = cfg.flow_shift * u / (1 + (cfg.flow_shift - 1) * u)
            noise = torch.randn(x0.shape, generator=gen, device=dev)
            s = sigma.view(-1, 1, 1, 1, 1)
            xt = (1 - s) * x0 + s * noise
            with _autocast(dev):
                context = encode_text(text_encoder, b_ids, b_mask, cfg.text_tokens)
                pred = forward(xt, sigma * 1000, context, return_dict=False)[0]
            loss = (pred.float() - (noise - x0)).pow(2).mean()
            for group in opt.param_groups:
                group["lr"] = cfg.lr * min(1.0, (step + 1) / cfg.warmup)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            decay = min(cfg.ema_decay, (1 + step) / (10 + step))
            with torch.no_grad():
                torch._foreach_lerp_(ema, [p.detach() for p in params], 1 - decay)
            if step % cfg.log_every == 0:
                row = {"step": step, "loss": float(loss), "grad_norm": float(grad_norm), "time": time.time()}
                self.history["transformer"].append(row)
                self.log(f"transformer step {step}: loss {row['loss']:.4f} grad {row['grad_norm']:.3f}")
        torch.save({"transformer": transformer.state_dict(), "text_encoder": text_encoder.state_dict(),
                    "opt": opt.state_dict(), "ema": ema, "step": step}, path)
        self._event(f"transformer: saved at step {step}")

    # -- export ---------------------------------------------------------------------------------
    def pipeline(self, use_ema: bool = True):
        """A WanPipeline (float32, on the training device) from the current state."""
        from diffusers import WanPipeline

        vae = self._frozen_vae()
        transformer = self.parts["transformer"].to(self.device)
        text_encoder = self.parts["text_encoder"].to(self.device)
        path = self.dir / "transformer.pt"
        if path.is_file():
            state = torch.load(path, map_location=self.device)
            transformer.load_state_dict(state["transformer"])
            text_encoder.load_state_dict(state["text_encoder"])
            if use_ema:
                params = list(transformer.parameters()) + list(text_encoder.parameters())
                with torch.no_grad():
                    for p, e in zip(params, state["ema"]):
                        p.copy_(e)
        return WanPipeline(tokenizer=self.parts["tokenizer"], text_encoder=text_encoder.eval(), vae=vae,
                           transformer=transformer.eval(), scheduler=self.parts["scheduler"])


def tokenize(tokenizer, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and mask padded to the pipeline's text length, as WanPipeline tokenizes."""
    out = tokenizer(prompts, padding="max_length", max_length=trained.MAX_SEQUENCE_LENGTH,
                    truncation=True, add_special_tokens=True, return_attention_mask=True,
                    return_tensors="pt")
    return out.input_ids, out.attention_mask


def encode_text(text_encoder, ids: torch.Tensor, mask: torch.Tensor, tokens: int | None = None) -> torch.Tensor:
    """The text context WanPipeline feeds the transformer: the encoder's states over the prompt's
    tokens, zeros over the padding. With `tokens`, the encoder sees only the first `tokens`
    positions (padding keys are masked, so the prompt's states are the same) and zeros fill the
    rest: the transformer still attends over the full padded length, as at inference."""
    length = ids.shape[1]
    if tokens is not None and tokens < length:
        if bool(mask[:, tokens:].any()):
            raise ValueError(f"a prompt is longer than text_tokens={tokens}")
        ids, mask = ids[:, :tokens], mask[:, :tokens]
    states = text_encoder(ids, mask).last_hidden_state * mask.unsqueeze(-1)
    return torch.nn.functional.pad(states, (0, 0, 0, length - states.shape[1]))


def save_pipeline(pipe, out_dir) -> Path:
    """`save_pretrained` in the shipped precision: the transformer in bf16 (the modules diffusers
    keeps in float32 stay float32), the VAE in float16, the text encoder in float32."""
    from .registry import write_defaults
    from .tiny import cast_like_from_pretrained, fp32_modules

    out_dir = Path(out_dir)
    pipe.to("cpu")
    cast_like_from_pretrained(pipe.transformer, torch.bfloat16, fp32_modules(pipe.transformer, torch.bfloat16))
    pipe.vae.to(torch.float16)
    pipe.text_encoder.to(torch.float32)
    pipe.save_pretrained(out_dir, safe_serialization=True)
    write_defaults(out_dir, **trained.DEFAULTS)  # the geometry it was trained at, for the CLI
    return out_dir


def loss_summary(history: dict) -> dict:
    """Final losses (mean of the last five logged rows) and step counts."""
    def tail(rows, key):
        vals = [r[key] for r in rows[-5:]]
        return sum(vals) / len(vals) if vals else math.nan
    return {"vae_steps": history["vae"][-1]["step"] if history["vae"] else 0,
            "vae_l1": tail(history["vae"], "l1"), "vae_l2": tail(history["vae"], "l2"),
            "transformer_steps": history["transformer"][-1]["step"] if history["transformer"] else 0,
            "transformer_loss": tail(history["transformer"], "loss")}


def plot_losses(history: dict, path) -> Path:
    """The VAE's and the transformer's logged losses against step, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    offset = history["vae"][-1]["step"] if history["vae"] else 0
    for stage in ("vae", "decoder"):  # the decoder's fine-tuning continues the VAE's step count
        rows, start = history.get(stage, []), 0 if stage == "vae" else offset
        for key in ("l1", "l2"):
            left.plot([start + r["step"] for r in rows], [r[key] for r in rows], label=f"{stage} {key}")
    left.set(title="AutoencoderKLWan: reconstruction (decoder alone after)", xlabel="step", yscale="log")
    left.legend()
    right.plot([r["step"] for r in history["transformer"]], [r["loss"] for r in history["transformer"]])
    right.set(title="WanTransformer3DModel + UMT5: flow-matching loss", xlabel="step", yscale="log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


# A configuration that exercises every stage in about a minute on a CPU (tests, --smoke).
SMOKE_CONFIG = TrainConfig(size=32, frames=5, vae_size=32, vae_frames=5, vae_batch=2, vae_budget_s=3.0,
                           clips=8, encode_batch=4, batch=4, warmup=2, log_every=1)
