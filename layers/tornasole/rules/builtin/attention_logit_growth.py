"""AttentionLogitGrowth: a layer's attention logits grew past what a stable run reaches.

Dehghani et al. (2023, "Scaling Vision Transformers to 22 Billion Parameters", section 3.1.1) found
training diverge because attention logits ``q.k/sqrt(d)`` grew without bound, which makes the attention
weights nearly one-hot (entropy collapse, which AttentionEntropyCollapse judges, follows); their fix,
LayerNorm on queries and keys, is PaLM's and OLMo 2's too. Kimi K2's QK-Clip (Moonshot AI, 2025,
"Kimi K2: Open Agentic Intelligence", MuonClip) caps a head's largest logit at ``tau = 100`` because
unstable runs' maxima passed 1000: ``max_logit`` is that cap. The rule reads, per layer,
``attention_logit_max/<layer>`` saved by :func:`tornasole.pytorch.save_attention_logit_max` (the largest
absolute logit of the step), and fires when it stayed above ``max_logit`` at ``num_steps`` consecutive
saved steps of the mode. ``growth_factor`` (off by default) also fires when it stayed above that multiple
of the layer's first saved value, for models whose logits start far from the cap.
"""

from __future__ import annotations

import math

from tornasole.core.llm_signals import ATTENTION_LOGIT_MAX, signal_regex
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.series import names_matching
from tornasole.rules.params import Param

__all__ = ["AttentionLogitGrowth"]


class AttentionLogitGrowth(BuiltinRule):
    """Fires when a layer's largest attention logit stays above ``max_logit`` for ``num_steps`` steps.

    Examples
    --------
    >>> # invoke_rule(AttentionLogitGrowth(trial, max_logit="100", num_steps="3"))
    """

    LIKELY_CAUSE = (
        "the attention logits of {tensor} grew without bound (queries and keys not normalised, a learning "
        "rate too high): the attention turns one-hot and the loss diverges next"
    )
    SUGGESTED_FIX = (
        "add QK-layernorm (or QK-Clip / a logit soft-cap), lower the peak learning rate or lengthen warmup, "
        "and add a z-loss"
    )

    PARAMETERS = (
        Param("max_logit", "float", "100", "largest |q.k/sqrt(d)| above this counts (Kimi K2's QK-Clip tau)"),
        Param("num_steps", "int", "3", "consecutive saved steps the logit must stay above"),
        Param(
            "growth_factor", "float", "0", "also fire above this multiple of the first saved value (0: off)"
        ),
    )

    def check_params(self) -> None:
        self.require_at_least(0, "max_logit", "growth_factor")
        self.require_at_least(1, "num_steps")

    def history_steps(self) -> int | None:
        return self.num_steps

    def leading_steps(self) -> int:
        return 1 if self.growth_factor else 0

    def invoke_at_step(self, step: int) -> bool:
        pattern = signal_regex(ATTENTION_LOGIT_MAX, any_suffix=True)
        for name in names_matching(self, step, pattern):
            layer = name.split(f"{ATTENTION_LOGIT_MAX}/", 1)[-1]
            steps = self.same_mode_steps(name, step)
            recent = steps[-self.num_steps :]
            if len(recent) < self.num_steps or recent[-1] != step:
                continue
            values = [self.scalar(name, s) for s in recent]
            if any(v is None for v in values):
                continue
            now = values[-1]
            if not math.isfinite(now):
                self.report_issue(f"{layer}: largest attention logit is {now} at step {step}", tensor=layer)
                return True
            if self.max_logit and all(v > self.max_logit for v in values):
                self.report_issue(
                    f"{layer}: largest attention logit {self.fmt(now)} at step {step}, above max_logit "
                    f"{self.fmt(self.max_logit)} at each of the last {len(recent)} saved steps",
                    tensor=layer,
                    value=now,
                    criterion="max_logit",
                )
                return True
            first = self.scalar(name, steps[0]) if self.growth_factor else None
            if first and first > 0 and all(v > self.growth_factor * first for v in values):
                self.report_issue(
                    f"{layer}: largest attention logit {self.fmt(now)} at step {step}, above growth_factor "
                    f"{self.fmt(self.growth_factor)} x its first saved value {self.fmt(first)} for "
                    f"{len(recent)} steps",
                    tensor=layer,
                    value=now,
                    criterion="growth_factor",
                )
                return True
        return False
