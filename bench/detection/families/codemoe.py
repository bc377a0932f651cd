"""A held-out language-model family (issue 29): a byte-level mixture-of-experts transformer trained on the
Python source code that ships with Python, its cases chosen from MoE and LM practice, not from the rules.

Data: a fixed, sorted list of standard-library modules' source files (:data:`MODULES`, read from
``sysconfig.get_paths()["stdlib"]``; about 770 KB on Python 3.11), bytes as tokens (vocabulary 256). Every
sixth file (positions 3, 9, ...) is the validation split, the rest the training split; the corpus's sha256
and the Python version go into each run's record, since the files change with Python's patch version.
Training reads non-overlapping windows of ``SEQ + 1`` bytes of the training split in epochs, shuffled per
epoch with a seed per epoch (``DistributedSampler.set_epoch``'s scheme); the loader's state is (epoch,
position). Validation: ``VAL_WINDOWS`` fixed windows evenly spaced over the validation split, the mean
next-byte cross-entropy (nats) of the final weights.

Model (unlike :mod:`families.lm`'s): RMSNorm (written here), learned positions, causal multi-head attention,
and in both of its ``LAYERS`` blocks a mixture-of-experts MLP: top-2 routing over ``EXPERTS`` experts with a
capacity factor (GShard's dispatch: first choices ahead of second choices, tokens over an expert's capacity
dropped, passed on by the residual only), the Switch Transformer load-balancing loss (``E * sum f_e P_e``,
weight 0.01) and the ST-MoE router z-loss (weight 0.001). Recipe: AdamW (weight decay 0.1 on matrices),
linear warmup for ``WARMUP`` steps then linear decay to 10% of ``PEAK_LR`` at ``STEPS``
(``torch.optim.lr_scheduler.LambdaLR``), gradients clipped at 1.0, batch 16, ``STEPS`` steps.

Saved every step by the PyTorch hook (what a user following docs/GUIDE.md saves): the loss (``losses``),
the gradients as their L2 norms and largest magnitudes (``ReductionConfig``: the full tensors of 200k
parameters at every step would be hundreds of MB a run), ``lr/0`` (the model's parameter group) and
``lr/1`` (the routers' group), ``grad_norm/total`` before clipping, ``loss_scale`` and ``skipped_step`` for
the cases with a (simulated) fp16 dynamic loss scaler, each router's expert load
(``save_router_stats(..., top_k=2)``), each attention's entropy and largest logit, and the batch's
fingerprint with its epoch (``record_batch``).

Labels: :class:`families.lm.LmMonitor` (the published criteria), fed this training's own values. Besides,
``harmful``: the final validation loss is non-finite, or above the worst final validation loss of the runs
built healthy with the same seed by more than :data:`HARMFUL_MARGIN` = 0.10 nats (fixed before scoring;
:func:`harmful`).

Why these cases: see :data:`CODEMOE_CASES` (each fault's docstring line cites where it is documented).
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import sysconfig
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from families.lm import LmMonitor

#: The corpus: standard-library source files, sorted, relative to the stdlib directory.
MODULES = tuple(
    sorted(
        (
            "argparse.py",
            "base64.py",
            "bisect.py",
            "calendar.py",
            "configparser.py",
            "contextlib.py",
            "copy.py",
            "csv.py",
            "dataclasses.py",
            "difflib.py",
            "enum.py",
            "fnmatch.py",
            "fractions.py",
            "functools.py",
            "glob.py",
            "heapq.py",
            "json/__init__.py",
            "json/decoder.py",
            "json/encoder.py",
            "json/scanner.py",
            "pprint.py",
            "shlex.py",
            "statistics.py",
            "string.py",
            "textwrap.py",
            "tokenize.py",
        )
    )
)

VOCAB = 256
SEQ = 64
BATCH = 16
DIM = 64
HEADS = 4
LAYERS = 2
EXPERTS = 4
EXPERT_HIDDEN = 128
TOP_K = 2
CAPACITY = 1.25
STEPS = 600
WARMUP = 30
PEAK_LR = 3e-3
FINAL_FRACTION = 0.1
AUX_WEIGHT = 0.01
Z_WEIGHT = 1e-3
VAL_WINDOWS = 64
FP16_MAX = 65504.0
FP16_EXP_MAX = math.log(FP16_MAX)  # exp(x) overflows float16 above this (11.09)
SCALE_GROWTH_INTERVAL = 25  # GradScaler's default is 2000 steps; a 400-step run needs a shorter one
HARMFUL_MARGIN = 0.10  # nats of final validation loss above the worst built-healthy run of the same seed


@dataclass(frozen=True)
class CodeMoeSpec:
    """One case: every field's default is the healthy recipe."""

    batch: int = BATCH
    experts: int = EXPERTS
    capacity: float = CAPACITY
    aux_weight: float = AUX_WEIGHT
    z_weight: float = Z_WEIGHT
    peak_lr: float = PEAK_LR
    router_lr_mult: float = 1.0  # the routers' parameter group's learning rate x this
    fp16: bool = False  # a dynamic loss scaler, fp16's, simulated on the CPU's fp32 values
    naive_fp16_loss: bool = False  # the loss's softmax written as exp/sum in fp16 (no max subtracted)
    slice_batches: int | None = None  # train on only the first this-many batches' worth of windows
    onset: int = 300  # the step a resume or corrupt shard happens
    corrupt_steps: int = 0  # batches of random bytes (a binary shard) for this many steps from ``onset``
    resume: str | None = None  # "clean", "no_scheduler" or "no_loader_state": a resume at ``onset``
    zero_grad: bool = True
    shift_targets: bool = True


