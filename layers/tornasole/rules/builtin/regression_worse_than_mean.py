"""RegressionWorseThanMean: after several validation passes, a squared-error model still does no better
than predicting the targets' mean.

Criterion: the coefficient of determination, R^2 = 1 - SSE / SST, where SSE is the sum of squared errors
of the predictions and SST the sum of squared deviations of the targets from their mean (scikit-learn's
``r2_score`` with ``multioutput="variance_weighted"``: one mean per output column). R^2 <= 0 is the
textbook mark of a model no better than the constant predictor that always answers the mean; a fitted
model on held-out data falls below 0 only when it is worse than that constant. A regression or an
autoencoder whose validation R^2 stays at or below 0 after several epochs has learned nothing it can use:
an initialisation so large that its outputs start far off the targets' scale and training cannot bring them
back in time, a learning rate that throws the weights about, inputs on a scale the model cannot use.

Read from the trial: for each loss output ``<Loss>_output_<i>`` of the ``losses`` collection whose name
``loss_regex`` matches (squared-error losses only: ``MSELoss``, Keras's ``mean_squared_error``; R^2 means
nothing for a cross-entropy), the loss module's inputs ``<Loss>_input_0`` (the prediction) and
``<Loss>_input_1`` (the target), as smdebug's PyTorch hook names a registered loss module's inputs; in a
Keras trial the batch loss ``batch_loss/MeanSquaredError`` with ``predictions`` and ``labels``
(:mod:`tornasole.rules.builtin.losses`). Points
are validation passes (EVAL steps grouped by :func:`trial_phases`, each cut to the shortest pass's length
and the newest judged once, whole: :func:`whole_passes`, as ValidationLossNotDecreasing reads them). A
pass's R^2 pools its batches: SSE over every saved batch, SST about the per-column mean of all of the
pass's targets.

Fires at an EVAL step once there are ``min_passes`` passes when each of the newest ``consecutive`` passes
has R^2 <= ``max_r2``. Why patience: a slow starter (a warmup, a small learning rate) is near R^2 = 0 for
its first pass or two; why ``consecutive``: one bad pass of a noisy run is not a verdict.

What stays quiet, and why:

* any model that beats the mean, however slowly it got there (R^2 > 0);
* classifiers: their losses are not matched by ``loss_regex``;
* a run that saves no target (``<Loss>_input_1``): nothing is judged; a batch whose prediction and target
  differ in shape (a broadcasting loss) or hold a non-finite value is left out of its pass. Keras's losses
  bring a ``(N,)`` target to a ``(N, 1)`` output's rank, and so does the rule for a Keras trial.
"""

from __future__ import annotations

import numpy as np

from tornasole.modes import EVAL
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.losses import LossFeed, loss_feeds
from tornasole.rules.builtin.overfit import trial_phases, whole_passes
from tornasole.rules.params import Param

__all__ = ["RegressionWorseThanMean", "pooled_r2"]


def pooled_r2(pairs: list[tuple[np.ndarray, np.ndarray]]) -> float | None:
    """R^2 of the predictions against the targets of ``pairs`` (``(prediction, target)`` batches), pooled:
    SSE over every batch, SST about each output column's mean over all batches. None when there is no
    batch or the targets do not vary.

    Examples
    --------
    >>> t = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> pooled_r2([(t[:2], t[:2]), (t[2:], t[2:])])
    1.0
    >>> pooled_r2([(np.full((4, 1), 1.5), t)])
    0.0
    """
    if not pairs:
        return None
    preds = np.concatenate([p.reshape(len(p), -1) for p, _ in pairs])
    targets = np.concatenate([t.reshape(len(t), -1) for _, t in pairs])
    sst = float(((targets - targets.mean(axis=0)) ** 2).sum())
    if not sst > 0:
        return None
    return 1.0 - float(((preds - targets) ** 2).sum()) / sst


