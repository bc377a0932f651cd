"""Overfit: validation loss pulls away from training loss.

Choices: evaluated at EVAL steps (global step >= ``start_step``). The saved
steps of a loss tensor fall into *phases*: maximal runs of consecutive saved
steps of one mode (an epoch's training batches, then its validation pass),
split also where steps of another mode ran unsaved in between (an epoch whose
training steps were all skipped by the save interval). At
an EVAL step e:

* the validation loss is the mean of the tensor's EVAL losses of e's phase,
  judged once, at the step where the phase becomes as long as the shortest
  earlier validation phase (a whole pass when the passes are alike; every
  phase is cut to that length); the first phase, with none before it to
  measure, is judged at each of its steps on its mean so far; and
* the training loss is the mean of the TRAIN losses of the phase just before
  it (the training that produced the validated model),

and ratio = (val - train) / |train| ("mean val loss - mean train loss", as the
documentation says). Means, not the last training batch: a single batch loss
is noisy and, late in an epoch, lower than the epoch's, which made a healthy
run look overfitted. The rule fires at e when the ratio exceeds
``ratio_threshold`` in ``patience`` consecutive validation phases ending with
e's. Why whole phases: judged at each of its steps on its mean so far, the
newest phase's first batch alone (a few dozen samples, one of them
misclassified with a large loss) could decide; judged whole, it cannot (the
detection benchmark's numbers: ``docs/RULES.md``, the recommended set's
calibration).
Loss tensors: ``tensor_regex`` if given, else the ``losses`` collection; each
tensor is judged alone and needs both modes.

``min_difference`` (Tornasole's addition, default 0 = SageMaker's reading):
the gap val - train must also be at least this, in loss units. Why: near a
loss of 0 a ratio means nothing (validation 0.0004 against training 0.0001 is
"300% over" for a model that is right on nearly every sample).
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from tornasole.modes import EVAL, TRAIN
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.losses import loss_names
from tornasole.rules.params import Param

__all__ = ["Overfit", "phases", "trial_phases", "whole_passes"]


def phases(steps_modes: list[tuple[int, object]]) -> list[tuple[object, list[int]]]:
    """Group ``(global step, mode)`` pairs (sorted by step) into runs of one mode.

    Examples
    --------
    >>> phases([(0, "T"), (1, "T"), (2, "E"), (3, "T")])
    [('T', [0, 1]), ('E', [2]), ('T', [3])]
    """
    out: list[tuple[object, list[int]]] = []
    for step, mode in steps_modes:
        if out and out[-1][0] == mode:
            out[-1][1].append(step)
        else:
            out.append((mode, [step]))
    return out


def trial_phases(trial: object, steps: list[int]) -> list[tuple[object, list[int]]]:
    """Phases of a trial's saved global ``steps`` (sorted): runs of one mode, also split where steps of
    another mode ran *unsaved* in between (the global step advanced more than the mode step did).

    Why: with TRAIN saved every few steps, an epoch of few batches may have no saved TRAIN step; the
    validation passes before and after it are then adjacent saved steps of one mode, and grouping by
    saved modes alone made them one "validation phase" (a mean over two passes, one pass fewer).

    The answer is read-only (callers share it). Rules ask at every evaluated step with the steps so far, so
    the phases of a list whose prefix was answered before continue from that answer (:class:`_PhaseMemo`):
    rebuilding them from the first step each time made a rule over a long run quadratic in its length.
    """
    return _PHASES.phases(trial, steps)


_Last = tuple[int, object, "int | None"]


def _extend_phases(
    trial: object, out: list[tuple[object, list[int]]], steps: list[int], prev: _Last | None
) -> _Last | None:
    """Append the phases of ``steps`` to ``out`` (whose last step was ``prev``); returns the new last."""
    for step in steps:
        mode, mode_step = trial.mode(step), trial.mode_step(step)  # type: ignore[attr-defined]
        contiguous = (
            prev is not None
            and prev[1] == mode
            and (mode_step is None or prev[2] is None or step - prev[0] == mode_step - prev[2])
        )
        if contiguous:
            out[-1][1].append(step)
        else:
            out.append((mode, [step]))
        prev = (step, mode, mode_step)
    return prev


class _PhaseMemo:
    """The last few answers of :func:`trial_phases` per trial (one per signal a rule follows), each kept
    with the steps it answered; a trial that cannot be weakly referenced is answered afresh."""

    ENTRIES = 8

    def __init__(self) -> None:
        self._by_trial: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def phases(self, trial: object, steps: list[int]) -> list[tuple[object, list[int]]]:
        try:
            with self._lock:
                entries = self._by_trial.setdefault(trial, [])
        except TypeError:
            out: list[tuple[object, list[int]]] = []
            _extend_phases(trial, out, steps, None)
            return out
        with self._lock:
            best = None
            for entry in entries:
                known = entry[0]
                longer = best is None or len(known) > len(best[0])
                if longer and len(known) <= len(steps) and steps[: len(known)] == known:
                    best = entry
        if best is not None and len(best[0]) == len(steps):
            return best[1]
        if best is None:
            out, prev, start = [], None, 0
        else:
            known, answered, prev = best
            start = len(known)
            # a new outer list and a new last phase: the answer handed out before must not change
            out = answered[:-1] + [(answered[-1][0], list(answered[-1][1]))] if answered else []
        prev = _extend_phases(trial, out, steps[start:], prev)
        entry = (list(steps), out, prev)
        with self._lock:
            if best is not None and best in entries:
                entries.remove(best)
            entries.append(entry)
            del entries[: -self.ENTRIES]
        return out


_PHASES = _PhaseMemo()


def whole_passes(passes: list[list[int]]) -> list[list[int]] | None:
    """The validation ``passes`` (each a list of saved steps, the newest last) cut to the shortest one's
    length, or None when the newest pass is not at the step where it is judged: the step where it becomes
    as long as the shortest earlier pass (a whole pass when the passes are alike).

    Why: a pass's first batch is a few dozen samples; judging the newest pass while it lands, on the first
    ``k`` batches of every pass, compared one batch with one batch, and a model that predicts one class for
    the first batch's samples looks flat there while the whole pass moves.

    Examples
    --------
    >>> whole_passes([[10, 11, 12], [20, 21, 22]])
    [[10, 11, 12], [20, 21, 22]]
    >>> whole_passes([[10, 11, 12], [20]]) is None
    True
    >>> whole_passes([[10, 11], [20, 21, 22]]) is None
    True
    """
    if not passes:
        return None
    if len(passes) > 1 and len(passes[-1]) != min(len(p) for p in passes[:-1]):
        return None
    k = min(len(p) for p in passes)
    return [p[:k] for p in passes]


class Overfit(BuiltinRule):
    """Fires when (mean val loss - mean train loss) / train > ``ratio_threshold`` in ``patience`` validations.

    Examples
    --------
    >>> # invoke_rule(Overfit(trial, patience="2", ratio_threshold="0.1"))
    """

    LIKELY_CAUSE = (
        "the validation loss rises while the training loss falls: the model memorises the training set"
    )
    SUGGESTED_FIX = (
        "add regularisation (weight decay, dropout), more data or augmentation, or stop at the best "
        "validation loss"
    )

    PARAMETERS = (
        Param("tensor_regex", "regex", None, "loss tensors (re.match); unset: the losses collection"),
        Param("start_step", "int", "0", "global steps before this are not judged"),
        Param("patience", "int", "1", "consecutive validation phases over the threshold needed"),
        Param("ratio_threshold", "float", "0.1", "(mean val - mean train) / mean train above this counts"),
        Param("min_difference", "float", "0", "mean val - mean train must also be at least this"),
    )

    def check_params(self) -> None:
        self.require_at_least(1, "patience")

    def history_steps(self) -> int | None:
        return None  # whole training and validation phases

    def _mean(self, name: str, steps: list[int]) -> float | None:
        values = [self.scalar(name, s) for s in steps]
        if not values or any(v is None for v in values):
            return None
        return float(np.mean(values))

    def invoke_at_step(self, step: int) -> bool:
        if step < self.start_step or self.base_trial.mode(step) != EVAL:
            return False
        for name in loss_names(self, self.tensor_regex is None):
            gsteps = [s for s in self.base_trial.tensor(name).steps() if self.start_step <= s <= step]
            if not gsteps or gsteps[-1] != step:
                continue
            runs = trial_phases(self.base_trial, gsteps)
            validated = [i for i in range(1, len(runs)) if runs[i][0] == EVAL and runs[i - 1][0] == TRAIN]
            if not validated or runs[validated[-1]][1][-1] != step:
                continue
            evals = whole_passes([runs[i][1] for i in validated])
            if evals is None:
                continue  # the newest validation phase is judged once, whole (see the module docstring)
            pairs = [(runs[i - 1][1], ev) for i, ev in zip(validated, evals)][-self.patience :]
            if len(pairs) < self.patience:
                continue
            found = []
            for train_steps, eval_steps in pairs:
                val, train = self._mean(name, eval_steps), self._mean(name, train_steps)
                if val is None or train is None or train == 0:
                    break
                ratio = (val - train) / abs(train)
                if not (ratio > self.ratio_threshold and val - train >= self.min_difference):
                    break
                found.append((ratio, val, train, train_steps, eval_steps))
            if len(found) == self.patience:
                ratio, val, train, train_steps, eval_steps = found[-1]
                self.report_issue(
                    f"{name}: (mean EVAL loss {self.fmt(val)} over steps {eval_steps[0]}..{eval_steps[-1]} - "
                    f"mean TRAIN loss {self.fmt(train)} over steps {train_steps[0]}..{train_steps[-1]}) / "
                    f"train = {self.fmt(ratio)} > ratio_threshold {self.fmt(self.ratio_threshold)} "
                    f"for {self.patience} validation phase(s)"
                    + (
                        f" (gap >= min_difference {self.fmt(self.min_difference)})"
                        if self.min_difference
                        else ""
                    ),
                    tensor=name,
                    value=ratio,
                    val_loss=val,
                    train_loss=train,
                    threshold=self.ratio_threshold,
                )
                return True
        return False
