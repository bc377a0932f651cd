"""The learning rate a Keras optimiser applies at its next update, as the Keras hook saves it.

Saved as ``scalar/lr/0`` (collection ``scalars``), the name and collection under which the PyTorch hook saves
its first parameter group's rate (:func:`tornasole.core.llm_signals.learning_rate_name`): a rule that reads
the rate (LearningRateDiscontinuity, LossNotDecreasing's warmup deferral) reads both frameworks' traces the
same way. Keras gives a model one optimiser, with one rate for every variable: one scalar.

Which rate: the one the step's update uses. Keras's ``optimizer.learning_rate`` evaluates a
``LearningRateSchedule`` at the optimiser's ``iterations`` counter (a callable rate is called, a plain
variable is read), and the update of the step reads the same counter before incrementing it. The hook reads it
when the step opens (``on_train_batch_begin``; in a custom loop when ``tape.gradient`` is called, before
``apply``), so step ``k`` of an undisturbed ``fit`` saves ``schedule(k)``. A ``LossScaleOptimizer`` (mixed
precision) delegates its rate and counter to its inner optimiser; it is unwrapped explicitly, so a wrapper
that does not delegate is read right too. A step the loss scaler skips does not advance the counter: the next
step saves the same rate, which is the rate it uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tornasole.core.llm_signals import learning_rate_name
from tornasole.keras.capture import read_numpy

__all__ = ["LEARNING_RATE_NAME", "current_learning_rate"]

#: The saved name of the rate (the PyTorch hook's name for its first group).
LEARNING_RATE_NAME = learning_rate_name(0, 0)


def _innermost(optimizer: Any) -> Any:
    """The optimiser that owns the rate: a ``LossScaleOptimizer``'s ``inner_optimizer`` (nested ones too)."""
    seen = 0
    while getattr(optimizer, "inner_optimizer", None) is not None and seen < 8:
        optimizer = optimizer.inner_optimizer
        seen += 1
    return optimizer


def current_learning_rate(optimizer: Any) -> np.ndarray | None:
    """The rate ``optimizer`` applies at its next update as a 0-d float32 array; None when it has none
    readable (no ``learning_rate``, or a value that is not one number). A NaN rate is returned as it is."""
    if optimizer is None:
        return None
    try:
        rate = _innermost(optimizer).learning_rate
    except (AttributeError, TypeError, ValueError):
        return None
    if rate is None:
        return None
    if isinstance(rate, (int, float)):
        return np.asarray(rate, dtype=np.float32).reshape(())
    value = np.asarray(read_numpy(rate), dtype=np.float32)
    if value.size != 1:
        return None
    return value.reshape(())
