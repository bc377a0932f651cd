"""LossScaleCollapse: the fp16 loss scaler is stuck at its floor, or skips step after step.

A dynamic loss scaler (PyTorch's ``torch.amp.GradScaler``, DeepSpeed's ``DynamicLossScaler``) skips an
optimiser step whose gradients overflowed and halves its scale; after a run of clean steps it grows the
scale again. A healthy fp16 run skips a few steps early and one now and then. A run whose gradients
overflow whatever the scale drives the scale down to its floor and skips nearly every step: the model
stops learning while the loss looks flat (DeepSpeed issue 697: "Current loss scale already at minimum",
the scale stuck at 1; DeepSpeed's ``min_loss_scale`` defaults to 1).

It fires when

* the saved ``loss_scale`` is at or below ``min_scale`` at ``num_steps`` consecutive saved steps of the
  mode (the evaluated one included), or
* more than ``max_skip_fraction`` of the last ``skip_window`` saved steps were skipped (judged once that
  many steps were saved): read from ``skipped_step`` (1 = skipped) where it was saved, else inferred
  where the scale fell from the previous saved step (exact when the scale is saved every step).

Names: :mod:`tornasole.core.llm_signals` (``loss_scale``, ``skipped_step``, with or without ``scalar/``).
"""

from __future__ import annotations

from tornasole.core.llm_signals import LOSS_SCALE, SKIPPED_STEP, signal_regex
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.series import names_matching
from tornasole.rules.params import Param

__all__ = ["LossScaleCollapse"]


class LossScaleCollapse(BuiltinRule):
    """Fires when the loss scale sits at ``min_scale`` for ``num_steps`` saved steps, or skips pile up.

    Examples
    --------
    >>> # invoke_rule(LossScaleCollapse(trial, min_scale="1", num_steps="10", max_skip_fraction="0.5"))
    """

    LIKELY_CAUSE = (
        "the fp16 loss scale collapsed: the gradients overflow at every scale (a diverging run, an op that "
        "overflows in fp16 such as an unscaled attention logit or a large activation), so steps are skipped"
    )
    SUGGESTED_FIX = (
        "train in bf16 instead of fp16, keep softmax/normalisation in fp32 (autocast does), lower the "
        "learning rate, or find the layer that overflows (NonFiniteOrigin)"
    )

    PARAMETERS = (
        Param(
            "min_scale", "float", "1", "a scale at or below this is at the floor (DeepSpeed min_loss_scale)"
        ),
        Param("num_steps", "int", "10", "consecutive saved steps at the floor that fire"),
        Param("max_skip_fraction", "float", "0.5", "fire when more than this fraction of steps was skipped"),
        Param("skip_window", "int", "20", "saved steps over which the skipped fraction is counted"),
    )

    def check_params(self) -> None:
        self.require_at_least(1, "num_steps", "skip_window")
        if not 0 <= self.max_skip_fraction <= 1:
            raise self.param_error("max_skip_fraction", f"value {self.max_skip_fraction} must be in [0, 1]")

    def history_steps(self) -> int | None:
        return max(self.num_steps, self.skip_window + 1)

    def invoke_at_step(self, step: int) -> bool:
        scales = names_matching(self, step, signal_regex(LOSS_SCALE))
        skips = names_matching(self, step, signal_regex(SKIPPED_STEP))
        if scales and self._stuck(scales[0], step):
            return True
        return self._skipping(scales[0] if scales else None, skips[0] if skips else None, step)

    def _stuck(self, name: str, step: int) -> bool:
        steps = self.same_mode_steps(name, step)[-self.num_steps :]
        if len(steps) < self.num_steps:
            return False
        values = [self.scalar(name, s) for s in steps]
        if any(v is None or v > self.min_scale for v in values):
            return False
        self.report_issue(
            f"{name} <= min_scale {self.fmt(self.min_scale)} at the last {self.num_steps} saved steps "
            f"({steps[0]}..{step}; now {self.fmt(values[-1])})",
            tensor=name,
            value=values[-1],
            criterion="stuck",
        )
        return True

    def _skipping(self, scale: str | None, skipped: str | None, step: int) -> bool:
        name = skipped or scale
        if name is None:
            return False
        steps = self.same_mode_steps(name, step)
        if skipped is not None:
            steps = steps[-self.skip_window :]
            flags = [(self.scalar(skipped, s) or 0.0) > 0 for s in steps]
        else:
            steps = steps[-(self.skip_window + 1) :]
            values = [self.scalar(name, s) for s in steps]
            flags = [a is not None and b is not None and b < a for a, b in zip(values, values[1:])]
            steps = steps[1:]
        if len(flags) < self.skip_window:
            return False
        fraction = sum(flags) / len(flags)
        if fraction <= self.max_skip_fraction:
            return False
        how = f"{skipped}" if skipped is not None else f"inferred from falls of {scale}"
        self.report_issue(
            f"{sum(flags)} of the last {len(flags)} saved steps ({steps[0]}..{step}) were skipped ({how}): "
            f"{self.fmt(fraction)} > max_skip_fraction {self.fmt(self.max_skip_fraction)}",
            tensor=name,
            value=fraction,
            criterion="skipped",
        )
        return True
