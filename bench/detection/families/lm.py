"""The language-model families of the families benchmark (issue 30 part 6): a small causal transformer LM
and a tiny mixture-of-experts LM, trained on CPU in a few seconds with AdamW, warmup and cosine, saved every
step by the PyTorch hook, with the failures of today's training injected and labelled while they train.

Data: synthetic token sequences from a fixed rule (``x[t+1] = (x[t] + x[t-1]) mod V`` from random starts),
which a two-block model learns in a hundred steps: nothing is downloaded. What the hook saves at every step:
gradients (full tensors: the models are small), the loss, the outputs of the blocks' modules (forward
order), and through the names of :mod:`tornasole.core.llm_signals`: ``lr/0``, ``grad_norm/total`` (before
clipping), ``loss_scale`` and ``skipped_step`` (a dynamic loss scaler, fp16's, simulated on the CPU's fp32
gradients: the scaled gradients overflow when above the fp16 maximum), the routers' per-expert load
(:func:`tornasole.pytorch.save_router_stats`) and each attention's normalised entropy
(:func:`tornasole.pytorch.save_attention_entropy`), each attention's largest logit
(:func:`tornasole.pytorch.save_attention_logit_max`) and the batch's fingerprint with the epoch
(:func:`tornasole.pytorch.record_batch`).

Data is a stream (a fresh batch every step) or, for the cases about epochs and resumes, a fixed data set of
``dataset_batches`` batches' worth of sequences read in epochs, shuffled per sample with a seed per epoch
(``DistributedSampler.set_epoch``'s scheme) or in a fixed order; the loader's state is (epoch, position).

Labels (:class:`LmMonitor`) come from the published thresholds, computed here from the training's own values,
never from the rules:

* ``loss_spike``: OLMo-core's ``StabilityMonitorCallback`` (loss above the mean of the previous 128 losses by
  more than 6 of their standard deviations, full window only) or Megatron-LM's ``is_unexpectedly_large``
  (loss above 10x the largest of the first 100 losses);
* ``grad_norm_spike``: Megatron-LM's factor on the total gradient norm (above 10x the largest of the first
  100 norms after the first 10 steps, whose norms are the initialisation's);
* ``non_finite``: OLMo-core's NaN checker: a module output or the loss holds NaN/Inf;
* ``scale_collapse``: DeepSpeed's "loss scale already at minimum" (issue 697): the scale reached its floor
  (1) and the step still overflowed;
* ``lr_discontinuity``: the applied learning rate departs from the schedule the run was configured with by
  more than 10% (a resume that did not restore the scheduler);
* ``dead_expert``: an expert received no token at 10 consecutive steps (Megatron-Core/NeMo's per-expert
  token counts at 0);
* ``attention_collapse``: a layer's mean attention entropy below 0.05 nats (Zhai et al. 2023 report
  collapsed layers near 0; healthy ones here stay above 0.5);
* ``attention_logit_growth``: a layer's largest attention logit above 100 (Kimi K2's QK-Clip cap; Dehghani
  et al. 2023 on logits growing without bound);
* ``data_replay``: a sample read twice in one epoch (a sampler's contract is each sample once an epoch: a
  resume that did not restore the loader's position breaks it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

VOCAB = 16
SEQ = 16
BATCH = 16
DIM = 32
HEADS = 2
STEPS = 300
WARMUP = 20
PEAK_LR = 5e-3
FP16_MAX = 65504.0
SCALE_GROWTH_INTERVAL = 25  # GradScaler's default is 2000 steps; a 200-step run needs a shorter one


@dataclass(frozen=True)
class LmSpec:
    """One LM case: the model and what goes wrong (every field's default is healthy)."""

    moe: bool = False
    clip: float | None = 1.0  # healthy recipe clips gradients at 1.0
    fp16: bool = False  # simulate a dynamic loss scaler
    onset: int = 250  # the step a fault starts (after a full 128-step window of the plateau)
    bad_batch: bool = False  # one batch of random tokens at ``onset``
    lr_blowup: float | None = None  # learning rate x this from ``onset``
    loss_weight_spike: float | None = None  # the loss of ``onset`` x this (a grad-norm spike)
    nan_module: bool = False  # block 1's attention projection gets an Inf weight at ``onset``
    overflow_always: bool = False  # fp16: the loss x 1e12 from ``onset`` (every scale overflows)
    lr_restart: bool = False  # resumed at ``onset`` without the scheduler: warmup starts over
    dead_expert: bool = False  # the router never picks expert 2 from ``onset``
    attn_temperature: float | None = None  # attention logits x this from ``onset``
    batch_noise: float = 0.0  # healthy hard negative: a share of random tokens in every batch
    aux_loss: float = 0.01  # MoE load-balancing loss weight
    dataset_batches: int | None = None  # read a fixed data set of this many batches in epochs (None: stream)
    shuffle: bool = True  # shuffle the data set's samples every epoch (seeded by the epoch)
    record_epoch: bool = True  # record_batch is told the epoch
    resume_replays: bool = False  # resumed at ``onset`` without the loader's position: the epoch starts over
    clean_resume: bool = False  # resumed at ``onset`` with the loader's position restored (healthy)
    attn_logit_growth: float | None = None  # attention logits x this, compounded every step from ``onset``


@dataclass
class LmResult:
    labels: dict[str, int]
    onset: int | None
    train_before: list[int] = field(default_factory=list)
    final_loss: float = float("nan")


def schedule(step: int) -> float:
    """The configured schedule: linear warmup to ``PEAK_LR`` over ``WARMUP`` steps, cosine to 0.1x."""
    if step < WARMUP:
        return PEAK_LR * (step + 1) / WARMUP
    t = (step - WARMUP) / max(1, STEPS - WARMUP)
    return PEAK_LR * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def _models() -> Any:
    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(DIM, 3 * DIM)
            self.proj = nn.Linear(DIM, DIM)
            self.temperature = 1.0
            self.last_weights: torch.Tensor | None = None
            self.last_logits: torch.Tensor | None = None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
            logits = (q @ k.transpose(-1, -2)) / math.sqrt(DIM // HEADS) * self.temperature
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
            masked = logits.masked_fill(mask, float("-inf"))
            w = masked.softmax(-1)
            self.last_weights = w.detach()
            self.last_logits = masked.detach()
            return self.proj((w @ v).transpose(1, 2).reshape(b, t, DIM))

    class Mlp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(DIM, 4 * DIM)
            self.out = nn.Linear(4 * DIM, DIM)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(torch.relu(self.fc(x)))

    class Moe(nn.Module):
        """Top-1 routing over 4 experts with a load-balancing loss (Switch Transformer's)."""

        def __init__(self, experts: int = 4) -> None:
            super().__init__()
            self.router = nn.Linear(DIM, experts)
            self.experts = nn.ModuleList(Mlp() for _ in range(experts))
            self.blocked: int | None = None
            self.last_probs: torch.Tensor | None = None
            self.aux = torch.zeros(())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            logits = self.router(x)
            if self.blocked is not None:
                logits = logits.clone()
                logits[..., self.blocked] = -1e9
            probs = logits.softmax(-1)
            self.last_probs = probs.detach()
            choice = probs.argmax(-1)
            out = torch.zeros_like(x)
            for e, expert in enumerate(self.experts):
                sel = choice == e
                if sel.any():
                    out[sel] = expert(x[sel]) * probs[sel][:, e : e + 1]
            n = probs.shape[-1]
            frac = torch.bincount(choice.reshape(-1), minlength=n).float() / choice.numel()
            self.aux = n * (frac * probs.reshape(-1, n).mean(0)).sum()
            return out

    class Block(nn.Module):
        def __init__(self, moe: bool) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(DIM)
            self.attn = Attention()
            self.ln2 = nn.LayerNorm(DIM)
            self.mlp = Moe() if moe else Mlp()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class TinyLM(nn.Module):
        def __init__(self, moe: bool) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, DIM)
            self.pos = nn.Parameter(torch.zeros(SEQ, DIM))
            self.blocks = nn.ModuleList([Block(False), Block(moe)])
            self.norm = nn.LayerNorm(DIM)
            self.head = nn.Linear(DIM, VOCAB)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            x = self.embed(tokens) + self.pos[: tokens.shape[1]]
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))

    return TinyLM