@dataclass
class CodeMoeResult:
    labels: dict[str, int]
    onset: int | None
    final_train_loss: float = float("nan")
    final_val_loss: float = float("nan")
    non_finite: bool = False
    skipped_steps: int = 0
    seconds: float = 0.0
    corpus_sha256: str = ""
    python: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def corpus() -> tuple[bytes, bytes, str]:
    """``(training bytes, validation bytes, sha256 of the whole corpus)``; files joined by a blank line."""
    root = sysconfig.get_paths()["stdlib"]
    train, val, digest = [], [], hashlib.sha256()
    for i, name in enumerate(MODULES):
        with open(os.path.join(root, name), "rb") as f:
            text = f.read()
        digest.update(name.encode() + b"\0" + text)
        (val if i % 6 == 3 else train).append(text)
    return b"\n\n".join(train), b"\n\n".join(val), digest.hexdigest()


def windows(data: bytes) -> np.ndarray:
    """Non-overlapping windows of ``SEQ + 1`` bytes, as int64."""
    arr = np.frombuffer(data, dtype=np.uint8)
    n = len(arr) // (SEQ + 1)
    return arr[: n * (SEQ + 1)].reshape(n, SEQ + 1).astype(np.int64)


def val_windows(data: bytes) -> np.ndarray:
    """``VAL_WINDOWS`` windows evenly spaced over the validation bytes."""
    arr = np.frombuffer(data, dtype=np.uint8).astype(np.int64)
    starts = np.linspace(0, len(arr) - SEQ - 2, VAL_WINDOWS).astype(np.int64)
    return np.stack([arr[s : s + SEQ + 1] for s in starts])


def unigram_entropy(data: bytes) -> float:
    """Entropy of the byte distribution in nats (the loss of a model that ignores context)."""
    counts = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256).astype(np.float64)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


class Loader:
    """Windows read in epochs, shuffled per epoch (seeded by ``(seed, epoch)``); state (epoch, position)."""

    def __init__(self, samples: np.ndarray, seed: int, batch: int) -> None:
        self.samples, self.seed, self.batch = samples, seed, batch
        self.batches = len(samples) // batch
        self.epoch = self.position = 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = state["epoch"], state["position"]

    def next(self) -> tuple[np.ndarray, np.ndarray, int]:
        """``(windows, sample ids, epoch)`` of the next batch."""
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.samples))
        ids = order[self.position * self.batch : (self.position + 1) * self.batch]
        epoch = self.epoch
        self.position += 1
        if self.position == self.batches:
            self.epoch, self.position = self.epoch + 1, 0
        return self.samples[ids], ids, epoch


