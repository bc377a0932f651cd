"""AttentionEntropyCollapse: a layer's attention went (nearly) one-hot and stayed so.

Attention entropy collapse (Zhai et al., 2023, "Stabilizing Transformer Training by Preventing
Attention Entropy Collapse") comes with growing attention logits and precedes loss spikes and
divergence: each query puts almost all its weight on one key. The rule reads, per layer,

* ``attention_entropy/<layer>`` saved by :func:`tornasole.pytorch.save_attention_entropy` (the mean
  entropy normalised to [0, 1], :func:`tornasole.core.attention_entropy.normalised_entropy`), or
* attention weights themselves (tensors matching ``tensor_regex``, default any name holding
  ``attn``/``attention`` and ``weights``/``probs``), from which it computes the same number,

and fires when it stayed below ``min_entropy`` at ``num_steps`` consecutive saved steps of the mode.
``max_drop`` (off by default) also fires when it fell below ``max_drop`` times its value at the layer's
first saved step (a collapse relative to the start, for tasks whose healthy attention is sharp).
"""

from __future__ import annotations

import re

from tornasole.core.attention_entropy import normalised_entropy
from tornasole.core.llm_signals import ATTENTION_ENTROPY, signal_regex
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.series import names_matching
from tornasole.rules.params import Param

__all__ = ["AttentionEntropyCollapse"]


class AttentionEntropyCollapse(BuiltinRule):
    """Fires when a layer's normalised attention entropy stays below ``min_entropy`` for ``num_steps``.

    Examples
    --------
    >>> # invoke_rule(AttentionEntropyCollapse(trial, min_entropy="0.1", num_steps="3"))
    """

    LIKELY_CAUSE = (
        "the attention of {tensor} collapsed onto single keys: its attention logits grew (learning rate too "
        "high, no normalisation of queries/keys), which precedes loss spikes and divergence"
    )
    SUGGESTED_FIX = (
        "add QK-layernorm or a logit soft-cap, lower the learning rate or lengthen warmup, and clip gradients"
    )

    PARAMETERS = (
        Param(
            "tensor_regex",
            "regex",
            r".*(attn|attention).*(weights|probs).*",
            "attention weights (..., queries, keys) whose entropy is computed",
        ),
        Param("min_entropy", "float", "0.1", "normalised entropy (0..1) below this counts as collapsed"),
        Param("num_steps", "int", "3", "consecutive saved steps the entropy must stay low"),
        Param("max_drop", "float", "0", "also fire below this fraction of the first saved entropy (0: off)"),
    )

    def check_params(self) -> None:
        self.require_at_least(0, "min_entropy", "max_drop")
        self.require_at_least(1, "num_steps")

    def history_steps(self) -> int | None:
        return self.num_steps

    def leading_steps(self) -> int:
        return 1 if self.max_drop else 0

    def _layers(self, step: int) -> list[tuple[str, str]]:
        """``(layer, tensor)`` pairs: saved entropies, then attention weights."""
        pattern = signal_regex(ATTENTION_ENTROPY, any_suffix=True)
        out = [(n.split(f"{ATTENTION_ENTROPY}/", 1)[-1], n) for n in names_matching(self, step, pattern)]
        regex: re.Pattern | None = self.tensor_regex
        if regex is not None:
            out += [
                (n, n)
                for n in self.base_trial.tensor_names(step=step)
                if regex.match(n) and not pattern.match(n)
            ]
        return out

    def _entropy(self, name: str, step: int) -> float | None:
        v = self.value(name, step)
        if v is None or v.size == 0:
            return None
        if signal_regex(ATTENTION_ENTROPY, any_suffix=True).match(name):
            return float(v.mean())
        return normalised_entropy(v) if v.ndim >= 1 and v.shape[-1] >= 2 else None

    def invoke_at_step(self, step: int) -> bool:
        for layer, name in self._layers(step):
            steps = self.same_mode_steps(name, step)
            recent = steps[-self.num_steps :]
            if len(recent) < self.num_steps or recent[-1] != step:
                continue
            values = [self._entropy(name, s) for s in recent]
            if any(v is None for v in values):
                continue
            now = values[-1]
            if all(v < self.min_entropy for v in values):
                self.report_issue(
                    f"{layer}: normalised attention entropy {self.fmt(now)} at step {step}, below "
                    f"min_entropy {self.fmt(self.min_entropy)} at each of the last {len(recent)} saved steps",
                    tensor=layer,
                    value=now,
                    criterion="min_entropy",
                )
                return True
            first = self._entropy(name, steps[0]) if self.max_drop else None
            if first and all(v < self.max_drop * first for v in values):
                self.report_issue(
                    f"{layer}: normalised attention entropy {self.fmt(now)} at step {step}, below "
                    f"max_drop {self.fmt(self.max_drop)} x its first saved value {self.fmt(first)} "
                    f"for {len(recent)} steps",
                    tensor=layer,
                    value=now,
                    criterion="max_drop",
                )
                return True
        return False
