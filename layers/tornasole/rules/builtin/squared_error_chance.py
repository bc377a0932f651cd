"""The chance level of a squared-error loss at initialisation: the loss of a model that predicts zero.

Why zero and not the targets' mean: Karpathy's "verify loss @ init" compares the first loss with what an
*untrained* network scores. For a cross-entropy that is the loss of uniform probabilities (ln C), the
output of logits near zero, not the loss of the best constant (the class prior). Likewise a well-initialised
regression head outputs values near zero (PyTorch's default init, Keras's Glorot with a zero bias), so its
first mean squared error is about the targets' mean square, E[t^2] = Var(t) + mean(t)^2, plus the small
variance of its own outputs. The mean predictor's loss, Var(t), is what a network scores only once it has
learned the bias, and as a reference it misjudges healthy starts:

* targets with a large mean (prices, unstandardised): every untrained network scores about mean(t)^2, far
  above Var(t), though it learns the bias in a few steps;
* a sigmoid output (an autoencoder's pixels in [0, 1]) starts at 0.5, whose loss E[(t - 0.5)^2] is above
  Var(t) whenever the pixels' mean is not 0.5 (2.2-3.2 x Var(t) on the families benchmark's healthy
  autoencoders, 0.75-0.85 x E[t^2]);
* a small first batch: the variance of 4 targets can be near 0 (x 40-425 on healthy He-initialised
  regressions at batch 4), their mean square much less so.

E[t^2] is never below Var(t), so this level is the more lenient one. The mean square is taken over every
target entry of the first saved batch: with one value per output per sample, that is the per-output mean
square averaged over the outputs, as a multi-output model (an autoencoder) needs.

Where the target comes from: smdebug's PyTorch hook saves a registered loss module's inputs as
``<Loss>_input_0`` (the prediction) and ``<Loss>_input_1`` (the target) next to its output
``<Loss>_output_0``. A run that saved no target cannot be judged; :func:`squared_error_chance` raises
``TensorUnavailable`` naming the tensor and how to save it, so the step is reported skipped, not healthy.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from tornasole.exceptions import TensorUnavailable
from tornasole.rules.builtin.losses import loss_feed

__all__ = ["SQUARED_ERROR", "squared_error_chance", "target_of"]

#: Loss tensors the PyTorch hook names after a mean-squared-error module, and the Keras hook's batch loss of a
#: ``MeanSquaredError`` (the default of the rule's ``squared_error_regex``).
SQUARED_ERROR = r"(^|.*[/_])MSELoss(_output_0)?$|^batch_loss/MeanSquaredError$"

_OUTPUT = re.compile(r"^(?P<loss>.+)_output_\d+$")


def target_of(loss: str) -> str | None:
    """The name under which the PyTorch hook saves the target of loss module output ``loss``
    (``MSELoss_output_0`` -> ``MSELoss_input_1``); None for a loss not saved as a module's output.

    Examples
    --------
    >>> target_of("MSELoss_output_0")
    'MSELoss_input_1'
    >>> target_of("batch_loss/MeanSquaredError")  # the Keras hook's batch loss and smdebug's label name
    'labels'
    >>> target_of("loss") is None
    True
    """
    feed = loss_feed(loss)
    if feed is not None:
        return feed.target
    m = _OUTPUT.match(loss)
    return None if m is None else f"{m.group('loss')}_input_1"


def squared_error_chance(rule: Any, loss: str, step: int) -> tuple[float, str] | None:
    """``(E[t^2], how it was found)`` for squared-error loss ``loss`` at the first saved step ``step``: the
    mean square of the target batch saved with it. None when the targets are all zero or not finite (no
    scale to compare with). Raises ``TensorUnavailable`` when the trial saved no target for ``loss``."""
    target = target_of(loss)
    if target is None:
        raise TensorUnavailable(
            f"holding the target of {loss} (a squared-error loss is judged against its targets' mean square, "
            "read from <Loss>_input_1 next to a loss module's <Loss>_output_0; for a loss saved otherwise, "
            "give chance_loss)"
        )
    value = rule.value(target, step) if target in rule.base_trial.tensor_names(step=step) else None
    if value is None:
        raise TensorUnavailable(
            f"{target} at step {step} (the target of {loss}: its mean square is a squared-error loss's "
            'chance level; save it with hook.get_collection("loss_inputs").include("[Ll]oss_input_1$") and '
            'include_collections=["loss_inputs"], or give chance_loss)'
        )
    targets = np.asarray(value, dtype=np.float64)
    if targets.size == 0 or not np.all(np.isfinite(targets)):
        return None
    level = float(np.mean(targets**2))
    if not (level > 0 and math.isfinite(level)):
        return None
    return level, f"the mean square of the first batch's targets {target}, the loss of predicting 0"
