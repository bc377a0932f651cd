"""Names of the training signals that the LLM rules read and the hooks save: one place for both.

Why a module of names: the rules for today's failures (LossSpike, GradientNormSpike, LossScaleCollapse,
LearningRateDiscontinuity, ExpertImbalance, AttentionEntropyCollapse) read scalars that no collection of
smdebug's era names, and the PyTorch hook's LLM preset and helpers (``Hook(preset="llm")``,
:func:`tornasole.pytorch.save_router_stats`) write them. Both sides import these constants, so a rename
cannot make a rule silently stop seeing its signal.

A signal may be saved with ``hook.save_scalar`` (which prefixes ``scalar/``) or with
``hook.save_tensor`` (no prefix): :func:`signal_regex` accepts both spellings.

Names (``<...>`` is free text chosen by the saver):

* ``lr/<group>``: the learning rate of optimiser parameter group ``<group>`` (``lr/0``);
* ``loss_scale``: the mixed-precision loss scale in force at the step (GradScaler's ``get_scale()``);
* ``skipped_step``: 1 when the optimiser step was skipped (non-finite gradients under a loss scaler), else 0;
* ``grad_norm/total``: the global L2 norm of the gradients (before clipping);
* ``param_norm/total``: the global L2 norm of the parameters (no rule reads it yet; Megatron and OLMo log it);
* ``grad_norm/<parameter>``: one parameter's gradient L2 norm (the ``gradients`` collection's ``l2``
  reductions are read as well);
* ``router/<layer>/expert_load``: the fraction of a mixture-of-experts layer's tokens routed to each
  expert at the step (a vector summing to 1);
* ``attention_entropy/<layer>``: a layer's mean attention entropy, normalised to [0, 1] by the log of the
  number of keys each query may attend to (attention weights themselves may be saved instead);
* ``attention_logit_max/<layer>``: the largest absolute pre-softmax attention logit ``q.k/sqrt(d)`` of a
  layer at the step (read by AttentionLogitGrowth);
* ``batch_fingerprint/<input>``: ``[fingerprint, epoch]`` of the step's batch: a 48-bit hash of its values
  (:func:`tornasole.core.batch_fingerprint.fingerprint`) and the epoch the loop says it is in (-1: not
  given); read by DataReplay.

Examples
--------
>>> bool(signal_regex(LEARNING_RATE, any_suffix=True).match("scalar/lr/0"))
True
>>> bool(signal_regex(LOSS_SCALE).match("loss_scale"))
True
"""

from __future__ import annotations

import re

__all__ = [
    "ATTENTION_ENTROPY",
    "ATTENTION_LOGIT_MAX",
    "BATCH_FINGERPRINT",
    "EXPERT_LOAD",
    "GRAD_NORM",
    "GRAD_NORM_TOTAL",
    "LEARNING_RATE",
    "LOSS_SCALE",
    "PARAM_NORM_TOTAL",
    "ROUTER",
    "SCALAR_PREFIX",
    "SKIPPED_STEP",
    "expert_load_name",
    "learning_rate_name",
    "signal_regex",
]

#: What ``hook.save_scalar`` puts before a name.
SCALAR_PREFIX = "scalar/"
LEARNING_RATE = "lr"
LOSS_SCALE = "loss_scale"
SKIPPED_STEP = "skipped_step"
GRAD_NORM = "grad_norm"
GRAD_NORM_TOTAL = "grad_norm/total"
PARAM_NORM_TOTAL = "param_norm/total"
ROUTER = "router"
EXPERT_LOAD = "expert_load"
ATTENTION_ENTROPY = "attention_entropy"
ATTENTION_LOGIT_MAX = "attention_logit_max"
BATCH_FINGERPRINT = "batch_fingerprint"


def learning_rate_name(optimizer_index: int, group: int) -> str:
    """``scalar/lr/<group>`` for the first optimiser's groups, ``scalar/lr/<k>.<group>`` for the others:
    what every hook saves (the PyTorch hook per parameter group, the Keras hook per optimiser)."""
    group_name = f"{optimizer_index}.{group}" if optimizer_index else str(group)
    return f"{SCALAR_PREFIX}{LEARNING_RATE}/{group_name}"


def expert_load_name(layer: str) -> str:
    """``router/<layer>/expert_load``: where a router's per-expert load is saved."""
    return f"{ROUTER}/{layer}/{EXPERT_LOAD}"


def signal_regex(name: str, any_suffix: bool = False) -> re.Pattern:
    """A pattern matching ``name`` saved either way (with or without ``scalar/``).

    ``any_suffix``: ``name/<anything>`` matches too (``lr/0``, ``lr/decay``), and ``name`` alone.
    """
    tail = r"(/.+)?" if any_suffix else ""
    return re.compile(rf"^(?:{re.escape(SCALAR_PREFIX)})?{re.escape(name)}{tail}$")
