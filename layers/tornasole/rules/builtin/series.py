"""Helpers of the rules that judge a scalar signal over time (LossSpike, GradientNormSpike, ...).

A signal is a tensor saved step after step (a loss, a learning rate, a norm); these helpers read its
values at the saved steps of one mode up to the evaluated step, as the other step-comparing rules do
(:meth:`BuiltinRule.same_mode_steps`: TRAIN with TRAIN, EVAL with EVAL).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from tornasole.core.llm_signals import LEARNING_RATE, signal_regex
from tornasole.exceptions import TensorUnavailableForStep
from tornasole.rules.builtin.base import as_float

__all__ = [
    "LEARNING_RATES",
    "learning_rate_names",
    "rate_at",
    "names_matching",
    "scalar_at",
    "series",
    "is_finite",
    "RecentMemo",
]

#: A saved learning rate: ``lr/<group>`` with or without ``scalar/`` (:mod:`tornasole.core.llm_signals`;
#: the PyTorch hook saves one per parameter group, the Keras hook one per optimiser).
LEARNING_RATES = signal_regex(LEARNING_RATE, any_suffix=True)


def learning_rate_names(rule: Any) -> list[str]:
    """Every learning rate the trial saved (:data:`LEARNING_RATES`), sorted; [] when it saved none."""
    return sorted(n for n in rule.base_trial.tensor_names() if LEARNING_RATES.match(n))


def rate_at(rule: Any, name: str, global_step: int) -> float | None:
    """The value ``name`` saved at its newest saved step at or before ``global_step`` (None: none)."""
    steps = rule.base_trial.tensor(name).prev_steps(global_step, 1)
    return rule.scalar(name, steps[-1]) if steps else None


def names_matching(rule: Any, step: int, pattern: re.Pattern) -> list[str]:
    """Tensors saved at ``step`` whose name matches ``pattern`` (``re.match``), sorted."""
    return sorted(n for n in rule.base_trial.tensor_names(step=step) if pattern.match(n))


def scalar_at(rule: Any, name: str, step: int, reduction: str | None = None) -> float | None:
    """The value of ``name`` at ``step`` as one float: the mean of a saved value, else the saved
    ``reduction`` (``l2``: plain, then abs) when given; None when neither was saved."""
    value = rule.scalar(name, step)
    if value is not None or reduction is None:
        return value
    tensor = rule.base_trial.tensor(name)
    for abs_ in (False, True):
        try:
            return as_float(tensor.reduction_value(step, reduction, abs=abs_))
        except (TensorUnavailableForStep, KeyError, ValueError):
            continue
    return None


def series(
    rule: Any, name: str, step: int, count: int | None, reduction: str | None = None
) -> list[tuple[int, float]]:
    """``[(step, value)]`` of ``name`` at its last ``count + 1`` saved steps of ``step``'s mode up to and
    including ``step`` (``count`` None: all), oldest first; steps whose value cannot be read are left out."""
    steps = rule.same_mode_steps(name, step)
    if count is not None:
        steps = steps[-(count + 1) :]
    out = []
    for s in steps:
        v = scalar_at(rule, name, s, reduction)
        if v is not None:
            out.append((s, v))
    return out


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


class RecentMemo:
    """Values computed for recent ``(name, step)`` keys, the oldest dropped beyond ``capacity``.

    Why: a rule that judges each step against a window of the previous ones (LossSpike, GradientNormSpike)
    reads every saved value ``window`` times over a run; remembering the window's values makes a run's
    evaluation linear in its length, and the bound keeps a long run's memory flat. Steps are evaluated in
    order, so the first key in is the first out of use.

    Examples
    --------
    >>> memo = RecentMemo(2)
    >>> [memo.get(("loss", s), lambda: s * 10) for s in (0, 1, 0, 2, 0)]
    [0, 10, 0, 20, 0]
    >>> len(memo)
    2
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._values: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        if key in self._values:
            return self._values[key]
        value = compute()
        self._values[key] = value
        if len(self._values) > self.capacity:
            del self._values[next(iter(self._values))]
        return value
