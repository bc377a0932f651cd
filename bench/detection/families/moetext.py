"""A held-out mixture-of-experts family (issue 29): a character-level transformer LM whose MLPs are sparse
mixtures of experts, trained on real English prose that ships with Python, built from ML practice without
reading the rules, frozen before it was scored.

Corpus: the help texts of ``pydoc_data.topics.topics`` (the values in sorted key order); nothing is
downloaded. Its sha256 and the Python version are recorded with every run (the corpus may change with
Python's patch version). The first 90% is the training split, read in epochs as windows of ``CTX + 1``
characters (stride ``CTX``), shuffled per epoch with a seed per epoch (``DistributedSampler.set_epoch``'s
scheme); the loader's state is ``(epoch, position)``. The last 10% is the validation split: ``VAL_WINDOWS``
fixed windows, each scored at its last position (the next character after a full context), after training,
by a fresh copy of the model without the hook.

Model: ``LAYERS`` pre-LayerNorm blocks of ``HEADS``-head causal self-attention (learned positions) and, in
every block, a mixture of ``EXPERTS`` GELU experts in place of the MLP. Two architecture variants, separate
cases of the family:

* Switch (Fedus et al. 2021): top-1 routing, the expert output multiplied by the router probability,
  expert capacity ``ceil(capacity_factor * tokens / experts)`` (factor ``CAPACITY``), the tokens over
  capacity dropped (they pass by the residual connection), multiplicative jitter noise on the router input
  during training (eps ``JITTER``), and the Switch load-balancing loss ``experts * sum(f_i * P_i)`` weighted
  ``AUX_WEIGHT``;
* Mixtral (Jiang et al. 2024): top-2 of 8, the two chosen experts' gate weights renormalised to sum to 1, no
  capacity limit; the same balancing loss over the top-2 assignments.

Recipe: AdamW (betas 0.9/0.95), three parameter groups (matrices with weight decay 0.1; biases and
LayerNorms without; the routers without), linear warmup then cosine decay to 0.1x, gradients clipped at 1.0,
batch ``BATCH``, ``STEPS`` steps.

The PyTorch hook saves at every step: the loss (``losses``), the gradients' L2 norms (``gradients`` with a
``ReductionConfig``), ``lr/0``, ``lr/1``, ``lr/2`` (the three groups), ``grad_norm/total`` (before clipping),
each MoE layer's router load (``tornasole.pytorch.save_router_stats(hook, layer, probs, top_k)``), each
attention's normalised entropy and largest logit, and the batch's fingerprint with the epoch.

Labels: :class:`families.lm.LmMonitor` (the published criteria) fed this training's own values at every
step (the router loads included); and ``harmful``, computed by :func:`mark_harmful`: the final validation
loss is above the worst built-healthy run of the same seed by more than ``HARM_MARGIN`` = 0.10 nats (fixed
before scoring), or non-finite. Each run also records, from the router loads computed during training, the
longest stretch of consecutive steps any expert of any layer received zero tokens, and under 10% of its fair
share (``1 / experts``), with the step it started (:func:`longest_stretches`), and the mean share of
token assignments dropped by the capacity limit.

Healthy cases and broken cases, each with its documentation: :data:`CASES` (``why``).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from families import textlm
from families.lm import LmMonitor
from families.textlm import TextResult as MoeResult  # the same fields: a text LM's run
from families.textlm import corpus, corpus_info, mark_harmful, splits, unigram_entropy

__all__ = ["CASES", "Loader", "corpus", "corpus_info", "mark_harmful", "run", "splits", "unigram_entropy"]

CTX = 32
DIM = 64
HEADS = 4
LAYERS = 2
EXPERTS = 8
EXPERT_HIDDEN = 128
BATCH = 16
STEPS = 600
WARMUP = 30
PEAK_LR = 3e-3
MIN_RATIO = 0.1
CAPACITY = 1.25
JITTER = 0.01
AUX_WEIGHT = 0.01
VAL_WINDOWS = 512
ONSET = 360  # where a resume happens: after warmup, before the end of epoch 0
HARM_MARGIN = textlm.HARM_MARGIN  # 0.10 nats over the seed's worst built-healthy run (fixed before scoring)
STARVED_SHARE = 0.1  # "under 10% of its fair share" in the router-stretch statistics


@dataclass(frozen=True)
class MoeSpec:
    """One case (every field's default is the healthy Switch recipe)."""

    top_k: int = 1  # 1: Switch; 2: Mixtral (renormalised gates, no capacity)
    experts: int = EXPERTS
    batch: int = BATCH
    capacity: float | None = CAPACITY  # None: no capacity limit
    jitter: float = JITTER
    aux_weight: float = AUX_WEIGHT
    expert_dropout: float = 0.0
    warmup: int = WARMUP
    peak_lr: float = PEAK_LR
    router_lr_mult: float = 1.0
    router_bias_init: float = 0.0  # expert 0's router bias at initialisation
    detach_gates: bool = False  # ``.detach()`` on the router probabilities
    dispatch_off_by_one: bool = False  # ``for e in range(num_experts - 1)``: the last expert never runs
    resume: bool = False  # the job restarts from a checkpoint at ``ONSET``
    restore_scheduler: bool = True
    restore_loader: bool = True


#: ``name -> (kind, spec, why)``.
def _cases() -> dict[str, tuple[str, MoeSpec, str]]:
    r = MoeSpec()
    mixtral = replace(r, top_k=2, capacity=None)
    resume = replace(r, resume=True)
    return {
        "healthy": ("healthy", r, "the Switch recipe (Fedus et al. 2021): top-1 of 8, capacity 1.25, jitter"),
        "healthy_top2": (
            "healthy",
            mixtral,
            "the Mixtral recipe (Jiang et al. 2024): top-2 of 8, gates renormalised, no capacity limit",
        ),
        "healthy_16_experts": (
            "healthy",
            replace(r, experts=16),
            "16 experts, more than the data needs (Switch scales experts; some idle early, then used)",
        ),
        "healthy_small_batch": ("healthy", replace(r, batch=8), "a batch of 8: noisier gradients and loads"),
        "healthy_no_jitter": (
            "healthy",
            replace(r, jitter=0.0),
            "no router jitter (ST-MoE, Zoph et al. 2022, found input jitter hurt quality and dropped it)",
        ),
        "healthy_capacity_2": (
            "healthy",
            replace(r, capacity=2.0),
            "capacity factor 2.0 (Switch Transformer Table 1 trains with 1.0 and 2.0)",
        ),
        "healthy_clean_resume": (
            "healthy",
            resume,
            "a resume that restores model, optimiser, scheduler, loader",
        ),
        "healthy_expert_dropout": (
            "healthy",
            replace(r, expert_dropout=0.3),
            "expert dropout (Switch Transformer sec. 4.1 uses 0.4 inside the experts)",
        ),
        "healthy_long_warmup": ("healthy", replace(r, warmup=150), "a warmup of 150 steps: slower start"),
        "router_collapse": (
            "broken",
            replace(r, aux_weight=0.0, router_lr_mult=50.0),
            "Shazeer et al. 2017 (sec. 4: the gating network converges to always favour the same few "
            "experts, self-reinforcing) and Fedus et al. 2021 sec. 2.2: without the balancing loss routing "
            "collapses; here with the router's parameter group at 50x the learning rate",
        ),
        "router_bias_init_large": (
            "broken",
            replace(r, router_bias_init=8.0),
            "an initialisation bug: one expert's router bias starts large and the others starve; Fedus "
            "et al. 2021 sec. 2.4 (router initialisation matters for stability), Humbatova et al. 2020 "
            "taxonomy of real faults: wrong weight initialisation",
        ),
        "gates_detached": (
            "broken",
            replace(r, detach_gates=True),
            "``.detach()`` on the router probabilities: Fedus et al. 2021 sec. 2.1 (the gate value "
            "multiplying the expert output is what makes the router differentiable); Humbatova et al. "
            "2020: a tensor detached from the graph, the gradient does not flow",
        ),
        "dispatch_off_by_one": (
            "broken",
            replace(r, dispatch_off_by_one=True),
            "``range(num_experts - 1)`` in the dispatch loop: Islam et al. 2019 and Humbatova et al. 2020 "
            "(off-by-one and wrong loop bounds among real deep-learning bugs); its tokens get nothing",
        ),
        "capacity_too_small": (
            "broken",
            replace(r, capacity=0.1),
            "capacity factor 0.1: GShard (Lepikhin et al. 2020) and Switch sec. 2.2: tokens over an "
            "expert's capacity are dropped (passed by the residual); too small a factor drops most tokens",
        ),
        "lr_too_high": (
            "broken",
            replace(r, peak_lr=30 * PEAK_LR),
            "Fedus et al. 2021 sec. 2.4 and ST-MoE (Zoph et al. 2022): sparse models are unstable at high "
            "learning rates; Wortsman et al. 2023 (small-scale proxies of large-scale instabilities)",
        ),
        "resume_forgets_scheduler": (
            "broken",
            replace(resume, restore_scheduler=False),
            "PyTorch tutorial 'Saving and loading a general checkpoint': a resume must restore every "
            "state_dict; the LR scheduler's is lost and warmup starts over",
        ),
        "resume_replays_loader": (
            "broken",
            replace(resume, restore_loader=False),
            "torchdata's StatefulDataLoader docs (a DataLoader has no state: a resume replays the epoch); "
            "Accelerate's skip_first_batches",
        ),
    }


CASES = _cases()
FAULTS = {name: why for name, (kind, _, why) in CASES.items() if kind == "broken"}


# -- data: textlm's corpus, splits and loader, at this family's context -----------------------------------
def val_windows() -> np.ndarray:
    """``VAL_WINDOWS`` fixed windows of ``CTX + 1`` characters, evenly spaced over the validation split."""
    return textlm.val_windows(CTX, VAL_WINDOWS)


class Loader(textlm.Loader):
    """textlm's loader (epochs, shuffled per epoch, state ``(epoch, position)``) at this family's ``CTX``."""

    def __init__(self, seed: int, batch: int) -> None:
        super().__init__(seed, batch, ctx=CTX)


# -- router statistics ---------------------------------------------------------------------------------------
def longest_stretches(loads: list[list[np.ndarray]], share: float = STARVED_SHARE) -> dict[str, dict]:
    """From per-step router loads (``loads[step][layer]`` a vector over experts summing to 1): the longest
    run of consecutive steps an expert of a layer received zero tokens (``zero``), and under ``share`` of its
    fair share ``1 / experts`` (``starved``): ``{length, start, layer, expert}`` (length 0: never)."""
    out = {key: {"length": 0, "start": None, "layer": None, "expert": None} for key in ("zero", "starved")}
    runs: dict[tuple[str, int, int], tuple[int, int]] = {}
    for step, layers in enumerate(loads):
        for layer, load in enumerate(layers):
            fair = 1.0 / len(load)
            for e, x in enumerate(load):
                for key, hit in (("zero", x == 0), ("starved", x < share * fair)):
                    length, start = runs.get((key, layer, e), (0, step))
                    length, start = (length + 1, start if length else step) if hit else (0, step + 1)
                    runs[(key, layer, e)] = (length, start)
                    if length > out[key]["length"]:
                        out[key] = {"length": length, "start": start, "layer": layer, "expert": e}
    return out


# -- schedule and model -------------------------------------------------------------------------------------
def schedule(spec: MoeSpec, step: int) -> float:
    """The configured learning rate: linear warmup to ``peak_lr``, then cosine to ``MIN_RATIO`` of it."""
    if step < spec.warmup:
        return spec.peak_lr * (step + 1) / spec.warmup
    t = (step - spec.warmup) / max(1, STEPS - spec.warmup)
    return spec.peak_lr * (MIN_RATIO + (1 - MIN_RATIO) * 0.5 * (1 + math.cos(math.pi * t)))


def _model_class() -> Any:
    import torch
    from torch import nn
    from torch.nn import functional as F

    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(DIM, 3 * DIM)
            self.proj = nn.Linear(DIM, DIM)
            self.last_weights: torch.Tensor | None = None
            self.last_logits: torch.Tensor | None = None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
            logits = (q @ k.transpose(-1, -2)) / math.sqrt(DIM // HEADS)
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)
            logits = logits.masked_fill(mask, float("-inf"))
            w = logits.softmax(-1)
            self.last_weights = w.detach()
            self.last_logits = logits.detach()
            return self.proj((w @ v).transpose(1, 2).reshape(b, t, DIM))

    class Expert(nn.Module):
        def __init__(self, dropout: float) -> None:
            super().__init__()
            self.fc = nn.Linear(DIM, EXPERT_HIDDEN)
            self.out = nn.Linear(EXPERT_HIDDEN, DIM)
            self.drop = nn.Dropout(dropout)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(self.drop(F.gelu(self.fc(x))))

    class MoE(nn.Module):
        """Switch top-1 with capacity (``top_k=1``) or Mixtral top-2 with renormalised gates."""

        def __init__(self, spec: MoeSpec) -> None:
            super().__init__()
            self.spec = spec
            self.router = nn.Linear(DIM, spec.experts)
            self.experts = nn.ModuleList(Expert(spec.expert_dropout) for _ in range(spec.experts))
            self.last_probs: torch.Tensor | None = None
            self.aux = torch.zeros(())
            self.dropped = 0.0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            spec, n_exp = self.spec, self.spec.experts
            shape = x.shape
            flat = x.reshape(-1, shape[-1])
            n = flat.shape[0]
            r_in = flat
            if self.training and spec.jitter:
                r_in = flat * torch.empty_like(flat).uniform_(1 - spec.jitter, 1 + spec.jitter)
            probs = self.router(r_in).softmax(-1)
            if spec.detach_gates:
                probs = probs.detach()  # the bug: no gradient reaches the router
            self.last_probs = probs.detach()
            if spec.top_k == 1:
                gate, idx = probs.max(-1)
                choices, weights = idx[:, None], gate[:, None]
            else:
                top, choices = probs.topk(spec.top_k, -1)
                weights = top / top.sum(-1, keepdim=True)
            onehot = F.one_hot(choices, n_exp)  # (tokens, k, experts)
            kept = torch.ones_like(choices, dtype=torch.bool)
            if spec.capacity is not None:
                cap = math.ceil(spec.capacity * n / n_exp)
                assign = onehot.reshape(-1, n_exp)  # token-major, then the slots
                position = ((assign.cumsum(0) - 1) * assign).sum(-1).reshape(choices.shape)
                kept = position < cap
            out = torch.zeros_like(flat)
            last = n_exp - 1 if spec.dispatch_off_by_one else n_exp
            for e in range(last):
                rows, slot = ((choices == e) & kept).nonzero(as_tuple=True)
                if rows.numel():
                    y = self.experts[e](flat[rows]) * weights[rows, slot, None]
                    out = out.index_add(0, rows, y)
            frac = onehot.sum(1).float().mean(0) / spec.top_k
            self.aux = n_exp * (frac * probs.mean(0)).sum()
            self.dropped = float(1 - kept.float().mean())
            return out.reshape(shape)

    class Block(nn.Module):
        def __init__(self, spec: MoeSpec) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(DIM)
            self.attn = SelfAttention()
            self.ln2 = nn.LayerNorm(DIM)
            self.moe = MoE(spec)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln1(x))
            return x + self.moe(self.ln2(x))

    class MoeLM(nn.Module):
        def __init__(self, vocab: int, spec: MoeSpec) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, DIM)
            self.pos = nn.Embedding(CTX, DIM)
            self.blocks = nn.ModuleList(Block(spec) for _ in range(LAYERS))
            self.ln_f = nn.LayerNorm(DIM)
            self.head = nn.Linear(DIM, vocab, bias=False)
            self.apply(self._init)
            for name, p in self.named_parameters():
                if name.endswith(("out.weight", "proj.weight")):  # GPT-2's residual scaling
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * LAYERS))
            if spec.router_bias_init:
                with torch.no_grad():
                    for block in self.blocks:
                        block.moe.router.bias[0] = spec.router_bias_init

        @staticmethod
        def _init(m: nn.Module) -> None:
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.tok(tokens) + self.pos(pos)
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return MoeLM