class RegressionWorseThanMean(BuiltinRule):
    """Fires when a squared-error model's validation R^2 is <= ``max_r2`` in ``consecutive`` passes.

    Examples
    --------
    >>> # invoke_rule(RegressionWorseThanMean(trial, min_passes="4", max_r2="0"))
    """

    LIKELY_CAUSE = (
        "{tensor}: the model predicts no better than the targets' mean on validation data after several "
        "epochs: an initialisation far too large, a learning rate too high, or inputs on a scale the model "
        "cannot use"
    )
    SUGGESTED_FIX = (
        "use the framework's default initialisation (or scale the initial weights down), standardise the "
        "inputs and targets, and try the learning rate 10x lower"
    )

    PARAMETERS = (
        Param(
            "loss_regex",
            "regex",
            r".*(MSE|[Mm]ean_?[Ss]quared_?[Ee]rror)",
            "loss outputs (losses collection, re.match) of a squared-error loss",
        ),
        Param("min_passes", "int", "4", "validation passes before judging"),
        Param("max_r2", "float", "0", "a pass with R^2 at or below this is no better than the mean"),
        Param("consecutive", "int", "2", "newest passes that must all be at or below max_r2"),
    )
    COLLECTIONS = (
        ("losses", {"save_interval": "500"}),
        (
            "loss_inputs",
            {
                "include_regex": "[Ll]oss_input_[01]$|^(predictions|labels)$|^batch_loss/",
                "save_interval": "500",
            },
        ),
    )

    def check_params(self) -> None:
        self.require_at_least(1, "min_passes", "consecutive")
        if self.consecutive > self.min_passes:
            raise self.param_error(
                "consecutive", f"value {self.consecutive} must be <= min_passes ({self.min_passes})"
            )
        if not self.max_r2 < 1:
            raise self.param_error("max_r2", f"value {self.max_r2} must be < 1 (R^2 is at most 1)")

    def history_steps(self) -> int | None:
        return None  # every validation pass since the start

    def _loss_input_pairs(self, step: int) -> list[LossFeed]:
        """The feed of each loss saved at ``step`` that ``loss_regex`` matches, its prediction and target
        both saved at ``step`` (:func:`loss_feeds`: PyTorch's ``<Loss>_input_0/1``, Keras's
        ``predictions``, ``labels``)."""
        saved = set(self.base_trial.tensor_names(step=step))
        out: list[LossFeed] = []
        for feed in loss_feeds(self, step, self.loss_regex):
            pair = (feed.prediction, feed.target)
            if pair[0] in saved and pair[1] in saved and pair not in [(f.prediction, f.target) for f in out]:
                out.append(feed)
        return out

    def _pass_r2(self, pred: str, target: str, steps: list[int], same_rank: bool = False) -> float | None:
        """The pooled R^2 of one validation pass, computed once per pass (a saved step never changes);
        ``same_rank``: a target one trailing axis of size 1 short of the prediction is given that axis, as
        the loss did (Keras)."""
        cache = self.__dict__.setdefault("_r2_cache", {})
        key = (pred, steps[0], len(steps))
        if key not in cache:
            pairs = []
            for s in steps:
                p, t = self.value(pred, s), self.value(target, s)
                if p is None or t is None:
                    continue
                p, t = np.asarray(p, dtype=np.float64), np.asarray(t, dtype=np.float64)
                if same_rank and p.shape == (*t.shape, 1):
                    t = t.reshape(p.shape)
                if (
                    p.shape != t.shape
                    or p.ndim == 0
                    or not (np.all(np.isfinite(p)) and np.all(np.isfinite(t)))
                ):
                    continue
                pairs.append((p, t))
            cache[key] = pooled_r2(pairs)
        return cache[key]

    def invoke_at_step(self, step: int) -> bool:
        if self.base_trial.mode(step) != EVAL:
            return False
        for feed in self._loss_input_pairs(step):
            pred, target = feed.prediction, feed.target
            gsteps = [s for s in self.base_trial.tensor(pred).steps() if s <= step]
            if not gsteps or gsteps[-1] != step:
                continue
            evals = [st for mode, st in trial_phases(self.base_trial, gsteps) if mode == EVAL]
            if len(evals) < self.min_passes:
                continue
            passes = whole_passes(evals)
            if passes is None:
                continue  # the newest pass is judged once, whole
            newest = [self._pass_r2(pred, target, p, feed.same_rank) for p in passes[-self.consecutive :]]
            if any(r is None or r > self.max_r2 for r in newest):
                continue
            shown = ", ".join(self.fmt(r) for r in newest)
            self.report_issue(
                f"{pred} against {target}: validation R^2 {shown} in the newest {self.consecutive} of "
                f"{len(passes)} passes, at or below max_r2 {self.fmt(self.max_r2)}: the model predicts no "
                "better than the targets' mean",
                tensor=pred,
                steps=[s for p in passes[-self.consecutive :] for s in p],
            )
            return True
        return False