def lr_factor(step: int) -> float:
    """The configured schedule as a fraction of the peak: linear warmup, then linear decay to 10%."""
    if step < WARMUP:
        return (step + 1) / WARMUP
    t = min(1.0, (step - WARMUP) / max(1, STEPS - WARMUP))
    return 1.0 - (1.0 - FINAL_FRACTION) * t


def _model_class() -> Any:
    import torch
    from torch import nn

    class RMSNorm(nn.Module):
        """Root-mean-square normalisation with a learned gain (Zhang and Sennrich 2019)."""

        def __init__(self, dim: int, eps: float = 1e-6) -> None:
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(DIM, 3 * DIM, bias=False)
            self.proj = nn.Linear(DIM, DIM, bias=False)
            self.last_weights: torch.Tensor | None = None
            self.last_logits: torch.Tensor | None = None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
            logits = (q @ k.transpose(-1, -2)) / math.sqrt(DIM // HEADS)
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
            masked = logits.masked_fill(mask, float("-inf"))
            w = masked.softmax(-1)
            self.last_weights, self.last_logits = w.detach(), masked.detach()
            return self.proj((w @ v).transpose(1, 2).reshape(b, t, DIM))

    class Expert(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(DIM, EXPERT_HIDDEN)
            self.out = nn.Linear(EXPERT_HIDDEN, DIM)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(torch.nn.functional.gelu(self.fc(x)))

    class MoE(nn.Module):
        """Top-2 routing with a capacity (GShard): an expert takes at most
        ``ceil(capacity * tokens * 2 / experts)`` tokens, first choices before second choices; the rest of
        its tokens are dropped (their residual passes on). ``aux``: Switch's load-balancing loss on the
        first choices; ``z``: ST-MoE's router z-loss."""

        def __init__(self, experts: int, capacity: float) -> None:
            super().__init__()
            self.capacity = capacity
            self.router = nn.Linear(DIM, experts, bias=False)
            self.experts = nn.ModuleList(Expert() for _ in range(experts))
            self.last_probs: torch.Tensor | None = None
            self.aux = torch.zeros(())
            self.z = torch.zeros(())
            self.dropped = 0.0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            shape = x.shape
            x = x.reshape(-1, shape[-1])
            n, e = x.shape[0], len(self.experts)
            logits = self.router(x)
            probs = logits.softmax(-1)
            self.last_probs = probs.detach()
            top_p, top_i = probs.topk(TOP_K, dim=-1)
            gates = top_p / top_p.sum(-1, keepdim=True)
            cap = math.ceil(self.capacity * n * TOP_K / e)
            onehot = torch.nn.functional.one_hot(top_i, e).transpose(0, 1).reshape(TOP_K * n, e)
            position = onehot.cumsum(0) - 1
            keep = (onehot * (position < cap)).reshape(TOP_K, n, e).transpose(0, 1)  # (n, k, e)
            self.dropped = 1.0 - float(keep.sum()) / (TOP_K * n)
            out = torch.zeros_like(x)
            for j, expert in enumerate(self.experts):
                gate = (keep[:, :, j] * gates).sum(-1)
                idx = gate.nonzero().squeeze(-1)
                if idx.numel():
                    out = out.index_add(0, idx, expert(x[idx]) * gate[idx, None])
            first = torch.bincount(top_i[:, 0], minlength=e).float() / n
            self.aux = e * (first * probs.mean(0)).sum()
            self.z = torch.logsumexp(logits, -1).pow(2).mean()
            return out.reshape(shape)

    class Block(nn.Module):
        def __init__(self, experts: int, capacity: float) -> None:
            super().__init__()
            self.norm1 = RMSNorm(DIM)
            self.attn = Attention()
            self.norm2 = RMSNorm(DIM)
            self.moe = MoE(experts, capacity)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.norm1(x))
            return x + self.moe(self.norm2(x))

    class CodeMoeLM(nn.Module):
        def __init__(self, experts: int = EXPERTS, capacity: float = CAPACITY) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, DIM)
            self.pos = nn.Parameter(torch.randn(SEQ, DIM) * 0.02)
            self.blocks = nn.ModuleList(Block(experts, capacity) for _ in range(LAYERS))
            self.norm = RMSNorm(DIM)
            self.head = nn.Linear(DIM, VOCAB, bias=False)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            x = self.embed(tokens) + self.pos[: tokens.shape[1]]
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))

    return CodeMoeLM


