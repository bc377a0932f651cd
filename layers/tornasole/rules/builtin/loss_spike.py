"""LossSpike: the loss jumped far above what the run has shown so far.

Two published criteria, either of which fires (set one's parameter to 0 to turn it off):

* **Megatron-LM's factor** (``megatron/core/rerun_state_machine.py``,
  ``RerunStateMachine.is_unexpectedly_large``, called with ``threshold=10`` on the loss by
  ``pretrain_gpt.py``'s ``loss_func`` when ``check_for_spiky_loss`` is on): the loss is above
  ``factor`` times the largest loss among the run's first ``factor_samples`` values. Here those are
  the first ``factor_samples`` saved steps of the step's mode; before that many exist, the largest of
  those saved so far.
* **OLMo-core's z-score** (``olmo_core/train/callbacks/stability_monitor.py``,
  ``StabilityMonitorCallback._is_spike``): the loss is above the mean of the previous ``window``
  values by more than ``z_threshold`` of their (population) standard deviations; a window whose
  standard deviation is below 1e-10 judges nothing. OLMo-core waits for a full window (128 values);
  Tornasole judges from ``min_window`` values on, so a run saved every few steps is judged before its
  128th save (a short window is noisier: raise ``min_window`` for noisy losses).

**Where the z-score misleads** (``rise_factor``, off by default: 0). The z-score reads the window as
roughly Gaussian. Where each saved loss is one sample's (batch 1) or a few samples', the window is skewed:
most losses near 0, a few misclassified samples far above them. A healthy misclassified sample then sits
6 standard deviations above the mean (``bench/detection``'s ``hard_batch1_sgd``: z 6.1-6.5, 2.6 to 10
times the window's mean). With ``rise_factor``, the z-score fires only when the loss's rise above the
window's mean is at least ``rise_factor`` times the largest rise *inside* the window: the spike must leave
the range the run has shown, in the spirit of Megatron-LM's factor over the largest loss seen. On a
Gaussian window of 128 the largest rise is about 2.6 standard deviations, so 6 sigma is about 2.3 times it;
the healthy one-sample windows above give 1.1-2.4, a bad batch of random tokens on a language model's
plateau 8.0-10.0 (``bench/detection/families/lm.py``). A window that still holds the run's early descent,
or an earlier spike, raises the bar: the z-score then catches only a rise well beyond those.

**Keras's running mean** (Tornasole's addition). The Keras hook saves the batch logs' ``loss``, which
Keras reports as a running mean over the epoch so far: smooth within an epoch, and one batch's value again at
the first batch of the next. Against a window of smooth means, that one batch is a spike of many standard
deviations whenever batches are small (the families benchmark's attention_keras at batch 4: 0.0072 against
a running mean of 0.0040, at a loss of 1/200 of its start). The published criteria read each step's own
loss. So where the trial also holds the batch's own compiled loss, ``batch_loss/<Kind>``
(:mod:`tornasole.keras.loss_tap`; one kind), the rule judges that series, at the steps that save it, in
``loss``'s place; elsewhere (the hook's epoch-end save of the logs, a trial without it) ``loss`` as saved.

A non-finite loss fires too (Megatron checks it first, ``check_for_nan_in_loss``). Each loss tensor
(the ``losses`` collection, ``collection_names``, ``tensor_regex``) is judged alone, at the saved
steps of its own mode (a validation loss against validation losses).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tornasole.modes import GLOBAL, ModeKeys
from tornasole.rules.builtin.base import COLLECTION_NAMES, TENSOR_REGEX, BuiltinRule
from tornasole.rules.builtin.losses import KERAS_BATCH_LOSS, loss_names
from tornasole.rules.builtin.series import RecentMemo, series
from tornasole.rules.params import Param

__all__ = ["LossSpike"]

#: Saved steps of another mode (a validation phase) the evaluator loads besides the window.
OTHER_MODE_ROOM = 16
#: The Keras hook's name for the batch logs' loss: Keras's running mean over the epoch.
KERAS_RUNNING_LOSS = "loss"


class LossSpike(BuiltinRule):
    """Fires when a loss exceeds ``factor`` x its early maximum, or ``z_threshold`` sigmas over its window.

    Examples
    --------
    >>> # invoke_rule(LossSpike(trial, factor="10", z_threshold="6", window="128"))
    """

    LIKELY_CAUSE = (
        "the loss of {tensor} spiked: a bad batch (corrupt or mislabelled data), a learning rate too high "
        "for this stage, or an instability in attention/normalisation"
    )
    SUGGESTED_FIX = (
        "inspect the batch of the spike step, lower the peak learning rate or lengthen warmup, clip "
        "gradients (max norm 1.0), or restart from the last checkpoint skipping that data"
    )

    PARAMETERS = (
        COLLECTION_NAMES,
        TENSOR_REGEX,
        Param("use_losses_collection", "bool", "True", "also inspect the losses collection"),
        Param(
            "factor",
            "float",
            "10",
            "fire above this multiple of the largest first factor_samples losses (Megatron-LM; 0: off)",
        ),
        Param("factor_samples", "int", "100", "how many first saved losses set the factor's reference"),
        Param(
            "z_threshold",
            "float",
            "6",
            "fire above the window's mean by this many standard deviations (OLMo-core; 0: off)",
        ),
        Param("window", "int", "128", "previous saved losses of the mode the z-score is computed over"),
        Param("min_window", "int", "32", "previous saved losses needed before the z-score judges"),
        Param(
            "rise_factor",
            "float",
            "0",
            "the z-score fires only when the rise over the window's mean is at least this multiple of the "
            "window's own largest rise (0: off)",
        ),
    )

    def __init__(self, base_trial: Any, other_trials: Any = None, **params: Any) -> None:
        super().__init__(base_trial, other_trials=other_trials, **params)
        # the window's values (read ``window`` times each: RecentMemo says why), a few losses' worth
        self._recent = RecentMemo(8 * (self.window + 1 + OTHER_MODE_ROOM))
        # the first ``factor_samples`` values of each loss, the factor's reference at every step
        self._first: dict[tuple[str, int], float | None] = {}

    def scalar(self, name: str, step: int, trial: Any = None, mode: ModeKeys = GLOBAL) -> float | None:
        if trial is not None or mode != GLOBAL:
            return super().scalar(name, step, trial, mode)
        return self._recent.get((name, step), lambda: BuiltinRule.scalar(self, name, step))

    def _first_scalar(self, name: str, step: int) -> float | None:
        key = (name, step)
        if key not in self._first:
            self._first[key] = BuiltinRule.scalar(self, name, step)
        return self._first[key]

    def check_params(self) -> None:
        self.require_at_least(0, "factor", "z_threshold", "rise_factor")
        self.require_at_least(1, "factor_samples", "window", "min_window")
        if self.min_window > self.window:
            raise self.param_error("min_window", f"value {self.min_window} must be <= window ({self.window})")

    def history_steps(self) -> int | None:
        return self.window + OTHER_MODE_ROOM

    def leading_steps(self) -> int:
        return self.factor_samples if self.factor else 0

    def invoke_at_step(self, step: int) -> bool:
        judged: list[str] = []
        for name in loss_names(self, self.use_losses_collection):
            if step not in self.same_mode_steps(name, step):
                continue
            name = self._batch_loss_of(name, step)
            if name not in judged:
                judged.append(name)
                if self._judge(name, step):
                    return True
        return False

    def _batch_loss_of(self, name: str, step: int) -> str:
        """The series judged for loss ``name`` at ``step``: for Keras's running ``loss``, the batch's own
        ``batch_loss/<Kind>`` when exactly one is saved at ``step`` (the module docstring says why); else
        ``name`` itself (the Keras hook's epoch-end save of the logs holds no batch loss)."""
        if name != KERAS_RUNNING_LOSS:
            return name
        batch = [n for n in self.base_trial.tensor_names(step=step) if KERAS_BATCH_LOSS.match(n)]
        return batch[0] if len(batch) == 1 else name

    def _judge(self, name: str, step: int) -> bool:
        recent = series(self, name, step, self.window)
        if not recent or recent[-1][0] != step:
            return False
        loss = recent[-1][1]
        if not math.isfinite(loss):
            self.report_issue(f"{name} is {loss} at step {step}", tensor=name, value=loss)
            return True
        if self.factor:
            first_steps = [s for s in self.same_mode_steps(name, step)[: self.factor_samples] if s != step]
            read = (self._first_scalar(name, s) for s in first_steps)
            first = [v for v in read if v is not None and math.isfinite(v)]
            if first and max(first) > 0 and loss > self.factor * max(first):
                self.report_issue(
                    f"{name} = {self.fmt(loss)} at step {step} > factor {self.fmt(self.factor)} x "
                    f"the largest of its first {len(first)} saved values ({self.fmt(max(first))})",
                    tensor=name,
                    value=loss,
                    reference=max(first),
                    criterion="factor",
                )
                return True
        if self.z_threshold:
            previous = np.array([v for _, v in recent[:-1] if math.isfinite(v)], dtype=np.float64)
            if previous.size >= self.min_window:
                mean, std = float(previous.mean()), float(previous.std())
                largest_rise = float(previous.max()) - mean
                if (
                    std >= 1e-10
                    and loss > mean + self.z_threshold * std
                    and loss - mean >= self.rise_factor * largest_rise
                ):
                    z = (loss - mean) / std
                    beyond = (
                        f", {self.fmt((loss - mean) / largest_rise)} x their largest rise "
                        f"(rise_factor {self.fmt(self.rise_factor)})"
                        if self.rise_factor and largest_rise > 0
                        else ""
                    )
                    self.report_issue(
                        f"{name} = {self.fmt(loss)} at step {step} is {self.fmt(z)} standard "
                        f"deviations above the mean of its previous {previous.size} saved values "
                        f"({self.fmt(mean)} +/- "
                        f"{self.fmt(std)}; z_threshold {self.fmt(self.z_threshold)}){beyond}",
                        tensor=name,
                        value=loss,
                        z_score=z,
                        criterion="z_score",
                    )
                    return True
        return False
