"""GradientNormSpike: the gradient norm jumped far above its recent level.

Criterion (Megatron-LM's: ``megatron/core/rerun_state_machine.py``,
``RerunStateMachine.is_unexpectedly_large``, applied to gradient norms with ``threshold=10`` by the
optimizer's ``check_for_large_grads``): the norm at the step is above ``factor`` times a reference
computed over the previous ``window`` saved steps of the step's mode: their median (``reference=median``,
the default: robust to one earlier spike and to the large norms of the first steps) or their maximum
(``reference=max``, Megatron's reading). Judged from ``min_window`` previous values on.

Why the recommended set takes ``reference=max``: the total norm of batches of a few samples moves by 10x
over its median on healthy runs (the classic families' 156 built-healthy runs: 14 alarms with the median,
``bench/detection``'s calibration and development splits: 9), while none of them rose to 10x the largest
norm of its window (none of the classic families' to 5x), and a one-step spike of a language model (the
loss of one step x1000) is hundreds of times it. The maximum is the range the run has already shown; a
spike must leave it.

What is judged:

* the **total** norm: ``grad_norm/total`` when the hook saved it (the LLM preset does), else the L2
  norm over every tensor of the ``gradients`` collection saved at the step (each read in full, or
  from its saved ``l2`` reduction: the statistics mode's);
* with ``per_layer`` (off by default), also each gradient tensor, and each ``grad_norm/<parameter>``
  scalar, alone. Why off: Megatron-LM judges the whole gradient norm, and one small layer's norm (a bias
  under batches of 4) moves by 10x on healthy runs: on the classic families' 54 runs built healthy
  (``lm_score.py --classic-healthy``, seed 0) per-layer judging alarmed on 9 runs labelled healthy, the
  total alone on 1; on the language-model families both caught every injected gradient-norm spike.

A batch much smaller than the others (``min_batch_fraction``, off by default): the epoch's last batch
of a data set that the batch size does not divide (PyTorch's ``DataLoader`` keeps it: ``drop_last`` is
False by default) averages its loss over a few samples, and under BatchNorm a batch of 2 normalises each
feature to +-1: its gradient norm is a property of the batch's size, not of the training (the families
benchmark's wine, 138 samples in batches of 4: the last batch of 2 reached 15x and 71x the largest norm of
its window on two healthy runs; its other batches stay under 3.6x). Such a step is not judged and its norm
is left out of later windows when its batch (axis 0 of a ``batch_regex`` tensor saved at the step: the
model's input, shape only) is at most ``min_batch_fraction`` x the largest batch among the window's steps
(the recommended set: 0.5, designed on wine and iris). A step whose batch is not saved is judged as
before: a run that saves no model input keeps the published criterion.

A non-finite norm is not judged (a step an fp16 loss scaler skipped has infinite gradients by design;
a NaN is ExplodingTensor's and NonFiniteOrigin's), and is left out of later windows. ``min_norm``
ignores norms below it (a layer whose gradient is tiny can grow by 10x without being a spike).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tornasole.core.llm_signals import GRAD_NORM, GRAD_NORM_TOTAL, signal_regex
from tornasole.exceptions import TensorUnavailableForStep
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.inputs_not_normalized import DEFAULT_MODEL_INPUT_REGEX
from tornasole.rules.builtin.series import RecentMemo, names_matching, scalar_at
from tornasole.rules.params import Param

__all__ = ["GradientNormSpike"]

OTHER_MODE_ROOM = 16
TOTAL = "total gradient norm"


class GradientNormSpike(BuiltinRule):
    """Fires when the total (or one layer's) gradient norm exceeds ``factor`` x its recent median or max.

    Examples
    --------
    >>> # invoke_rule(GradientNormSpike(trial, factor="10", window="128", per_layer="True"))
    """

    LIKELY_CAUSE = (
        "the gradient norm of {tensor} spiked: a bad batch, a learning rate too high, or an instability "
        "(attention logits growing, a loss scale too high)"
    )
    SUGGESTED_FIX = (
        "clip gradients (torch.nn.utils.clip_grad_norm_, max norm 1.0), lower the learning rate or lengthen "
        "warmup, and inspect the batch of the spike step"
    )

    PARAMETERS = (
        Param("factor", "float", "10", "fire above this multiple of the reference (Megatron-LM: 10)"),
        Param("reference", "str", "median", "median or max of the previous window's norms"),
        Param("window", "int", "128", "previous saved steps of the mode the reference is computed over"),
        Param("min_window", "int", "8", "previous saved norms needed before judging"),
        Param("per_layer", "bool", "False", "also judge each gradient tensor's norm alone"),
        Param("min_norm", "float", "0", "norms at or below this are not judged"),
        Param(
            "min_batch_fraction",
            "float",
            "0",
            "a step whose batch is at most this fraction of the window's largest is not judged (0: off)",
        ),
        Param("batch_regex", "regex", DEFAULT_MODEL_INPUT_REGEX, "tensors whose axis 0 is the step's batch"),
    )
    COLLECTIONS = (("gradients", {"save_interval": "1"}),)

    def __init__(self, base_trial: Any, other_trials: Any = None, **params: Any) -> None:
        super().__init__(base_trial, other_trials=other_trials, **params)
        # step -> {tensor: its norm} and step -> the computed total, for the steps of the recent windows
        # (each is read ``window`` times: RecentMemo says why); both modes' windows fit
        steps = 2 * (self.window + 1 + OTHER_MODE_ROOM)
        self._norms = RecentMemo(steps)
        self._totals = RecentMemo(steps)
        self._batches = RecentMemo(steps)

    def check_params(self) -> None:
        if self.reference not in ("median", "max"):
            raise self.param_error("reference", f"value {self.reference!r} is not one of median, max")
        self.require_at_least(1, "window", "min_window")
        self.require_at_least(0, "min_norm")
        if not 0 <= self.min_batch_fraction < 1:
            raise self.param_error("min_batch_fraction", f"value {self.min_batch_fraction} must be in [0, 1)")
        if self.factor <= 1:
            raise self.param_error("factor", f"value {self.factor} must be > 1")

    def history_steps(self) -> int | None:
        return self.window + OTHER_MODE_ROOM

    # -- the signals -------------------------------------------------------------------------------
    def _gradients(self, step: int) -> list[str]:
        return self.names_at(step, ["gradients"])

    def _total_name(self, step: int) -> str | None:
        found = names_matching(self, step, signal_regex(GRAD_NORM_TOTAL))
        return found[0] if found else None

    def _norm_of(self, name: str, step: int) -> float | None:
        """A scalar ``grad_norm/<p>`` as saved; a gradient tensor's L2 norm from its values or ``l2``.
        Remembered: every step's window reads the same saved norms again."""
        at_step = self._norms.get(step, dict)
        if name not in at_step:
            at_step[name] = self._read_norm(name, step)
        return at_step[name]

    def _read_norm(self, name: str, step: int) -> float | None:
        if signal_regex(GRAD_NORM, any_suffix=True).match(name):
            return self.scalar(name, step)
        v = self.value(name, step)
        if v is not None:
            return float(np.linalg.norm(v.astype(np.float64).ravel())) if v.size else None
        return scalar_at(self, name, step, "l2")

    def _computed_total(self, step: int) -> float | None:
        return self._totals.get(step, lambda: self._read_total(step))

    def _read_total(self, step: int) -> float | None:
        norms = [self._norm_of(n, step) for n in self._gradients(step)]
        norms = [n for n in norms if n is not None]
        return math.sqrt(sum(n * n for n in norms)) if norms else None

    def _signals(self, step: int) -> list[tuple[str, str | None]]:
        """``(label, tensor or None for the computed total)`` pairs judged at ``step``."""
        total = self._total_name(step)
        out: list[tuple[str, str | None]] = []
        if self.per_layer:  # layers first: a finding that names the layer says where to look
            per = names_matching(self, step, signal_regex(GRAD_NORM, any_suffix=True))
            out += [(n, n) for n in per if n != total] + [(n, n) for n in self._gradients(step)]
        return out + [(total, total) if total else (TOTAL, None)]

    def _history(self, tensor: str | None, step: int) -> list[tuple[int, float | None]]:
        if tensor is not None:
            steps = self.same_mode_steps(tensor, step)[-(self.window + 1) :]
            return [(s, self._norm_of(tensor, s)) for s in steps]
        grads = self._gradients(step)
        if not grads:
            return []
        steps = self.same_mode_steps(grads[0], step)[-(self.window + 1) :]
        return [(s, self._computed_total(s)) for s in steps]

    def _batch_at(self, step: int) -> int | None:
        """Axis 0 of the first ``batch_regex`` tensor saved at ``step`` (its saved shape); None if none."""
        return self._batches.get(step, lambda: self._read_batch(step))

    def _read_batch(self, step: int) -> int | None:
        for name in names_matching(self, step, self.batch_regex):
            try:
                shape = self.base_trial.tensor(name).shape(step)
            except (TensorUnavailableForStep, KeyError, ValueError):  # no readable shape: no batch size
                continue
            if shape:
                return int(shape[0])
        return None

    def _full_batches(self, history: list[tuple[int, float | None]]) -> list[tuple[int, float | None]]:
        """``history`` without the steps whose batch is at most ``min_batch_fraction`` x the largest batch
        among its steps (all of it when the fraction is 0 or no batch was saved)."""
        if self.min_batch_fraction <= 0:
            return history
        batches = {s: self._batch_at(s) for s, _ in history}
        known = [b for b in batches.values() if b]
        if not known:
            return history
        floor = self.min_batch_fraction * max(known)
        return [(s, v) for s, v in history if batches[s] is None or batches[s] > floor]

    # -- judging -----------------------------------------------------------------------------------
    def invoke_at_step(self, step: int) -> bool:
        for label, tensor in self._signals(step):
            history = self._history(tensor, step)
            if not history or history[-1][0] != step:
                continue
            history = self._full_batches(history)
            if not history or history[-1][0] != step:
                continue  # a batch much smaller than the others: its norm is its size's
            norm = history[-1][1]
            if norm is None or not math.isfinite(norm) or norm <= self.min_norm:
                continue
            previous = [v for _, v in history[:-1] if v is not None and math.isfinite(v)]
            if len(previous) < self.min_window:
                continue
            ref = float(np.median(previous)) if self.reference == "median" else max(previous)
            if ref > 0 and norm > self.factor * ref:
                self.report_issue(
                    f"{label} = {self.fmt(norm)} at step {step} > factor {self.fmt(self.factor)} x the "
                    f"{self.reference} of its previous {len(previous)} saved values ({self.fmt(ref)})",
                    tensor=label,
                    value=norm,
                    reference=ref,
                )
                return True
        return False
