"""A held-out language-model family (issue 29): a character-level causal transformer trained on real English
prose that ships with Python, built from ML practice without reading the rules, frozen before it was scored.

Corpus: the help texts of ``pydoc_data.topics.topics`` (the values in sorted key order, about 465k characters
and 103 symbols); nothing is downloaded. Its sha256 and the Python version are recorded with every run (the
corpus may change with Python's patch version). The first 90% is the training split, read in epochs as
windows of ``CTX + 1`` characters (stride ``CTX``), shuffled per epoch with a seed per epoch
(``DistributedSampler.set_epoch``'s scheme); the loader's state is ``(epoch, position)``. The last 10% is the
validation split: ``VAL_WINDOWS`` fixed windows, each scored at its last position (the next character after a
full context: the prediction generation makes, and one no bug that leaks the future can see), after training,
by a fresh copy of the model without the hook.

Model (not ``lm.py``'s): a pre-LayerNorm GPT, ``LAYERS`` blocks of ``HEADS``-head causal self-attention and a
GELU MLP, learned positions, input and output embeddings tied, dropout. Recipe: AdamW (betas 0.9/0.95, weight
decay 0.1 on matrices only), linear warmup then cosine decay to 0.1x, gradients clipped at 1.0.

The PyTorch hook saves at every step: the loss (``losses``), the gradients' L2 norms (``gradients`` with a
``ReductionConfig``: the full tensors of every step would be hundreds of MB a run), ``lr/0`` and ``lr/1`` (the
two parameter groups), ``grad_norm/total`` (before clipping), each attention's normalised entropy and largest
logit, and the batch's fingerprint with the epoch.

Labels: :class:`families.lm.LmMonitor` (the published criteria) fed this training's own values at every
optimizer step; and ``harmful``, computed by the scorer: the final validation loss is above the worst
built-healthy run of the same seed by more than ``HARM_MARGIN`` nats (fixed before scoring), or non-finite.

Healthy cases (hard negatives: noisy, slow or unusual but correct): the recipe; a batch of 8 (noisier); the
batch accumulated over 2 micro-batches (the hook counts each forward pass as a step, so twice the steps); bf16
autocast on the CPU; dropout 0.3; a warmup of 150 steps; SGDR warm restarts the user configured (the labels
compare against that schedule); a resume that restores model, optimiser, scheduler and loader; several epochs
over half of the training split (3 epochs).

Broken cases (each bug's documentation in :data:`FAULTS`): too high a learning rate without warmup; a
compressed shard read as text, and a shard of one repeated character, for ``SHARD_STEPS`` steps; resumes that
forget the scheduler, the loader position or the optimiser; ``zero_grad`` forgotten; targets not shifted;
the causal mask missing; the scheduler stepped per micro-batch under gradient accumulation; the attention
softmax taken over the wrong axis.
"""

from __future__ import annotations

import copy
import hashlib
import math
import sys
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from families.lm import LmMonitor

CTX = 64
DIM = 64
HEADS = 4
LAYERS = 3
BATCH = 16
STEPS = 600
WARMUP = 30
PEAK_LR = 3e-3
MIN_RATIO = 0.1
DROPOUT = 0.1
VAL_WINDOWS = 1024
ONSET = 360  # where a mid-run fault (a bad shard, a resume) starts: after warmup, before the end of epoch 0
SHARD_STEPS = 20
HARM_MARGIN = 0.10  # nats above the worst built-healthy run of the same seed (fixed before scoring)


@dataclass(frozen=True)
class TextSpec:
    """One case (every field's default is the healthy recipe)."""

    batch: int = BATCH
    accum: int = 1  # micro-batches per optimizer step (each of ``batch // accum`` samples)
    bf16: bool = False  # torch.autocast("cpu", dtype=torch.bfloat16)
    dropout: float = DROPOUT
    warmup: int = WARMUP
    peak_lr: float = PEAK_LR
    restarts: int = 0  # SGDR: the cosine restarts this many times (configured by the user)
    data_fraction: float = 1.0  # train on the first share of the training windows (more epochs)
    resume: bool = False  # the job restarts from a checkpoint at ``ONSET``
    restore_optimizer: bool = True
    restore_scheduler: bool = True
    restore_loader: bool = True
    shard: str | None = None  # "binary" or "repeated": a corrupted shard for SHARD_STEPS steps from ONSET
    zero_grad: bool = True
    shift_targets: bool = True
    causal: bool = True
    softmax_dim: int = -1
    sched_per_micro: bool = False  # the scheduler stepped after every micro-batch