def validation_loss(model: Any, spec: CodeMoeSpec, val: np.ndarray) -> float:
    """Mean next-byte cross-entropy of ``model``'s weights on ``val`` (a copy without the hook's hooks)."""
    import torch

    copy = _model_class()(spec.experts, spec.capacity)
    copy.load_state_dict(model.state_dict())
    copy.eval()
    data = torch.as_tensor(val)
    with torch.no_grad():
        logits = copy(data[:, :-1])
        return float(torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), data[:, 1:].reshape(-1)))


def harmful(final_val: float, worst_healthy_val: float) -> bool:
    """The fixed harm criterion: non-finite, or above the same seed's worst built-healthy run + margin."""
    return not math.isfinite(final_val) or final_val > worst_healthy_val + HARMFUL_MARGIN


def run(spec: CodeMoeSpec, seed: int, out_dir: str, steps: int | None = None) -> CodeMoeResult:
    """Train one case for ``STEPS`` steps (or ``steps``) into ``out_dir``; labels from :class:`LmMonitor`."""
    import torch

    import tornasole.pytorch as ts
    from tornasole.core.llm_signals import GRAD_NORM_TOTAL, LOSS_SCALE, SKIPPED_STEP
    from tornasole.pytorch.llm_stats import attention_logit_max, expert_load

    start = time.perf_counter()
    steps = STEPS if steps is None else steps
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    train_bytes, val_bytes, sha = corpus()
    samples = windows(train_bytes)
    if spec.slice_batches:
        samples = samples[: spec.slice_batches * spec.batch]
    val = val_windows(val_bytes)
    shard_rng = np.random.default_rng([seed, 77])
    model = _model_class()(spec.experts, spec.capacity)
    routers = [p for n, p in model.named_parameters() if ".router." in n]
    decay = [p for n, p in model.named_parameters() if ".router." not in n and p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if ".router." not in n and p.ndim < 2]

    def optimizer() -> torch.optim.Optimizer:
        return torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": 0.1},
                {"params": routers, "weight_decay": 0.0, "lr": spec.peak_lr * spec.router_lr_mult},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=spec.peak_lr,
            betas=(0.9, 0.95),
        )

    opt = optimizer()
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    hook = ts.Hook(
        out_dir,
        save_config=ts.SaveConfig(save_interval=1),
        include_collections=["gradients", "losses"],
        stop_check_interval=None,
    )
    hook.get_collection("gradients").reduction_config = ts.ReductionConfig(
        norms=["l2"], abs_reductions=["max"]
    )
    hook.register_module(model)
    monitor = LmMonitor()
    loader = Loader(samples, seed, spec.batch)
    scale = 2.0**16 if spec.fp16 else None
    clean = skipped = 0
    non_finite = False
    final = float("nan")
    for step in range(steps):
        if spec.resume and step == spec.onset:
            # the job is restarted from a checkpoint taken now: a new optimizer, scheduler and loader
            state = {"opt": opt.state_dict(), "sched": sched.state_dict(), "loader": loader.state_dict()}
            opt = optimizer()
            opt.load_state_dict(state["opt"])
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
            loader = Loader(samples, seed, spec.batch)
            if spec.resume != "no_scheduler":
                sched.load_state_dict(state["sched"])
                for g, lr in zip(opt.param_groups, sched.get_last_lr()):
                    g["lr"] = lr
            if spec.resume != "no_loader_state":
                loader.load_state_dict(state["loader"])
            else:
                loader.epoch = state["loader"]["epoch"]  # the epoch counter is restored, its position not
        seqs, ids, epoch = loader.next()
        if spec.onset <= step < spec.onset + spec.corrupt_steps:
            seqs = shard_rng.integers(0, VOCAB, size=seqs.shape)  # a shard of binary bytes
        data = torch.as_tensor(seqs)
        if spec.zero_grad:
            opt.zero_grad()
        inputs = data[:, :-1]
        logits = model(inputs)
        ts.record_batch(hook, data, epoch=epoch)  # after the forward pass: the hook's step is this step
        targets = data[:, 1:] if spec.shift_targets else inputs
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        moes = [b.moe for b in model.blocks]
        objective = loss + spec.aux_weight * sum(m.aux for m in moes) + spec.z_weight * sum(m.z for m in moes)
        hook.record_tensor_value("loss", loss)
        forward_overflow = spec.naive_fp16_loss and float(logits.detach().max()) > FP16_EXP_MAX
        outputs_finite = bool(torch.isfinite(logits).all()) and math.isfinite(float(loss.detach()))
        non_finite = non_finite or not outputs_finite
        objective.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
        overflow = False
        if scale is not None:
            overflow = (
                forward_overflow
                or not math.isfinite(norm)
                or any(float(g.abs().max()) * scale > FP16_MAX for g in grads)
            )
        lrs = [g["lr"] for g in opt.param_groups]
        hook.save_scalar("lr/0", lrs[0])
        hook.save_scalar("lr/1", lrs[1])
        hook.save_scalar(GRAD_NORM_TOTAL, norm)
        if scale is not None:
            hook.save_scalar(LOSS_SCALE, scale)
            hook.save_scalar(SKIPPED_STEP, float(overflow))
        loads = []
        for i, m in enumerate(moes):
            ts.save_router_stats(hook, f"blocks.{i}.moe", m.last_probs, top_k=TOP_K)
            loads.append(expert_load(m.last_probs, top_k=TOP_K))
        nats, logit_maxima = [], []
        for i, blk in enumerate(model.blocks):
            w = blk.attn.last_weights
            ts.save_attention_entropy(hook, f"blocks.{i}.attn", w)
            ts.save_attention_logit_max(hook, f"blocks.{i}.attn", blk.attn.last_logits)
            logit_maxima.append(attention_logit_max(blk.attn.last_logits) or 0.0)
            p = w.clamp_min(1e-30)
            nats.append(float(-(w * p.log()).sum(-1)[..., 1:].mean()))
        monitor.step(
            step,
            float(loss.detach()),
            norm,
            outputs_finite,
            lrs[0],
            spec.peak_lr * lr_factor(step),
            scale,
            overflow,
            loads,
            nats,
            logit_maxima,
            (epoch, ids),
        )
        if overflow:
            scale, clean = max(scale / 2, 1.0), 0
            skipped += 1
        else:
            if math.isfinite(norm):
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            if scale is not None:
                clean += 1
                if clean >= SCALE_GROWTH_INTERVAL:
                    scale, clean = scale * 2, 0
        sched.step()
        final = float(loss.detach())
    hook.close()
    val_loss = validation_loss(model, spec, val)
    labels = dict(monitor.labels)
    return CodeMoeResult(
        labels=labels,
        onset=min(labels.values()) if labels else None,
        final_train_loss=final,
        final_val_loss=val_loss,
        non_finite=non_finite or not math.isfinite(val_loss),
        skipped_steps=skipped,
        seconds=time.perf_counter() - start,
        corpus_sha256=sha,
        python=sys.version.split()[0],
        extra={"dropped_last": [m.dropped for m in moes]},
    )