def _optimizer(model: Any, spec: MoeSpec) -> Any:
    """AdamW over three groups: matrices (weight decay 0.1), biases and LayerNorms (none), routers (none, at
    ``router_lr_mult`` times the rate)."""
    import torch

    router = [p for n, p in model.named_parameters() if ".router." in n]
    rest = [(n, p) for n, p in model.named_parameters() if ".router." not in n]
    groups = [
        {"params": [p for _, p in rest if p.dim() >= 2], "weight_decay": 0.1, "lr": spec.peak_lr},
        {"params": [p for _, p in rest if p.dim() < 2], "weight_decay": 0.0, "lr": spec.peak_lr},
        {"params": router, "weight_decay": 0.0, "lr": spec.peak_lr * spec.router_lr_mult},
    ]
    return torch.optim.AdamW(groups, betas=(0.9, 0.95))


def _scheduler(spec: MoeSpec, opt: Any) -> Any:
    import torch

    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: schedule(spec, s) / spec.peak_lr)


def validation_loss(model: Any, spec: MoeSpec) -> float:
    """Mean cross-entropy of the next character after a full context over :func:`val_windows`, by a fresh
    copy of ``model`` (no hook), in eval mode."""
    import torch

    _, symbols, _ = corpus()
    fresh = _model_class()(len(symbols), spec)
    fresh.load_state_dict(model.state_dict())
    fresh.eval()
    w = torch.as_tensor(val_windows())
    losses = []
    with torch.no_grad():
        for i in range(0, len(w), 128):
            chunk = w[i : i + 128]
            logits = fresh(chunk[:, :CTX])[:, -1]
            losses.append(torch.nn.functional.cross_entropy(logits.float(), chunk[:, CTX], reduction="none"))
    return float(torch.cat(losses).mean())