#: ``name -> (kind, spec, why)``: the healthy recipe, hard negatives, and faults with their documentation.
def _cases() -> dict[str, tuple[str, TextSpec, str]]:
    r = TextSpec()
    resume = replace(r, resume=True)
    return {
        "healthy": ("healthy", r, "the recipe"),
        "healthy_small_batch": ("healthy", replace(r, batch=8), "a batch of 8: noisier gradients"),
        "healthy_grad_accum": ("healthy", replace(r, accum=2), "2 micro-batches of 8 per optimizer step"),
        "healthy_bf16": ("healthy", replace(r, bf16=True), "bf16 autocast on the CPU"),
        "healthy_high_dropout": ("healthy", replace(r, dropout=0.3), "dropout 0.3: slower, noisier loss"),
        "healthy_long_warmup": ("healthy", replace(r, warmup=150), "a warmup of 150 steps"),
        "healthy_sgdr": ("healthy", replace(r, restarts=2), "SGDR warm restarts (Loshchilov & Hutter 2017)"),
        "healthy_clean_resume": ("healthy", resume, "a resume that restores every state"),
        "healthy_small_slice": ("healthy", replace(r, data_fraction=0.5), "3 epochs over half the data"),
        "lr_too_high_no_warmup": (
            "broken",
            replace(r, peak_lr=100 * PEAK_LR, warmup=0),
            "Liu et al. 2020 (RAdam) and Xiong et al. 2020: Adam transformers diverge without warmup; "
            "Wortsman et al. 2023 (small-scale proxies): instability at high learning rates",
        ),
        "corrupted_shard_binary": (
            "broken",
            replace(r, shard="binary"),
            "a compressed shard read as text; PaLM (Chowdhery et al. 2022, sec. 5.1): loss spikes caused "
            "by particular data batches",
        ),
        "corrupted_shard_repeated": (
            "broken",
            replace(r, shard="repeated"),
            "a shard of one repeated character; OLMo 2 (Team OLMo 2024): spikes from repeated n-grams in "
            "the data, filtered out",
        ),
        "resume_forgets_scheduler": (
            "broken",
            replace(resume, restore_scheduler=False),
            "PyTorch tutorial 'Saving and loading a general checkpoint': a resume must restore every "
            "state_dict; the LR scheduler's is lost and warmup starts over",
        ),
        "resume_forgets_loader": (
            "broken",
            replace(resume, restore_loader=False),
            "torchdata's StatefulDataLoader docs (a DataLoader has no state: a resume replays the epoch); "
            "Accelerate's skip_first_batches",
        ),
        "resume_forgets_optimizer": (
            "broken",
            replace(resume, restore_optimizer=False),
            "PyTorch tutorial 'Saving and loading a general checkpoint': the optimizer's state_dict holds "
            "buffers (Adam's moments) that a resume must restore",
        ),
        "zero_grad_forgotten": (
            "broken",
            replace(r, zero_grad=False),
            "PyTorch recipe 'Zeroing out gradients in PyTorch': gradients accumulate across backward passes",
        ),
        "targets_not_shifted": (
            "broken",
            replace(r, shift_targets=False),
            "Hugging Face GPT2LMHeadModel docs ('labels are shifted inside the model'): a custom loop that "
            "does not shift them trains the model to copy its input",
        ),
        "causal_mask_missing": (
            "broken",
            replace(r, causal=False),
            "Vaswani et al. 2017 sec. 3.2.3 (mask to keep the model auto-regressive); PyTorch "
            "nn.TransformerEncoder docs: is_causal is only a hint, the mask must be passed",
        ),
        "scheduler_per_microbatch": (
            "broken",
            replace(r, accum=2, sched_per_micro=True),
            "Hugging Face Accelerate docs on gradient accumulation: the scheduler must step once per "
            "optimizer step, not per micro-batch (the schedule runs twice as fast)",
        ),
        "softmax_wrong_axis": (
            "broken",
            replace(r, softmax_dim=-2),
            "Islam et al. 2019 (a comprehensive study on deep learning bug characteristics) and Humbatova et "
            "al. 2020 (taxonomy of real faults): wrong axis/shape of a tensor operation",
        ),
    }


CASES = _cases()
FAULTS = {name: why for name, (kind, _, why) in CASES.items() if kind == "broken"}


@dataclass
class TextResult:
    labels: dict[str, int]
    onset: int | None
    final_train_loss: float = float("nan")
    val_loss: float = float("nan")
    non_finite: bool = False
    seconds: float = 0.0
    record: dict[str, Any] = field(default_factory=dict)


# -- data -------------------------------------------------------------------------------------------------
_CORPUS: tuple[str, list[str], np.ndarray] | None = None