def _cases() -> dict[str, tuple[str, CodeMoeSpec, str]]:
    """``name -> (kind, spec, why)``."""
    base = CodeMoeSpec()
    return {
        # healthy recipe and hard negatives: noisy, slow or unusual, but correct
        "healthy": ("healthy", base, "the recipe"),
        "healthy_no_z_loss": (
            "healthy",
            replace(base, z_weight=0.0),
            "ST-MoE (Zoph et al. 2022): the z-loss is a stabiliser; small models train without it",
        ),
        "healthy_small_batch": (
            "healthy",
            replace(base, batch=8),
            "half the batch: noisier gradients and losses, same steps",
        ),
        "healthy_capacity_2": (
            "healthy",
            replace(base, capacity=2.0),
            "GShard/Switch's evaluation capacity factor 2.0: fewer tokens dropped",
        ),
        "healthy_eight_experts": (
            "healthy",
            replace(base, experts=8),
            "more experts than the tokens need: some get few tokens early, the balancing loss spreads them",
        ),
        "healthy_fp16_scaler": (
            "healthy",
            replace(base, fp16=True),
            "GradScaler's dynamic scale (simulated): overflowing steps skipped, the scale halves and grows",
        ),
        "healthy_clean_resume": (
            "healthy",
            replace(base, resume="clean"),
            "a resume restoring optimizer, scheduler and loader position (PyTorch's checkpoint recipe)",
        ),
        "healthy_small_slice_epochs": (
            "healthy",
            replace(base, slice_batches=100),
            "4 epochs over a 100-batch slice, reshuffled every epoch",
        ),
        # faults
        "router_collapse": (
            "broken",
            replace(base, aux_weight=0.0, router_lr_mult=30.0),
            "no load-balancing loss and a high router learning rate: experts starve (Shazeer et al. 2017 "
            "sec. 4; Fedus et al. 2021 Switch Transformer sec. 2.2; Zoph et al. 2022 ST-MoE)",
        ),
        "lr_far_too_high": (
            "broken",
            replace(base, peak_lr=0.3),
            "learning rate 100x the recipe's (DeepFD's and AUTOTRAINER's 'learning rate too large')",
        ),
        "corrupted_shard": (
            "broken",
            replace(base, corrupt_steps=20),
            "20 batches from a shard of binary bytes (PaLM, Chowdhery et al. 2022 sec. 5.1: loss spikes "
            "from bad batches; OLMo's data-quality filtering)",
        ),
        "resume_forgets_scheduler": (
            "broken",
            replace(base, resume="no_scheduler"),
            "resumed without the scheduler's state: warmup restarts (PyTorch 'Saving and loading a general "
            "checkpoint' recipe saves it; HF transformers Trainer saves scheduler.pt for this)",
        ),
        "resume_replays_data": (
            "broken",
            replace(base, resume="no_loader_state"),
            "resumed without the loader's position: the epoch's batches are read again (torchdata's "
            "StatefulDataLoader exists for this; DistributedSampler docs)",
        ),
        "zero_grad_forgotten": (
            "broken",
            replace(base, zero_grad=False),
            "optimizer.zero_grad() never called: gradients accumulate (PyTorch recipe 'Zeroing out "
            "gradients in PyTorch'; Humbatova et al. 2020 taxonomy, training/optimiser faults)",
        ),
        "targets_not_shifted": (
            "broken",
            replace(base, shift_targets=False),
            "the loss compares logits with the inputs, not the next tokens (HF transformers docs: 'labels "
            "are shifted inside the model'; nanoGPT's y = x[1:])",
        ),
        "fp16_naive_softmax_loss": (
            "broken",
            replace(base, fp16=True, naive_fp16_loss=True),
            "the loss's softmax as exp/sum in fp16: a logit above 11.09 overflows every step, the scaler "
            "skips and halves to its floor (Micikevicius et al. 2018 sec. 3: softmax in fp32; PyTorch "
            "autocast runs softmax/cross_entropy in fp32; DeepSpeed issue 697)",
        ),
        "router_collapse_no_aux_no_z": (
            "broken",
            replace(base, aux_weight=0.0, z_weight=0.0, router_lr_mult=100.0),
            "router collapse without either auxiliary loss, router lr 100x (ST-MoE sec. 3: router logits "
            "grow, instability; Switch Transformer sec. 2.2)",
        ),
    }


CODEMOE_CASES = _cases()
