"""RegressionWorseThanMean: after several validation passes, a regression model still does no better
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
``loss_regex`` matches (pointwise regression losses: PyTorch's ``MSELoss``, ``L1Loss``, ``SmoothL1Loss``
and ``HuberLoss``, Keras's mean squared and mean absolute errors, ``Huber`` and ``LogCosh``; R^2 means nothing
for a cross-entropy), the loss module's inputs ``<Loss>_input_0`` (the prediction) and
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

from tornasole.rules.builtin.losses import LossFeed
from tornasole.rules.builtin.pass_scores import PassScoreRule
from tornasole.rules.params import Param

__all__ = ["RegressionWorseThanMean", "pooled_r2", "REGRESSION_LOSS"]

#: Pointwise regression losses, whatever their form: R^2 reads the prediction and the target the loss was
#: given, not the loss. A Huber, L1 or log-cosh loss is a regression whose model is judged the same way
#: (issue 29: the families benchmark's ``diabetes_huber``, initialisation x8, ended at R^2 -206 with the
#: rule reading nothing, its loss being ``HuberLoss``).
REGRESSION_LOSS = (
    r".*(MSE|L1Loss|HuberLoss|[Mm]ean_?[Ss]quared_?[Ee]rror|[Mm]ean_?[Aa]bsolute_?[Ee]rror|[Hh]uber|"
    r"[Ll]og_?[Cc]osh)"
)


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


class RegressionWorseThanMean(PassScoreRule):
    """Fires when a regression model's validation R^2 is <= ``max_r2`` in ``consecutive`` passes.

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
            REGRESSION_LOSS,
            "loss outputs (losses collection, re.match) of a pointwise regression loss",
        ),
        Param("min_passes", "int", "4", "validation passes before judging"),
        Param("max_r2", "float", "0", "a pass with R^2 at or below this is no better than the mean"),
        Param("consecutive", "int", "2", "newest passes that must all be at or below max_r2"),
    )

    BOUND_PARAM = "max_r2"
    SCORE_NAME = "R^2"

    def score_pass(self, feed: LossFeed, steps: list[int]) -> float | None:
        """The pooled R^2 of one validation pass; a target one trailing axis of size 1 short of the
        prediction is given that axis where the loss did so (``feed.same_rank``: Keras)."""
        pairs = []
        for p, t in self.pass_batches(feed, steps):
            p, t = np.asarray(p, dtype=np.float64), np.asarray(t, dtype=np.float64)
            if feed.same_rank and p.shape == (*t.shape, 1):
                t = t.reshape(p.shape)
            if p.shape != t.shape or p.ndim == 0 or not (np.all(np.isfinite(p)) and np.all(np.isfinite(t))):
                continue
            pairs.append((p, t))
        return pooled_r2(pairs)

    def finding(self, feed: LossFeed, scores: str, passes: int) -> str:
        return (
            f"{feed.prediction} against {feed.target}: validation R^2 {scores} in the newest "
            f"{self.consecutive} of {passes} passes, at or below max_r2 {self.fmt(self.max_r2)}: the model "
            "predicts no better than the targets' mean"
        )