def batch(rng: np.random.Generator, noise: float = 0.0, random_tokens: bool = False) -> np.ndarray:
    """``BATCH`` sequences of ``SEQ + 1`` tokens of the Fibonacci-mod-V rule (random tokens: corrupt data)."""
    if random_tokens:
        return rng.integers(0, VOCAB, size=(BATCH, SEQ + 1))
    seqs = np.zeros((BATCH, SEQ + 1), dtype=np.int64)
    seqs[:, :2] = rng.integers(0, VOCAB, size=(BATCH, 2))
    for t in range(2, SEQ + 1):
        seqs[:, t] = (seqs[:, t - 1] + seqs[:, t - 2]) % VOCAB
    if noise:
        flip = rng.random(seqs.shape) < noise
        seqs[flip] = rng.integers(0, VOCAB, size=int(flip.sum()))
    return seqs


class Loader:
    """A fixed data set read in epochs: the state a resume must restore is ``(epoch, position)``."""

    def __init__(self, seed: int, batches: int, shuffle: bool) -> None:
        self.seed, self.batches, self.shuffle = seed, batches, shuffle
        self.samples = np.concatenate([batch(np.random.default_rng([seed, 1000, b])) for b in range(batches)])
        self.epoch = self.position = 0

    def _order(self) -> np.ndarray:
        n = len(self.samples)
        return np.random.default_rng([self.seed, self.epoch]).permutation(n) if self.shuffle else np.arange(n)

    def next(self) -> tuple[np.ndarray, np.ndarray, int]:
        """``(sequences, sample ids, epoch)`` of the next batch."""
        ids = self._order()[self.position * BATCH : (self.position + 1) * BATCH]
        epoch = self.epoch
        self.position += 1
        if self.position == self.batches:
            self.epoch, self.position = self.epoch + 1, 0
        return self.samples[ids], ids, epoch