# -- one run -----------------------------------------------------------------------------------------------
def run(spec: MoeSpec, seed: int, out_dir: str, steps: int | None = None) -> MoeResult:
    """Train one case for ``STEPS`` optimizer steps (or ``steps``) into ``out_dir``."""
    import torch

    import tornasole.pytorch as ts
    from tornasole.core.llm_signals import GRAD_NORM_TOTAL
    from tornasole.pytorch.llm_stats import attention_logit_max, expert_load

    start = time.perf_counter()
    total = STEPS if steps is None else steps
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    _, symbols, _ = corpus()
    vocab = len(symbols)
    model = _model_class()(vocab, spec)
    opt = _optimizer(model, spec)
    sched = _scheduler(spec, opt)
    loader = Loader(seed, spec.batch)
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
    all_loads: list[list[np.ndarray]] = []
    dropped: list[float] = []
    for step in range(total):
        if spec.resume and step == ONSET:
            # the job restarts from the checkpoint written at the end of the previous step
            state = copy.deepcopy(
                {"opt": opt.state_dict(), "sched": sched.state_dict(), "loader": loader.state_dict()}
            )
            model.load_state_dict(copy.deepcopy(model.state_dict()))
            opt = _optimizer(model, spec)
            sched = _scheduler(spec, opt)  # built before the optimizer's state is loaded, as a script does
            opt.load_state_dict(state["opt"])  # the learning rates in force at the checkpoint
            if spec.restore_scheduler:
                sched.load_state_dict(state["sched"])
            else:
                for g, base in zip(opt.param_groups, sched.base_lrs):  # the new scheduler's first rate
                    g["lr"] = base * schedule(spec, 0) / spec.peak_lr
            loader = Loader(seed, spec.batch)
            if spec.restore_loader:
                loader.load_state_dict(state["loader"])
        model.train()
        opt.zero_grad(set_to_none=True)
        windows, ids, epoch = loader.next()
        data = torch.as_tensor(windows)
        x, y = data[:, :CTX], data[:, 1:]
        logits = model(x)
        ts.record_batch(hook, x, epoch=epoch)  # after the forward pass: the hook's step is this one
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        hook.record_tensor_value("loss", loss)
        aux = sum(blk.moe.aux for blk in model.blocks)
        objective = loss + spec.aux_weight * aux if spec.aux_weight else loss
        loads, nats, maxima = [], [], []
        for i, blk in enumerate(model.blocks):
            ts.save_router_stats(hook, f"blocks.{i}.moe", blk.moe.last_probs, spec.top_k)
            loads.append(expert_load(blk.moe.last_probs, spec.top_k))
            ts.save_attention_entropy(hook, f"blocks.{i}.attn", blk.attn.last_weights)
            ts.save_attention_logit_max(hook, f"blocks.{i}.attn", blk.attn.last_logits)
            w = blk.attn.last_weights
            p = w.clamp_min(1e-30)
            nats.append(float(-(w * p.log()).sum(-1)[..., 1:].mean()))
            maxima.append(attention_logit_max(blk.attn.last_logits) or 0.0)
        dropped.append(sum(blk.moe.dropped for blk in model.blocks) / len(model.blocks))
        objective.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        lr = opt.param_groups[0]["lr"]  # the rate this optimizer step applies
        for g, group in enumerate(opt.param_groups):
            hook.save_scalar(f"lr/{g}", group["lr"])
        hook.save_scalar(GRAD_NORM_TOTAL, norm)
        loss_value = float(loss.detach())
        finite = bool(torch.isfinite(logits).all())
        non_finite = non_finite or not finite or not math.isfinite(loss_value)
        monitor.step(
            step,
            loss_value,
            norm,
            finite,
            lr,
            schedule(spec, step),
            None,
            False,
            loads,
            nats,
            maxima,
            (epoch, ids),
        )
        all_loads.append(loads)
        if math.isfinite(norm):
            opt.step()
        sched.step()
        train_losses.append(loss_value)
    hook.close()
    val = validation_loss(model, spec)
    labels = dict(monitor.labels)
    tail = train_losses[-10:]
    record = corpus_info()
    record["router_stretch"] = longest_stretches(all_loads)
    record["dropped_share"] = float(np.mean(dropped)) if dropped else 0.0
    record["final_loads"] = (
        [[round(float(v), 4) for v in layer] for layer in all_loads[-1]] if all_loads else []
    )
    return MoeResult(
        labels=labels,
        onset=min(labels.values()) if labels else None,
        final_train_loss=sum(tail) / len(tail),
        val_loss=val,
        non_finite=non_finite or not math.isfinite(val),
        seconds=time.perf_counter() - start,
        record=record,
    )
