"""Overtraining: a loss has stopped improving.

Choices: at a TRAIN (EVAL) step the rule looks at that mode's saved losses up
to the step; with at least ``patience + 1`` values it fires when the best loss
of the last ``patience`` saved steps (``patience_train`` for TRAIN,
``patience_validation`` for EVAL) is not lower than the best loss before them
by at least ``delta``. Loss tensors come from the ``losses`` collection; each
is judged alone.

"By at least ``delta``": ``delta`` is absolute for losses of 1 and above and
relative below (an improvement is a decrease of at least
``delta * min(1, |best before|)``). Why: an absolute 0.01 cannot be met by a
small loss that is still falling fast (0.0153 -> 0.0058 is a 62% drop).
"""

from __future__ import annotations

from tornasole.modes import EVAL, TRAIN
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.losses import loss_names
from tornasole.rules.params import Param

__all__ = ["Overtraining"]


class Overtraining(BuiltinRule):
    """Fires when train (validation) loss has not improved by ``delta`` for ``patience_*`` steps.

    Examples
    --------
    >>> # invoke_rule(Overtraining(trial, patience_train="5", patience_validation="10", delta="0.01"))
    """

    LIKELY_CAUSE = "the validation loss stopped improving while training continues"
    SUGGESTED_FIX = "stop early at the best validation step, or lower the learning rate"

    PARAMETERS = (
        Param("patience_train", "int", "5", "saved TRAIN steps without improvement that fire"),
        Param("patience_validation", "int", "10", "saved EVAL steps without improvement that fire"),
        Param("delta", "float", "0.01", "smallest decrease that counts as an improvement"),
    )

    def check_params(self) -> None:
        self.require_at_least(1, "patience_train", "patience_validation")

    def history_steps(self) -> int | None:
        return 2 * (max(self.patience_train, self.patience_validation) + 1)  # two modes interleaved

    def invoke_at_step(self, step: int) -> bool:
        mode = self.base_trial.mode(step)
        if mode not in (TRAIN, EVAL):
            return False
        patience = self.patience_train if mode == TRAIN else self.patience_validation
        ms = self.base_trial.mode_step(step)
        for name in loss_names(self):
            tensor = self.base_trial.tensor(name)
            steps = [s for s in tensor.steps(mode=mode) if s <= ms]
            if not steps or steps[-1] != ms or len(steps) < patience + 1:
                continue
            losses = [self.scalar(name, s, mode=mode) for s in steps]
            if any(v is None for v in losses):
                continue
            before, recent = min(losses[:-patience]), min(losses[-patience:])
            needed = self.delta * min(1.0, abs(before))
            if not recent <= before - needed:
                self.report_issue(
                    f"{name} ({mode.name} steps {steps[-patience]}..{ms}): best of last {patience} = "
                    f"{self.fmt(recent)} not below earlier best {self.fmt(before)} by "
                    f"{self.fmt(needed)} (delta {self.fmt(self.delta)})",
                    tensor=name,
                    value=recent,
                    best_before=before,
                    threshold=needed,
                )
                return True
        return False