def corpus() -> tuple[str, list[str], np.ndarray]:
    """``(text, symbols, token ids)`` of the pydoc topics in sorted key order."""
    global _CORPUS
    if _CORPUS is None:
        from pydoc_data.topics import topics

        text = "".join(topics[k] for k in sorted(topics))
        symbols = sorted(set(text))
        index = {c: i for i, c in enumerate(symbols)}
        _CORPUS = (text, symbols, np.array([index[c] for c in text], dtype=np.int64))
    return _CORPUS


def corpus_info() -> dict[str, Any]:
    text, symbols, _ = corpus()
    return {
        "corpus_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "corpus_chars": len(text),
        "vocab": len(symbols),
        "python": sys.version.split()[0],
    }


def splits() -> tuple[np.ndarray, np.ndarray]:
    _, _, ids = corpus()
    cut = int(0.9 * len(ids))
    return ids[:cut], ids[cut:]


def unigram_entropy() -> float:
    """The training split's unigram entropy in nats (a model that learns nothing of context ends here)."""
    train, _ = splits()
    p = np.bincount(train).astype(float)
    p = p[p > 0] / p.sum()
    return float(-(p * np.log(p)).sum())


def val_windows(ctx: int = CTX, count: int = VAL_WINDOWS) -> np.ndarray:
    """``count`` fixed windows of ``ctx + 1`` characters, evenly spaced over the validation split."""
    _, val = splits()
    starts = np.linspace(0, len(val) - ctx - 1, count).astype(np.int64)
    return np.stack([val[s : s + ctx + 1] for s in starts])


class Loader:
    """The training windows read in epochs, shuffled per epoch; the state a resume restores is
    ``(epoch, position)``."""

    def __init__(self, seed: int, batch: int, fraction: float = 1.0, ctx: int = CTX) -> None:
        train, _ = splits()
        n = (len(train) - 1) // ctx
        n = max(batch, int(n * fraction))
        self.windows = np.stack([train[i * ctx : i * ctx + ctx + 1] for i in range(n)])
        self.seed, self.batch = seed, batch
        self.batches = n // batch  # the last partial batch is dropped (drop_last=True)
        self.epoch = self.position = 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = state["epoch"], state["position"]

    def next(self) -> tuple[np.ndarray, np.ndarray, int]:
        """``(windows, sample ids, epoch)`` of the next batch."""
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.windows))
        ids = order[self.position * self.batch : (self.position + 1) * self.batch]
        epoch = self.epoch
        self.position += 1
        if self.position == self.batches:
            self.epoch, self.position = self.epoch + 1, 0
        return self.windows[ids], ids, epoch


def corrupted_batch(kind: str, step: int, batch: int) -> np.ndarray:
    """A batch of a corrupted shard: the zlib-compressed corpus read as text (each byte mapped into the
    vocabulary, as a byte-level reader would), or one character repeated (a shard of blank padding)."""
    text, symbols, _ = corpus()
    if kind == "repeated":
        return np.full((batch, CTX + 1), symbols.index(" "), dtype=np.int64)
    blob = np.frombuffer(zlib.compress(text.encode("utf-8"), 9), dtype=np.uint8).astype(np.int64)
    out = np.empty((batch, CTX + 1), dtype=np.int64)
    for b in range(batch):
        s = ((step * batch + b) * CTX) % (len(blob) - CTX - 1)
        out[b] = blob[s : s + CTX + 1] % len(symbols)
    return out


# -- schedule and model -------------------------------------------------------------------------------------
def schedule(spec: TextSpec, step: int) -> float:
    """The configured learning rate: linear warmup to ``peak_lr``, then cosine to ``MIN_RATIO`` of it (with
    ``restarts``, the cosine restarts that many times: SGDR)."""
    if step < spec.warmup:
        return spec.peak_lr * (step + 1) / spec.warmup
    span = max(1, STEPS - spec.warmup)
    period = span / (spec.restarts + 1)
    t = ((step - spec.warmup) % period) / period
    return spec.peak_lr * (MIN_RATIO + (1 - MIN_RATIO) * 0.5 * (1 + math.cos(math.pi * t)))