class LmMonitor:
    """The published criteria of the module docstring, fed the training's own values step by step."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.norms: list[float] = []
        self.labels: dict[str, int] = {}
        self.idle: dict[tuple[int, int], int] = {}
        self.seen: tuple[int, set[int]] = (-1, set())

    def _label(self, name: str, step: int) -> None:
        self.labels.setdefault(name, step)

    def step(
        self,
        step: int,
        loss: float,
        grad_norm: float,
        outputs_finite: bool,
        lr: float,
        configured_lr: float,
        scale: float | None,
        overflow: bool,
        loads: list[np.ndarray],
        entropies: list[float],
        logit_maxima: list[float] = (),
        samples: tuple[int, np.ndarray] | None = None,
    ) -> None:
        if not outputs_finite or not math.isfinite(loss):
            self._label("non_finite", step)
        if math.isfinite(loss):
            window = self.losses[-128:]
            if len(window) == 128:
                mean = sum(window) / 128
                std = math.sqrt(sum((x - mean) ** 2 for x in window) / 128)
                if std >= 1e-10 and loss > mean + 6 * std:
                    self._label("loss_spike", step)
            first = self.losses[:100]
            if first and loss > 10 * max(first):
                self._label("loss_spike", step)
            self.losses.append(loss)
        if math.isfinite(grad_norm) and not overflow:
            early = self.norms[10:110]
            if len(self.norms) >= 10 and early and grad_norm > 10 * max(early):
                self._label("grad_norm_spike", step)
            self.norms.append(grad_norm)
        if abs(lr - configured_lr) > 0.1 * configured_lr:
            self._label("lr_discontinuity", step)
        if scale is not None and scale <= 1.0 and overflow:
            self._label("scale_collapse", step)
        for layer, load in enumerate(loads):
            for e, share in enumerate(load):
                key = (layer, e)
                self.idle[key] = self.idle.get(key, 0) + 1 if share == 0 else 0
                if self.idle[key] >= 10:
                    self._label("dead_expert", step)
        if any(h < 0.05 for h in entropies):
            self._label("attention_collapse", step)
        if any(m > 100 for m in logit_maxima):
            self._label("attention_logit_growth", step)
        if samples is not None:
            epoch, ids = samples
            if epoch != self.seen[0]:
                self.seen = (epoch, set())
            if self.seen[1].intersection(int(i) for i in ids):
                self._label("data_replay", step)
            self.seen[1].update(int(i) for i in ids)


def run(spec: LmSpec, seed: int, out_dir: str) -> LmResult:
    """Train one LM case for ``STEPS`` steps into ``out_dir``; return its labels and onset."""
    import torch

    import tornasole.pytorch as ts
    from tornasole.core.attention_entropy import normalised_entropy
    from tornasole.core.llm_signals import GRAD_NORM_TOTAL, LOSS_SCALE, SKIPPED_STEP
    from tornasole.pytorch.llm_stats import attention_logit_max, expert_load

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = _models()(spec.moe)
    opt = torch.optim.AdamW(model.parameters(), lr=schedule(0), weight_decay=0.01)
    hook = ts.Hook(
        out_dir,
        save_config=ts.SaveConfig(save_interval=1),
        include_regex=[r"blocks\.\d+\.(attn|mlp)_output_0", r"(embed|head)_output_0"],
        include_collections=["gradients", "losses"],
        stop_check_interval=None,
    )
    hook.register_module(model)
    monitor = LmMonitor()
    loader = Loader(seed, spec.dataset_batches, spec.shuffle) if spec.dataset_batches else None
    scale = 2.0**16 if spec.fp16 else None
    clean = 0
    train_before: list[int] = []
    final = float("nan")
    for step in range(STEPS):
        bad = step >= spec.onset
        sched_step = step - spec.onset if (spec.lr_restart and bad) else step
        lr = schedule(sched_step) * (spec.lr_blowup if (spec.lr_blowup and bad) else 1.0)
        for g in opt.param_groups:
            g["lr"] = lr
        moe = model.blocks[1].mlp
        if spec.dead_expert and spec.moe:
            moe.blocked = 2 if bad else None
        for blk in model.blocks:
            blk.attn.temperature = spec.attn_temperature if (spec.attn_temperature and bad) else 1.0
            if spec.attn_logit_growth and bad:
                blk.attn.temperature = spec.attn_logit_growth ** (step - spec.onset + 1)
        if spec.nan_module and step == spec.onset:
            with torch.no_grad():
                model.blocks[1].attn.proj.weight[0, 0] = float("inf")
        samples = None
        if loader is not None:
            if step == spec.onset and spec.resume_replays:
                loader.position = 0  # the restored job's loader starts its epoch over
            if step == spec.onset and spec.clean_resume:
                restored = Loader(seed, spec.dataset_batches, spec.shuffle)
                restored.epoch, restored.position = loader.epoch, loader.position
                loader = restored
            seqs, ids, epoch = loader.next()
            samples = (epoch, ids)
            data = torch.as_tensor(seqs)
        else:
            data = torch.as_tensor(
                batch(rng, spec.batch_noise, random_tokens=spec.bad_batch and step == spec.onset)
            )
        opt.zero_grad()
        logits = model(data[:, :-1])
        epoch = samples[0] if (samples is not None and spec.record_epoch) else None
        ts.record_batch(hook, data, epoch=epoch)  # after the forward pass: the hook's step is this step
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), data[:, 1:].reshape(-1))
        objective = loss
        if spec.moe:
            objective = objective + spec.aux_loss * moe.aux
        if spec.loss_weight_spike and step == spec.onset:
            objective = objective * spec.loss_weight_spike
        if spec.overflow_always and bad:
            objective = objective * 1e12
        hook.record_tensor_value("loss", loss)
        outputs_finite = all(
            torch.isfinite(t).all() for t in (logits, *(b.attn.last_weights for b in model.blocks))
        )
        objective.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
        overflow = False
        if scale is not None:
            overflow = not math.isfinite(norm) or any(float(g.abs().max()) * scale > FP16_MAX for g in grads)
        hook.save_scalar("lr/0", lr)
        hook.save_scalar(GRAD_NORM_TOTAL, norm)
        if scale is not None:
            hook.save_scalar(LOSS_SCALE, scale)
            hook.save_scalar(SKIPPED_STEP, float(overflow))
        loads = []
        if spec.moe:
            ts.save_router_stats(hook, "blocks.1.mlp", moe.last_probs)
            loads.append(expert_load(moe.last_probs))
        entropies, nats, logit_maxima = [], [], []
        for i, blk in enumerate(model.blocks):
            w = blk.attn.last_weights
            ts.save_attention_entropy(hook, f"blocks.{i}.attn", w)
            ts.save_attention_logit_max(hook, f"blocks.{i}.attn", blk.attn.last_logits)
            logit_maxima.append(attention_logit_max(blk.attn.last_logits) or 0.0)
            e = normalised_entropy(w.numpy())
            entropies.append(e if e is not None else 1.0)
            p = w.clamp_min(1e-30)
            nats.append(float(-(w * p.log()).sum(-1)[..., 1:].mean()))
        monitor.step(
            step,
            float(loss.detach()),
            norm,
            bool(outputs_finite),
            lr,
            schedule(step),
            scale,
            overflow,
            loads,
            nats,
            logit_maxima,
            samples,
        )
        if overflow:
            scale, clean = max(scale / 2, 1.0), 0
        else:
            if spec.clip is not None and math.isfinite(norm):
                torch.nn.utils.clip_grad_norm_(model.parameters(), spec.clip)
            if math.isfinite(norm):
                opt.step()
            if scale is not None:
                clean += 1
                if clean >= SCALE_GROWTH_INTERVAL:
                    scale, clean = scale * 2, 0
        train_before.append(step)
        final = float(loss.detach())
    hook.close()
    labels = dict(monitor.labels)
    onset = min(labels.values()) if labels else None
    return LmResult(labels=labels, onset=onset, train_before=train_before, final_loss=final)


#: ``name -> (kind, family, spec)``: the healthy recipe, hard negatives, and each injected failure.
def _cases() -> dict[str, tuple[str, str, LmSpec]]:
    out: dict[str, tuple[str, str, LmSpec]] = {}
    for family, base in (("lm", LmSpec()), ("moe", LmSpec(moe=True))):
        cases = {
            "healthy": ("healthy", base),
            "healthy_noisy_batches": ("healthy", replace(base, batch_noise=0.1)),
            "healthy_fp16": ("healthy", replace(base, fp16=True)),
            "healthy_no_clip": ("healthy", replace(base, clip=None)),
            "bad_batch": ("broken", replace(base, bad_batch=True)),
            "lr_blowup": ("broken", replace(base, lr_blowup=100.0, clip=None)),
            "grad_norm_spike": ("broken", replace(base, loss_weight_spike=1000.0, clip=None)),
            "nan_in_module": ("broken", replace(base, nan_module=True)),
            "fp16_scale_collapse": ("broken", replace(base, fp16=True, overflow_always=True)),
            "lr_restart_after_resume": ("broken", replace(base, lr_restart=True)),
            "attention_collapse": ("broken", replace(base, attn_temperature=200.0)),
            # issue 30's remaining failures: logits growing without bound, data replayed after a resume
            "attention_logit_growth": ("broken", replace(base, attn_logit_growth=1.1)),
            "healthy_multi_epoch": ("healthy", replace(base, dataset_batches=60)),
            "healthy_multi_epoch_unshuffled": ("healthy", replace(base, dataset_batches=60, shuffle=False)),
            "healthy_clean_resume": ("healthy", replace(base, dataset_batches=60, clean_resume=True)),
            "data_replay_after_resume": ("broken", replace(base, dataset_batches=60, resume_replays=True)),
            "data_replay_no_epoch": (
                "broken",
                replace(base, dataset_batches=60, resume_replays=True, record_epoch=False),
            ),
        }
        if base.moe:
            cases["healthy_no_aux_loss"] = ("healthy", replace(base, aux_loss=0.0))
            cases["dead_expert"] = ("broken", replace(base, dead_expert=True))
        for name, (kind, spec) in cases.items():
            out[f"{family}/{name}"] = (kind, family, spec)
    return out


LM_CASES = _cases()
