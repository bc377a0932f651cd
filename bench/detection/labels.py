"""Labels from the published criteria, computed *during* training (never by the rules under test).

Each criterion is re-implemented from its paper's description (facts only; no code copied):

* AUTOTRAINER (Zhang et al., ICSE'21), checks from 30% of training, a gradient problem counted only when
  accuracy is not converging (here: best validation accuracy so far < 0.6, its slow-convergence bound):
  - ``vanishing``: first-layer / last-layer gradient-norm ratio < 1e-3 and first-layer norm < 1e-4;
  - ``exploding``: that ratio > 70, or loss >= 1e3;
  - ``dying_relu``: >= 70% of a ReLU layer's weight-gradient entries exactly 0;
  - ``oscillating``: validation-accuracy swings (local maximum - neighbouring minimum >= 0.03) number at
    least 0.2 x epochs;
  - ``slow``: best epoch-to-epoch accuracy gain < 0.01 and maximum accuracy < 0.6.
* DeepDiagnosis (Wardat et al., ICSE'22), per epoch:
  - ``saturation``: > 50% of tanh/sigmoid pre-activations beyond +-5;
  - ``nan``: NaN or Inf in the loss, weights or gradients (also DeepLocalize);
  - ``unchanged``: a layer's weights constant over the last 5 training steps.
* UMLAUT (Schoop et al., CHI'21): ``overfit``: validation loss rising while training loss falls (our reading:
  in three consecutive epochs, so noisy validation passes are not a label).

A run is *broken* when any criterion holds at some point; its onset is the first training step (global step
of the trial) at which the first criterion held. Labels are per seed (AUTOTRAINER's ``Motivation/`` shows the
same model dying in some seeds only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

NOT_CONVERGING_ACC = 0.6


@dataclass
class Monitor:
    """Fed by the training loop; ``labels`` maps a criterion to the global step where it first held."""

    epochs: int
    labels: dict[str, int] = field(default_factory=dict)
    _pending: dict[str, int] = field(default_factory=dict)  # gradient symptoms waiting for non-convergence
    _weights: dict[str, list[np.ndarray]] = field(default_factory=dict)
    val_acc: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)

    def _label(self, name: str, step: int) -> None:
        self.labels.setdefault(name, step)

    def train_step(
        self,
        step: int,
        loss: float,
        grads: dict[str, np.ndarray],
        weights: dict[str, np.ndarray],
        relu_grads: dict[str, np.ndarray],
        act_inputs: dict[str, np.ndarray],
    ) -> None:
        """After backward: the layer gradients in order (first..last), weights, ReLU-layer weight grads."""
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
        for g in relu_grads.values():
            if g.size and np.mean(g == 0) >= 0.7:
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
    ) -> None:
        """After the validation pass of ``epoch`` (0-based); ``step`` is the last training step's."""
        self.train_loss.append(train_loss)
        self.val_loss.append(val_loss)
        self.val_acc.append(val_acc)
        for name, a in act_inputs.items():
            if ("tanh" in name or "sigmoid" in name) and a.size and np.mean(np.abs(a) > 5) > 0.5:
                self._label("saturation", step)
        tl, vl = self.train_loss, self.val_loss
        if len(vl) >= 4 and vl[-1] > vl[-2] > vl[-3] > vl[-4] and tl[-1] < tl[-2] < tl[-3] < tl[-4]:
            self._label("overfit", step)
        if (epoch + 1) < 0.3 * self.epochs:
            return
        acc = self.val_acc
        not_converging = max(acc) < NOT_CONVERGING_ACC
        if not_converging:
            for name, s in self._pending.items():
                self._label(name, s)
        swings = sum(
            1
            for i in range(1, len(acc) - 1)
            if acc[i] > acc[i - 1] and acc[i] > acc[i + 1] and acc[i] - min(acc[i - 1], acc[i + 1]) >= 0.03
        )
        if swings >= 0.2 * self.epochs:
            self._label("oscillating", step)
        gains = [b - a for a, b in zip(acc, acc[1:])]
        if gains and max(gains) < 0.01 and max(acc) < NOT_CONVERGING_ACC:
            self._label("slow", step)

    @property
    def onset(self) -> int | None:
        return min(self.labels.values()) if self.labels else None
