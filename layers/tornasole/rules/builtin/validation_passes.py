"""The validation passes of a saved accuracy, as the rules that judge a run by them read it.

Points are validation passes: the accuracy tensors' saved EVAL steps grouped
into passes (:func:`trial_phases`); each pass's point is the mean of its first
``k`` saved steps, ``k`` the length of the shortest pass, so every pass is
judged on the same validation batches. The newest pass is judged once, at the
step where it becomes as long as the shortest earlier pass
(:func:`whole_passes`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import numpy as np

from tornasole.exceptions import TensorUnavailable
from tornasole.modes import EVAL, ModeKeys
from tornasole.rules.builtin.overfit import trial_phases
from tornasole.rules.builtin.stalled_loss import whole_passes

__all__ = ["ValidationPasses", "names_in_mode"]


def names_in_mode(rule: object, pattern: re.Pattern, mode: ModeKeys) -> list[str]:
    """The trial's tensors matching ``pattern`` (re.match) that were saved in ``mode``. Asked at every step:
    a name's match is remembered, per pattern."""
    trial = rule.base_trial
    matched = rule.__dict__.setdefault(("_matched", pattern.pattern), {})
    names = []
    for n in sorted(trial.tensor_names()):
        hit = matched.get(n)
        if hit is None:
            hit = matched[n] = pattern.match(n) is not None
        if hit and trial.tensor(n).steps(mode=mode):
            names.append(n)
    return names


class ValidationPasses:
    """Mixin for a :class:`BuiltinRule` whose parameter ``ACCURACY_PARAM`` names the accuracy tensors."""

    ACCURACY_PARAM = "tensor_regex"

    def _validation_passes(self, step: int, why: str) -> Iterator[tuple[str, list[float], list[list[int]]]]:
        """``(accuracy name, pass means, passes)`` for each accuracy whose newest pass is judged at ``step``
        (an EVAL step). Raises ``TensorUnavailable`` (the step is skipped, never judged healthy) when no
        accuracy was saved in EVAL mode; ``why`` says what the rule needs it for."""
        pattern = getattr(self, self.ACCURACY_PARAM)
        names = names_in_mode(self, pattern, EVAL)
        if not names:
            raise TensorUnavailable(
                f"matching {self.ACCURACY_PARAM} {pattern.pattern!r} in EVAL mode "
                f"(a validation accuracy; {why})"
            )
        if self.base_trial.mode(step) != EVAL:
            return
        for name in names:
            got = self._pass_means(name, step)
            if got is not None:
                yield name, *got

    def _means(self, name: str, passes: list[list[int]]) -> list[float] | None:
        """Each pass's mean of ``name``; None when a value is missing or not finite. A pass's mean is
        computed once (a saved step's value never changes)."""
        cache = self.__dict__.setdefault("_pass_mean_cache", {})
        means = []
        for p in passes:
            key = (name, p[0], len(p))
            mean = cache.get(key)
            if mean is None:
                values = [self.scalar(name, s) for s in p]
                if any(v is None or not math.isfinite(v) for v in values):
                    return None
                mean = cache[key] = float(np.mean(values))
            means.append(mean)
        return means

    def _pass_means(self, name: str, step: int) -> tuple[list[float], list[list[int]]] | None:
        """Each validation pass's mean over its first ``k`` saved steps up to ``step`` (``k`` the shortest
        pass's count), with the passes' steps; None when ``step`` is not one of ``name``'s saved steps, is
        not the step where the newest pass reaches the shortest earlier pass's length, or a value is missing
        or not finite."""
        trial = self.base_trial
        steps = [s for s in trial.tensor(name).steps() if s <= step]
        if not steps or steps[-1] != step:
            return None
        passes = whole_passes([st for mode, st in trial_phases(trial, steps) if mode == EVAL])
        if passes is None:
            return None
        means = self._means(name, passes)
        return None if means is None else (means, passes)
