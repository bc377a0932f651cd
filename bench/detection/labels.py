"""Labels from the published criteria, computed *during* training (never by the rules under test).

Each criterion is re-implemented from its paper's description (facts only; no code copied):

* AUTOTRAINER (Zhang et al., ICSE'21), checks every 3 epochs from 30% of training (epochs 3, 6, 9, ... once
  30% is reached), a gradient problem counted only when accuracy is not converging (here: best validation
  accuracy so far < 0.6, its slow-convergence bound):
  - ``vanishing``: first-layer / last-layer gradient-norm ratio < 1e-3 and first-layer norm < 1e-4;
  - ``exploding``: that ratio > 70, or loss >= 1e3;
  - ``dying_relu``: >= 70% of all gradient entries exactly 0 (every layer's kernel and bias gradients
    counted together, as AUTOTRAINER's monitor does);
  - ``oscillating``: swings of the epoch's *training* accuracy (what a Keras history calls ``acc``, the
    accuracy AUTOTRAINER's monitor reads for this check): the local maxima and the local minima of the
    accuracy curve, taken in order and paired (first maximum with first minimum, ...), differ by >= 0.03 in
    at least 0.2 x the epochs so far;
  - ``slow``: the best epoch-to-epoch gain of the validation accuracy *and* of the training accuracy are
    both < 0.01 (AUTOTRAINER requires both), and maximum validation accuracy < 0.6.

  Second revision of the benchmark (bench/journal/detection.md), to follow AUTOTRAINER's published monitor:
  the first revision checked every epoch, read the validation accuracy alone for oscillation and slow
  convergence, and judged dying ReLU per ReLU layer's kernel gradients.
* DeepDiagnosis (Wardat et al., ICSE'22), per epoch:
  - ``saturation``: > 50% of tanh/sigmoid pre-activations beyond +-5;
  - ``nan``: NaN or Inf in the loss, weights or gradients (also DeepLocalize);
  - ``unchanged``: a layer's weights constant over the last 5 training steps.
* UMLAUT (Schoop et al., CHI'21): ``overfit``: validation loss rising while training loss falls (our reading:
  in three consecutive epochs, so noisy validation passes are not a label).

A run is *broken* when any criterion holds at some point; its onset is the first training step (global step
of the trial) at which the first criterion held, a gradient symptom counted from its own step even though
AUTOTRAINER confirms it only at a later check. ``held`` (twelfth revision) keeps, per criterion, the step
where the criterion was established: the check, for a gradient symptom waiting for non-convergence (no
monitor running the criterion can know it earlier); the same step as the label for every other criterion.
Labels are per seed (AUTOTRAINER's ``Motivation/`` shows the same model dying in some seeds only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

NOT_CONVERGING_ACC = 0.6
CHECK_EVERY = 3  # epochs between AUTOTRAINER's checks


def max_gain(acc: list[float]) -> float:
    """The largest epoch-to-epoch rise (0 when it never rose)."""
    return max([0.0, *(b - a for a, b in zip(acc, acc[1:]))])


def oscillating(acc: list[float], threshold: float = 0.03, rate: float = 0.2) -> bool:
    """AUTOTRAINER's unstable-accuracy test: paired local maxima and minima differ by ``threshold`` in
    at least ``rate`` x len(acc) pairs (endpoints are neither; a flat stretch is both).

    >>> oscillating([0.5, 0.6, 0.5, 0.6, 0.5])
    True
    >>> oscillating([0.5, 0.6, 0.7, 0.8, 0.9])
    False
    """
    inner = range(1, len(acc) - 1)
    maxima = [acc[i] for i in inner if acc[i] >= acc[i - 1] and acc[i] >= acc[i + 1]]
    minima = [acc[i] for i in inner if acc[i] <= acc[i - 1] and acc[i] <= acc[i + 1]]
    count = sum(1 for hi, lo in zip(maxima, minima) if hi - lo >= threshold)
    return count >= rate * len(acc)


@dataclass
class Monitor:
    """Fed by the training loop; ``labels`` maps a criterion to the global step where it first held."""

    epochs: int
    #: Whether "accuracy" is a classifier's accuracy: AUTOTRAINER's oscillation test (swings of 0.03) is
    #: defined on one; the families benchmark turns it off for a regression's or an autoencoder's R^2.
    oscillation: bool = True
    labels: dict[str, int] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)  # criterion -> step where it was established
    _pending: dict[str, int] = field(default_factory=dict)  # gradient symptoms waiting for non-convergence
    _weights: dict[str, list[np.ndarray]] = field(default_factory=dict)
    val_acc: list[float] = field(default_factory=list)
    train_acc: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)

    def _label(self, name: str, step: int, held: int | None = None) -> None:
        if name not in self.labels:
            self.labels[name] = step
            self.held[name] = step if held is None else held

    def train_step(
        self,
        step: int,
        loss: float,
        grads: dict[str, np.ndarray],
        weights: dict[str, np.ndarray],
        all_grads: dict[str, np.ndarray],
        act_inputs: dict[str, np.ndarray],
    ) -> None:
        """After backward: the layer kernel gradients in order (first..last), weights, and every gradient
        array (kernels and biases)."""
        arrays = [*grads.values(), *weights.values()]
        if not math.isfinite(loss) or any(not np.all(np.isfinite(a)) for a in arrays):
            self._label("nan", step)
            return
        if loss >= 1e3:
            self._label("exploding", step)
        norms = [float(np.linalg.norm(g)) for g in grads.values()]
        if len(norms) >= 2 and norms[-1] > 0:
            ratio = norms[0] / norms[-1]
            if ratio < 1e-3 and norms[0] < 1e-4:
                self._pending.setdefault("vanishing", step)
            if ratio > 70:
                self._pending.setdefault("exploding", step)
        total = sum(g.size for g in all_grads.values())
        if total and sum(int(np.sum(g == 0)) for g in all_grads.values()) / total >= 0.7:
            self._pending.setdefault("dying_relu", step)
        for name, w in weights.items():
            hist = self._weights.setdefault(name, [])
            hist.append(w.copy())
            del hist[:-5]
            if len(hist) == 5 and all(np.array_equal(hist[0], h) for h in hist[1:]):
                self._label("unchanged", step)
        self._last_step = step
        self._acts = act_inputs

    def epoch_end(
        self,
        epoch: int,
        step: int,
        train_loss: float,
        val_loss: float,
        val_acc: float,
        act_inputs: dict[str, np.ndarray],
        train_acc: float,
    ) -> None:
        """After the validation pass of ``epoch`` (0-based); ``step`` is the last training step's;
        ``train_acc`` is the epoch's training accuracy (every training batch's predictions, as it trained)."""
        self.train_acc.append(train_acc)
        self.train_loss.append(train_loss)
        self.val_loss.append(val_loss)
        self.val_acc.append(val_acc)
        for name, a in act_inputs.items():
            if ("tanh" in name or "sigmoid" in name) and a.size and np.mean(np.abs(a) > 5) > 0.5:
                self._label("saturation", step)
        tl, vl = self.train_loss, self.val_loss
        if len(vl) >= 4 and vl[-1] > vl[-2] > vl[-3] > vl[-4] and tl[-1] < tl[-2] < tl[-3] < tl[-4]:
            self._label("overfit", step)
        if (epoch + 1) < 0.3 * self.epochs or (epoch + 1) % CHECK_EVERY:
            return
        acc = self.val_acc
        not_converging = max(acc) < NOT_CONVERGING_ACC
        if not_converging:
            for name, s in self._pending.items():
                self._label(name, s, held=step)
        if self.oscillation and oscillating(self.train_acc):
            self._label("oscillating", step)
        if max_gain(acc) < 0.01 and max_gain(self.train_acc) < 0.01 and max(acc) < NOT_CONVERGING_ACC:
            self._label("slow", step)

    @property
    def onset(self) -> int | None:
        return min(self.labels.values()) if self.labels else None

    @property
    def established(self) -> int | None:
        """The first step at which a criterion was established (``held``)."""
        return min(self.held.values()) if self.held else None
