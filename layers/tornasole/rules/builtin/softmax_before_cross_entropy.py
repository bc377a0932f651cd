"""SoftmaxBeforeCrossEntropy: the loss that expects logits is fed probabilities.

The bug: a softmax applied before a loss that applies its own. PyTorch's ``CrossEntropyLoss`` documents
its input as unnormalised logits (it applies log-softmax itself), ``NLLLoss`` as log-probabilities; Keras's
``CategoricalCrossentropy(from_logits=True)`` likewise. Fed probabilities, the loss squashes them a second
time: inputs confined to [0, 1] give a flattened softmax, its gradients shrink by the first softmax's slope,
and training crawls or stalls (families benchmark: validation accuracy 0.45 and 0.66 for the cnn's 0.97).
It is DeepFD's loss-function mutation (Cao et al., ICSE'22) and a classic Stack Overflow bug.

Criterion (re-implemented, not copied): the tensor that feeds the loss is read **from the trial**: for each
loss output ``<Loss>_output_<i>`` in the ``losses`` collection whose name matches ``loss_regex``, the
loss module's first input ``<Loss>_input_0`` (the prediction; ``_input_1`` is the target), as smdebug's
PyTorch hook names a registered loss module's inputs; in a Keras trial the batch loss
``batch_loss/<Kind>_from_logits`` and ``predictions``, the class axis the last
(:mod:`tornasole.rules.builtin.losses`). The rule fires when at each of the last
``num_steps`` saved steps of the evaluated step's mode, every row of that input along the class axis
(axis 1, PyTorch's; axis 0 of an unbatched 1-D input) is a probability distribution: every entry
``>= -tolerance`` and the row's sum within ``tolerance`` of 1, with at least ``min_classes`` classes.

What stays quiet, and why:

* log_softmax into ``NLLLoss``: rows of log-probabilities are <= 0 and sum to far below 1.
* Keras's idiom, a softmax output into ``CategoricalCrossentropy()`` (``from_logits=False``): that loss
  takes probabilities, and is not judged.
* a sigmoid output into ``BCELoss`` (binary, or multi-label): not matched by ``loss_regex``, and a
  multi-label row of independent sigmoids does not sum to 1 anyway.
* logits: real-valued rows, negative entries, sums anywhere.
* a run that saves no loss input: nothing is judged (the hook saves ``<Loss>_input_0`` when a saved
  collection includes it, e.g. ``include_regex`` ``[Ll]oss_input_0$``; Keras: ``^predictions$|^batch_loss/``).
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.losses import loss_feeds
from tornasole.rules.params import Param

__all__ = ["SoftmaxBeforeCrossEntropy"]


class SoftmaxBeforeCrossEntropy(BuiltinRule):
    """Fires when the input of a cross-entropy loss is rows of probabilities at ``num_steps`` saved steps.

    Examples
    --------
    >>> # invoke_rule(SoftmaxBeforeCrossEntropy(trial, num_steps="3", tolerance="0.001"))
    """

    LIKELY_CAUSE = (
        "{tensor} feeds the loss rows that are already probabilities (each sums to 1): a softmax before a "
        "loss that applies its own"
    )
    SUGGESTED_FIX = (
        "return logits from the model (drop the final softmax) for CrossEntropyLoss, or use log_softmax with "
        "NLLLoss; in Keras use from_logits=False with a softmax output"
    )

    PARAMETERS = (
        Param(
            "loss_regex",
            "regex",
            r".*([Cc]ross_?[Ee]ntropy|NLL)",
            "loss outputs (losses collection, re.match) whose loss expects logits or log-probabilities",
        ),
        Param(
            "num_steps",
            "int",
            "3",
            "saved steps (of the evaluated step's mode) that must all be probabilities",
        ),
        Param(
            "tolerance",
            "float",
            "0.001",
            "a row is a distribution: entries >= -tolerance, |sum - 1| <= tolerance",
        ),
        Param(
            "min_classes",
            "int",
            "2",
            "fewest classes along the class axis (a single column is no distribution)",
        ),
    )
    COLLECTIONS = (
        ("losses", {"save_interval": "500"}),
        (
            "loss_inputs",
            {"include_regex": "[Ll]oss_input_0$|^predictions$|^batch_loss/", "save_interval": "500"},
        ),
    )

    def check_params(self) -> None:
        self.require_at_least(1, "num_steps")
        self.require_at_least(2, "min_classes")
        if not self.tolerance > 0:
            raise self.param_error("tolerance", f"value {self.tolerance} must be > 0")

    def history_steps(self) -> int | None:
        return self.num_steps

    def _loss_inputs(self, step: int) -> list[tuple[str, int]]:
        """``(prediction, class axis)`` of each loss saved at ``step`` that ``loss_regex`` matches and that
        takes logits (:func:`loss_feeds`: PyTorch's ``<Loss>_input_0``, Keras's ``predictions`` of a
        ``from_logits`` loss), the prediction saved at ``step``."""
        saved = set(self.base_trial.tensor_names(step=step))
        out = []
        for feed in loss_feeds(self, step, self.loss_regex):
            candidate = (feed.prediction, feed.class_axis)
            if not feed.probabilities and feed.prediction in saved and candidate not in out:
                out.append(candidate)
        return out

    def _distribution_rows(self, value: np.ndarray, class_axis: int = 1) -> bool:
        """Whether every row of ``value`` along its class axis is a probability distribution."""
        v = np.asarray(value, dtype=np.float64)
        if v.ndim == 0 or v.size == 0:
            return False
        axis = class_axis if v.ndim >= 2 else 0
        if v.shape[axis] < self.min_classes or not np.all(np.isfinite(v)):
            return False
        if v.min() < -self.tolerance:
            return False
        return bool(np.all(np.abs(v.sum(axis=axis) - 1.0) <= self.tolerance))

    def invoke_at_step(self, step: int) -> bool:
        mode = self.step_mode(step)
        for name, class_axis in self._loss_inputs(step):
            steps = self.same_mode_steps(name, step, mode)[-self.num_steps :]
            if len(steps) < self.num_steps or steps[-1] != step:
                continue
            values = [self.value(name, s) for s in steps]
            if any(v is None for v in values):
                continue
            if all(self._distribution_rows(v, class_axis) for v in values):
                classes = np.asarray(values[-1]).shape[class_axis if np.ndim(values[-1]) >= 2 else 0]
                self.report_issue(
                    f"{name} ({mode.name}): every row over {classes} classes is a probability distribution "
                    f"(entries >= 0, sums 1 within {self.fmt(self.tolerance)}) at steps "
                    f"{steps[0]}..{steps[-1]} ({self.num_steps} saved steps): the loss expects logits",
                    tensor=name,
                    steps=steps,
                )
                return True
        return False
