"""Overfit: validation loss pulls away from training loss.

Choices: evaluated at EVAL steps (global step >= ``start_step``). At an EVAL
step e the validation loss is the loss saved at e and the training loss is the
same tensor's loss at the newest TRAIN step before e (the model that was just
validated); ratio = (val - train) / |train|. The rule fires at e when the ratio
exceeds ``ratio_threshold`` at ``patience`` consecutive EVAL steps ending at e.
Loss tensors: ``tensor_regex`` if given, else the ``losses`` collection; each
tensor is judged alone and needs both modes.
"""

from __future__ import annotations

import bisect

from tornasole.modes import EVAL, TRAIN
from tornasole.rules.generic.base import BuiltinRule
from tornasole.rules.generic.losses import loss_names
from tornasole.rules.params import Param

__all__ = ["Overfit"]


class Overfit(BuiltinRule):
    """Fires when (val - train) / train > ``ratio_threshold`` for ``patience`` EVAL steps in a row.

    Examples
    --------
    >>> # invoke_rule(Overfit(trial, patience="2", ratio_threshold="0.1"))
    """

    PARAMETERS = (
        Param("tensor_regex", "regex", None, "loss tensors (re.match); unset: the losses collection"),
        Param("start_step", "int", "0", "global steps before this are not judged"),
        Param("patience", "int", "1", "consecutive EVAL steps over the threshold needed"),
        Param("ratio_threshold", "float", "0.1", "(val - train) / train above this counts"),
    )

    def check_params(self) -> None:
        if self.patience < 1:
            raise self.param_error("patience", f"value {self.patience} must be >= 1")

    def _ratio(self, name: str, e: int, train_steps: list[int]) -> tuple[float, float, float] | None:
        i = bisect.bisect_left(train_steps, e)
        if i == 0:
            return None
        val, train = self.scalar(name, e), self.scalar(name, train_steps[i - 1])
        if val is None or train is None or train == 0:
            return None
        return (val - train) / abs(train), val, train

    def history_steps(self) -> int | None:
        return 2 * self.patience + 2  # EVAL steps interleaved with TRAIN steps

    def invoke_at_step(self, step: int) -> bool:
        if step < self.start_step or self.base_trial.mode(step) != EVAL:
            return False
        for name in loss_names(self, self.tensor_regex is None):
            tensor = self.base_trial.tensor(name)
            gsteps = [s for s in tensor.steps() if self.start_step <= s <= step]
            if step not in gsteps:
                continue
            evals = [s for s in gsteps if self.base_trial.mode(s) == EVAL][-self.patience :]
            train_steps = [s for s in tensor.steps() if self.base_trial.mode(s) == TRAIN]
            if len(evals) < self.patience:
                continue
            ratios = [self._ratio(name, e, train_steps) for e in evals]
            if all(r is not None and r[0] > self.ratio_threshold for r in ratios):
                ratio, val, train = ratios[-1]
                self.report_issue(
                    f"{name}: (val {self.fmt(val)} - train {self.fmt(train)}) / train = {self.fmt(ratio)} "
                    f"> ratio_threshold {self.fmt(self.ratio_threshold)} for {self.patience} EVAL step(s)",
                    tensor=name,
                    value=ratio,
                    val_loss=val,
                    train_loss=train,
                )
                return True
        return False
