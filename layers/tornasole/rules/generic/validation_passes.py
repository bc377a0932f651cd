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

import numpy as np

from tornasole.modes import EVAL
from tornasole.rules.generic.overfit import trial_phases
from tornasole.rules.generic.stalled_loss import whole_passes

__all__ = ["ValidationPasses"]


class ValidationPasses:
    """Mixin for a :class:`BuiltinRule`; the accuracy tensors are named by ``tensor_regex`` unless the rule
    names them otherwise (:meth:`_accuracy_pattern`)."""

    def _accuracy_pattern(self) -> re.Pattern:
        return self.tensor_regex

    def _accuracy_names(self) -> list[str]:
        """Accuracy tensors saved in EVAL mode. Asked at every step: a name's match is remembered."""
        trial = self.base_trial
        matched = self.__dict__.setdefault("_matched", {})
        names = []
        for n in sorted(trial.tensor_names()):
            hit = matched.get(n)
            if hit is None:
                hit = matched[n] = self._accuracy_pattern().match(n) is not None
            if hit:
                names.append(n)
        return [n for n in names if trial.tensor(n).steps(mode=EVAL)]

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
