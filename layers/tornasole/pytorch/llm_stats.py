"""Helpers that save what the mixture-of-experts and attention rules read, as small tensors per step.

Why helpers: a router's probabilities or an attention map are large (tokens x experts, heads x queries x
keys) and are not module outputs the hook sees by name; the rules need only a few numbers from them.
``save_router_stats`` saves a router's per-expert load (the fraction of tokens routed to each expert,
read by ExpertImbalance); ``save_attention_entropy`` saves a layer's normalised attention entropy (read
by AttentionEntropyCollapse); ``save_attention_logit_max`` saves a layer's largest absolute pre-softmax
attention logit (read by AttentionLogitGrowth). Names come from :mod:`tornasole.core.llm_signals`. Call
them after the forward pass of the step, like ``hook.save_tensor``; they save when their collection
(``router``, ``attention``) is saved at the step under the hook's save configuration.

Examples
--------
>>> # logits = router(x); probs = logits.softmax(-1)
>>> # save_router_stats(hook, "layers.0.moe", probs, top_k=2)
>>> # save_attention_entropy(hook, "layers.0.attn", attn_weights)
>>> # save_attention_logit_max(hook, "layers.0.attn", q @ k.transpose(-1, -2) / head_dim**0.5)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tornasole.core.attention_entropy import normalised_entropy
from tornasole.core.llm_signals import ATTENTION_ENTROPY, ATTENTION_LOGIT_MAX, expert_load_name
from tornasole.exceptions import ConfigurationError

__all__ = [
    "attention_logit_max",
    "expert_load",
    "save_attention_entropy",
    "save_attention_logit_max",
    "save_router_stats",
]

ROUTER_COLLECTION = "router"
ATTENTION_COLLECTION = "attention"


def expert_load(router_probs_or_counts: Any, top_k: int = 1) -> np.ndarray:
    """Fraction of the step's tokens routed to each expert (a vector summing to 1).

    A 1-D input is per-expert token counts; an input with more dimensions is router probabilities (or
    logits' softmax) with experts on the last axis, each token counted at its ``top_k`` experts.
    """
    t = torch.as_tensor(router_probs_or_counts).detach()
    if t.ndim == 0:
        raise ConfigurationError(
            "save_router_stats: router statistics must have an expert axis, got a scalar"
        )
    if t.ndim == 1:
        counts = t.to(torch.float64).cpu()
    else:
        experts = t.shape[-1]
        if not 1 <= top_k <= experts:
            raise ConfigurationError(f"save_router_stats: top_k={top_k} must be in [1, {experts}] experts")
        chosen = t.reshape(-1, experts).float().topk(top_k, dim=-1).indices.reshape(-1).cpu()
        counts = torch.bincount(chosen, minlength=experts).to(torch.float64)
    if torch.any(counts < 0) or not torch.isfinite(counts).all():
        raise ConfigurationError("save_router_stats: expert counts must be finite and >= 0")
    total = float(counts.sum())
    return (counts / total).numpy() if total > 0 else counts.numpy()


def save_router_stats(hook: Any, name: str, router_probs_or_counts: Any, top_k: int = 1) -> None:
    """Save ``router/<name>/expert_load`` for the current step (see :func:`expert_load`)."""
    hook.save_tensor(expert_load_name(name), expert_load(router_probs_or_counts, top_k), ROUTER_COLLECTION)


def save_attention_entropy(hook: Any, name: str, attention_weights: Any) -> None:
    """Save ``attention_entropy/<name>``: the mean normalised entropy of ``attention_weights``
    (``(..., queries, keys)`` probabilities; :func:`tornasole.core.attention_entropy.normalised_entropy`)."""
    w = torch.as_tensor(attention_weights).detach().float().cpu().numpy()
    value = normalised_entropy(w)
    if value is not None:
        hook.save_tensor(f"{ATTENTION_ENTROPY}/{name}", np.float32(value), ATTENTION_COLLECTION)


def attention_logit_max(logits: Any) -> float | None:
    """Largest absolute finite value of ``logits`` (pre-softmax ``q.k/sqrt(d)``; masked entries, -inf,
    are left out), reduced on the logits' device; None when no entry is finite.

    Why the maximum: Dehghani et al. (2023, ViT-22B) saw training diverge when attention logits grew
    without bound; the largest one is what QK-Clip (Kimi K2) caps, and one number a layer is cheap.
    """
    t = torch.as_tensor(logits).detach()
    if t.numel() == 0:
        return None
    finite = torch.isfinite(t)
    if not bool(finite.any()):
        return None
    return float(torch.where(finite, t.abs(), torch.zeros((), dtype=t.dtype, device=t.device)).amax())


def save_attention_logit_max(hook: Any, name: str, logits: Any) -> None:
    """Save ``attention_logit_max/<name>``: :func:`attention_logit_max` of a layer's attention logits."""
    value = attention_logit_max(logits)
    if value is not None:
        hook.save_tensor(f"{ATTENTION_LOGIT_MAX}/{name}", np.float32(value), ATTENTION_COLLECTION)