def _model_class() -> Any:
    import torch
    from torch import nn
    from torch.nn import functional as F

    class SelfAttention(nn.Module):
        def __init__(self, dropout: float, causal: bool, softmax_dim: int) -> None:
            super().__init__()
            self.qkv = nn.Linear(DIM, 3 * DIM)
            self.proj = nn.Linear(DIM, DIM)
            self.attn_drop = nn.Dropout(dropout)
            self.resid_drop = nn.Dropout(dropout)
            self.causal, self.softmax_dim = causal, softmax_dim
            self.last_weights: torch.Tensor | None = None
            self.last_logits: torch.Tensor | None = None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
            logits = (q @ k.transpose(-1, -2)) / math.sqrt(DIM // HEADS)
            if self.causal:
                mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)
                logits = logits.masked_fill(mask, float("-inf"))
            w = logits.float().softmax(self.softmax_dim).to(v.dtype)
            self.last_weights = w.detach().float()
            self.last_logits = logits.detach().float()
            y = (self.attn_drop(w) @ v).transpose(1, 2).reshape(b, t, DIM)
            return self.resid_drop(self.proj(y))

    class Block(nn.Module):
        def __init__(self, dropout: float, causal: bool, softmax_dim: int) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(DIM)
            self.attn = SelfAttention(dropout, causal, softmax_dim)
            self.ln2 = nn.LayerNorm(DIM)
            self.fc = nn.Linear(DIM, 4 * DIM)
            self.out = nn.Linear(4 * DIM, DIM)
            self.drop = nn.Dropout(dropout)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln1(x))
            return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))

    class CharGPT(nn.Module):
        def __init__(self, vocab: int, dropout: float = DROPOUT, causal: bool = True, softmax_dim: int = -1):
            super().__init__()
            self.tok = nn.Embedding(vocab, DIM)
            self.pos = nn.Embedding(CTX, DIM)
            self.drop = nn.Dropout(dropout)
            self.blocks = nn.ModuleList(Block(dropout, causal, softmax_dim) for _ in range(LAYERS))
            self.ln_f = nn.LayerNorm(DIM)
            self.head = nn.Linear(DIM, vocab, bias=False)
            self.head.weight = self.tok.weight  # tied input/output embeddings (Press & Wolf 2017)
            self.apply(self._init)
            for name, p in self.named_parameters():
                if name.endswith(("out.weight", "proj.weight")):  # GPT-2's residual scaling
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * LAYERS))

        @staticmethod
        def _init(m: nn.Module) -> None:
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.drop(self.tok(tokens) + self.pos(pos))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return CharGPT


def _optimizer(model: Any, lr: float) -> Any:
    """AdamW, weight decay 0.1 on the matrices (and embeddings) only, none on biases and LayerNorms."""
    import torch

    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def _scheduler(spec: TextSpec, opt: Any) -> Any:
    import torch

    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: schedule(spec, s) / spec.peak_lr)


def validation_loss(model: Any, spec: TextSpec) -> float:
    """Mean cross-entropy of the next character after a full context over :func:`val_windows`, by a fresh
    copy of ``model`` (no hook), in eval mode."""
    import torch

    _, symbols, _ = corpus()
    fresh = _model_class()(len(symbols), spec.dropout, spec.causal, spec.softmax_dim)
    fresh.load_state_dict(model.state_dict())
    fresh.eval()
    w = torch.as_tensor(val_windows())
    losses = []
    with torch.no_grad():
        for i in range(0, len(w), 256):
            chunk = w[i : i + 256]
            logits = fresh(chunk[:, :CTX])[:, -1]
            losses.append(torch.nn.functional.cross_entropy(logits.float(), chunk[:, CTX], reduction="none"))
    return float(torch.cat(losses).mean())


def mark_harmful(records: list[dict]) -> None:
    """Set each record's ``harmful``: its final validation loss is non-finite, or above the worst
    built-healthy run of the same seed by more than ``HARM_MARGIN`` nats."""
    worst: dict[int, float] = {}
    for r in records:
        if r["kind"] == "healthy" and math.isfinite(r["val_loss"]):
            worst[r["seed"]] = max(worst.get(r["seed"], -math.inf), r["val_loss"])
    for r in records:
        bound = worst.get(r["seed"], math.inf) + HARM_MARGIN
        r["harmful"] = bool(r["non_finite"] or not math.isfinite(r["val_loss"]) or r["val_loss"] > bound)


