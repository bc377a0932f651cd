"""WeightUpdateRatio: weights change far too much, or not at all, between steps.

Chosen reading: per weight tensor, ratio = ||w_s - w_p||_2 / (||w_p||_2 + epsilon)
(L2 norms of the whole tensor), where p is the previous saved step of that
tensor (``num_steps`` unset) or the newest saved step <= s - num_steps. It fires
when the ratio is above ``large_threshold`` (learning rate too high) or below
``small_threshold`` (updates vanished or weights frozen). A tensor without an
earlier step is not checked (the rule needs weights at two steps).
"""

from __future__ import annotations

import bisect

import numpy as np

from tornasole.rules.generic.base import BuiltinRule
from tornasole.rules.params import Param

__all__ = ["WeightUpdateRatio"]


class WeightUpdateRatio(BuiltinRule):
    """Fires when ||update|| / ||weights|| is above ``large_threshold`` or below ``small_threshold``.

    Examples
    --------
    >>> # invoke_rule(WeightUpdateRatio(trial, large_threshold="10", small_threshold="0.00000001"))
    """

    PARAMETERS = (
        Param(
            "num_steps", "int", None, "compare with the newest saved step <= s - num_steps (unset: previous)"
        ),
        Param("large_threshold", "float", "10.0", "ratio above this fires"),
        Param("small_threshold", "float", "0.00000001", "ratio below this fires"),
        Param("epsilon", "float", "0.000000001", "added to ||w|| to avoid dividing by zero"),
    )
    COLLECTIONS = (("weights", {"save_interval": "500"}),)

    def check_params(self) -> None:
        if self.num_steps is not None and self.num_steps < 1:
            raise self.param_error("num_steps", f"value {self.num_steps} must be >= 1")

    def _previous(self, steps: list[int], step: int) -> int | None:
        limit = step - 1 if self.num_steps is None else step - self.num_steps
        i = bisect.bisect_right(steps, limit)
        return steps[i - 1] if i else None

    def history_steps(self) -> int | None:
        return 1 if self.num_steps is None else self.num_steps

    def invoke_at_step(self, step: int) -> bool:
        for name in self.names_at(step, ["weights"]):
            prev = self._previous(self.base_trial.tensor(name).steps(), step)
            if prev is None:
                continue
            w, w0 = self.value(name, step), self.value(name, prev)
            if w is None or w0 is None:
                continue
            ratio = float(np.linalg.norm((w - w0).ravel()) / (np.linalg.norm(w0.ravel()) + self.epsilon))
            if ratio > self.large_threshold or ratio < self.small_threshold:
                bound = (
                    f"> large_threshold {self.fmt(self.large_threshold)}"
                    if ratio > self.large_threshold
                    else f"< small_threshold {self.fmt(self.small_threshold)}"
                )
                self.report_issue(
                    f"update ratio of {name} from step {prev}={self.fmt(ratio)} {bound}",
                    tensor=name,
                    value=ratio,
                    previous_step=prev,
                )
                return True
        return False
