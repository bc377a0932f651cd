"""Labels from the published criteria, computed *during* training (never by the rules under test).

Each criterion is re-implemented from its paper's description (facts only; no code copied):

* AUTOTRAINER (Zhang et al., ICSE'21), checks every 3 epochs from 30% of training (epochs 3, 6, 9, ... once
  30% is reached), a gradient problem counted only when accuracy is not converging (best validation and best
  training accuracy so far both < 0.6) or converging slowly (both accuracies' best epoch-to-epoch gain
  < 0.01):
  - ``vanishing``: first-layer / last-layer gradient-norm ratio < 1e-3 and first-layer norm < 1e-4;
  - ``exploding``: that ratio > 70, or loss >= 1e3;
  - ``dying_relu``: >= 70% of all gradient entries exactly 0 (every layer's kernel and bias gradients
    counted together, as AUTOTRAINER's monitor does);
  - ``oscillating``: swings of the epoch's *training* accuracy (what a Keras history calls ``acc``, the
    accuracy AUTOTRAINER's monitor reads for this check): the local maxima and the local minima of the
    accuracy curve, taken in order and paired (first maximum with first minimum, ...), differ by >= 0.03 in
    at least 0.2 x the epochs so far;
  - ``slow``: the best epoch-to-epoch gain of the validation accuracy *and* of the training accuracy are
    both < 0.01, and the maximum validation *and* training accuracies are both < 0.6 (AUTOTRAINER's
    ``not_converge and sc_accuracy``).

  Second revision of the benchmark (bench/journal/detection.md), to follow AUTOTRAINER's published monitor:
  the first revision checked every epoch, read the validation accuracy alone for oscillation and slow
  convergence, and judged dying ReLU per ReLU layer's kernel gradients.
* DeepDiagnosis (Wardat et al., ICSE'22), per epoch:
  - ``saturation``: > 50% of tanh/sigmoid pre-activations beyond +-5 (every fifth epoch);
  - ``nan``: NaN or Inf in the loss, weights or gradients (also DeepLocalize);
  - ``unchanged``: a layer's weights constant over the last 5 training steps.
* UMLAUT (Schoop et al., CHI'21): ``overfit``: at an epoch's end, the validation loss rose since the previous
  epoch while the training loss (the epoch's mean) did not (``umlaut/heuristics.py``, ``check_overfitting``:
  ``d_val_loss > 0`` and ``d_loss <= 0``, one epoch against the one before). Until the fifteenth revision
  the label required three rising epochs running, which UMLAUT does not; that reading is kept as the variant
  ``overfit_3_epochs`` (:attr:`Monitor.variants`, never a label), for the second column of the families
  benchmark. On a small validation set the published criterion flags ordinary noise (a 48-sample validation
  loss rises in some epoch of nearly every run): that is the criterion's behaviour, reported, not changed.

Audit against the sources (fifteenth revision; ``shiningrain/AUTOTRAINER`` ``AutoTrainer/utils/monitor.py``,
``DeepDiagnosis/ICSE2022`` ``callback/callbacks.py``, ``BerkeleyHCI/umlaut`` ``umlaut/heuristics.py``):

* AUTOTRAINER's gate on gradient symptoms is ``not_converge or sc_accuracy`` (``judge_issue``), where
  ``not_converge`` is *both* maximum validation accuracy and maximum training accuracy below the satisfied
  accuracy (``loss_issue``) and ``sc_accuracy`` is both accuracies' largest epoch-to-epoch gain below 0.01;
  its slow convergence is ``not_converge and sc_accuracy``. Until the fifteenth revision the gate and the
  slow label read the validation accuracy alone (and no ``sc_accuracy`` in the gate): fixed.
* DeepDiagnosis checks saturation when its epoch counter (from 1) is a multiple of 5, i.e. at the end of
  epochs 5, 10, ... (``on_epoch_end``, ``counter % N == 0``, ``N = 5``): fixed (it was every epoch). It reads
  the first training batch in inference mode; the label reads the validation pass (the same inputs'
  distribution; an extra forward pass would add a step to the trace the rules read): a departure, kept.
* DeepDiagnosis's "unchanged" compares, in its code, the mean of the last 5 epoch-end copies of a layer's
  weights with their maximum (``meanResult``), which holds only when every entry of every copy is equal,
  not when a layer stopped changing; the paper describes a layer whose values stay constant over the last
  5 observations. The label follows the paper (a trainable kernel equal over 5 training steps): a
  departure from the code, kept and said.

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
SLOW_GAIN = 0.01  # AUTOTRAINER's delta: the largest epoch-to-epoch accuracy gain of a slow run
SATURATION_EVERY = 5  # DeepDiagnosis's N: saturation judged at the end of epochs 5, 10, ... (1-based)


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
    #: Readings of a criterion other than the source's, recorded for a second column, never a label.
    variants: dict[str, int] = field(default_factory=dict)
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
        if (epoch + 1) % SATURATION_EVERY == 0:
            for name, a in act_inputs.items():
                if ("tanh" in name or "sigmoid" in name) and a.size and np.mean(np.abs(a) > 5) > 0.5:
                    self._label("saturation", step)
        tl, vl = self.train_loss, self.val_loss
        if len(vl) >= 2 and vl[-1] - vl[-2] > 0 and tl[-1] - tl[-2] <= 0:
            self._label("overfit", step)
        if len(vl) >= 4 and vl[-1] > vl[-2] > vl[-3] > vl[-4] and tl[-1] < tl[-2] < tl[-3] < tl[-4]:
            self.variants.setdefault("overfit_3_epochs", step)
        if (epoch + 1) < 0.3 * self.epochs or (epoch + 1) % CHECK_EVERY:
            return
        acc, train = self.val_acc, self.train_acc
        not_converge = max(acc) < NOT_CONVERGING_ACC and max(train) < NOT_CONVERGING_ACC
        sc_accuracy = max_gain(acc) < SLOW_GAIN and max_gain(train) < SLOW_GAIN
        if not_converge or sc_accuracy:
            for name, s in self._pending.items():
                self._label(name, s, held=step)
        if self.oscillation and oscillating(self.train_acc):
            self._label("oscillating", step)
        if not_converge and sc_accuracy:
            self._label("slow", step)

    @property
    def onset(self) -> int | None:
        return min(self.labels.values()) if self.labels else None

    @property
    def established(self) -> int | None:
        """The first step at which a criterion was established (``held``)."""
        return min(self.held.values()) if self.held else None