# -- one run -----------------------------------------------------------------------------------------------
def run(spec: TextSpec, seed: int, out_dir: str, steps: int | None = None) -> TextResult:
    """Train one case for ``STEPS`` optimizer steps (or ``steps``) into ``out_dir``."""
    import time

    import torch

    import tornasole.pytorch as ts
    from tornasole.core.llm_signals import GRAD_NORM_TOTAL
    from tornasole.pytorch.llm_stats import attention_logit_max

    start = time.perf_counter()
    total = STEPS if steps is None else steps
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    _, symbols, _ = corpus()
    vocab = len(symbols)
    model = _model_class()(vocab, spec.dropout, spec.causal, spec.softmax_dim)
    opt = _optimizer(model, spec.peak_lr)
    sched = _scheduler(spec, opt)
    micro = spec.batch // spec.accum
    loader = Loader(seed, micro, spec.data_fraction)
    hook = ts.Hook(
        out_dir,
        save_config=ts.SaveConfig(save_interval=1),
        include_collections=["gradients", "losses"],
        stop_check_interval=None,
    )
    hook.get_collection("gradients").reduction_config = ts.ReductionConfig(norms=["l2"])
    hook.register_module(model)
    monitor = LmMonitor()
    non_finite = False
    train_losses: list[float] = []
    for step in range(total):
        if spec.resume and step == ONSET:
            # the job restarts from the checkpoint written at the end of the previous step
            state = copy.deepcopy(
                {"opt": opt.state_dict(), "sched": sched.state_dict(), "loader": loader.state_dict()}
            )
            model.load_state_dict(copy.deepcopy(model.state_dict()))
            opt = _optimizer(model, spec.peak_lr)
            sched = _scheduler(spec, opt)
            if spec.restore_optimizer:
                opt.load_state_dict(state["opt"])
            if spec.restore_scheduler:
                sched.load_state_dict(state["sched"])
            if not spec.restore_optimizer or not spec.restore_scheduler:
                for g in opt.param_groups:  # the optimizer's lr is the restored scheduler's (or its start)
                    g["lr"] = sched.get_last_lr()[0] if spec.restore_scheduler else schedule(spec, 0)
            loader = Loader(seed, micro, spec.data_fraction)
            if spec.restore_loader:
                loader.load_state_dict(state["loader"])
        model.train()
        if spec.zero_grad:
            opt.zero_grad(set_to_none=True)
        step_losses, step_finite = [], True
        epoch, step_ids = 0, []
        for m in range(spec.accum):
            windows, ids, epoch = loader.next()
            if spec.shard and ONSET <= step < ONSET + SHARD_STEPS:
                windows = corrupted_batch(spec.shard, step * spec.accum + m, micro)
            data = torch.as_tensor(windows)
            step_ids.append((epoch, ids))
            x = data[:, :CTX]
            y = data[:, 1:] if spec.shift_targets else data[:, :CTX]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=spec.bf16):
                logits = model(x)
            ts.record_batch(hook, x, epoch=epoch)  # after the forward pass: the hook's step is this one
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), y.reshape(-1))
            hook.record_tensor_value("loss", loss)
            for i, blk in enumerate(model.blocks):
                ts.save_attention_entropy(hook, f"blocks.{i}.attn", blk.attn.last_weights)
                ts.save_attention_logit_max(hook, f"blocks.{i}.attn", blk.attn.last_logits)
            (loss / spec.accum).backward()
            step_losses.append(float(loss.detach()))
            step_finite = step_finite and bool(torch.isfinite(logits).all())
            if spec.sched_per_micro and m < spec.accum - 1:
                sched.step()
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        lr = opt.param_groups[0]["lr"]  # the rate this optimizer step applies
        hook.save_scalar("lr/0", lr)
        hook.save_scalar("lr/1", opt.param_groups[1]["lr"])
        hook.save_scalar(GRAD_NORM_TOTAL, norm)
        nats, maxima = [], []
        for blk in model.blocks:
            w = blk.attn.last_weights
            p = w.clamp_min(1e-30)
            nats.append(float(-(w * p.log()).sum(-1)[..., 1:].mean()))
            maxima.append(attention_logit_max(blk.attn.last_logits) or 0.0)
        loss_value = sum(step_losses) / len(step_losses)
        non_finite = non_finite or not step_finite or not math.isfinite(loss_value)
        monitor.step(
            step,
            loss_value,
            norm,
            step_finite,
            lr,
            schedule(spec, step),
            None,
            False,
            [],
            nats,
            maxima,
            # the samples of this step's last epoch (micro-batches may straddle an epoch's end)
            (epoch, np.concatenate([ids for e, ids in step_ids if e == epoch])),
        )
        opt.step()
        sched.step()
        train_losses.append(loss_value)
    hook.close()
    val = validation_loss(model, spec)
    labels = dict(monitor.labels)
    tail = train_losses[-10:]
    return TextResult(
        labels=labels,
        onset=min(labels.values()) if labels else None,
        final_train_loss=sum(tail) / len(tail),
        val_loss=val,
        non_finite=non_finite or not math.isfinite(val),
        seconds=time.perf_counter() - start,
        record=corpus_info(),
    )
