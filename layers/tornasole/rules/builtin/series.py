"""Helpers of the rules that judge a scalar signal over time (LossSpike, GradientNormSpike, ...).

A signal is a tensor saved step after step (a loss, a learning rate, a norm); these helpers read its
values at the saved steps of one mode up to the evaluated step, as the other step-comparing rules do
(:meth:`BuiltinRule.same_mode_steps`: TRAIN with TRAIN, EVAL with EVAL).
"""

from __future__ import annotations

import math
import re
from typing import Any

from tornasole.exceptions import TensorUnavailableForStep
from tornasole.rules.builtin.base import as_float

__all__ = ["names_matching", "scalar_at", "series", "is_finite"]


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
