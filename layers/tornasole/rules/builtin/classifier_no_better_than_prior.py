"""ClassifierNoBetterThanPrior: after several validation passes, a cross-entropy classifier still does no
better than the null model that predicts the class frequencies, whatever its inputs.

Criterion: McFadden's pseudo-R^2 (McFadden 1974, "Conditional logit analysis of qualitative choice
behavior"), 1 - LL(model) / LL(null), where LL(null) is the log-likelihood of the null model that predicts
every sample's class with the observed class frequencies. In cross-entropy terms: 1 - CE / CE_null, CE the
model's pooled cross-entropy and CE_null the entropy of the class frequencies. 0 means the model's
predictions are worth no more than the class prior: Karpathy's input-independent baseline ("A Recipe for
Training Neural Networks", 2019), which a model must beat. It is the cross-entropy counterpart of
RegressionWorseThanMean's R^2, and the prior-aware form of AUTOTRAINER's slow convergence (maximum accuracy
below 0.6), which cannot see a model stuck at a majority class of 0.63.

Read from the trial, for each loss of kind binary cross-entropy or cross-entropy
(:data:`~tornasole.rules.builtin.losses.BINARY_CROSS_ENTROPY`,
:data:`~tornasole.rules.builtin.losses.CROSS_ENTROPY`) whose name ``loss_regex`` matches: its prediction
and target (:func:`~tornasole.rules.builtin.losses.loss_feeds`: PyTorch's ``<Loss>_input_0``/``_1``, Keras's
``predictions``/``labels``). The cross-entropy is computed **from the prediction and the target**, never
read from the saved loss: a ``reduction="sum"``, class weights or label smoothing change the loss's value,
not what the model predicts. The loss's kind says how to read the prediction:

* ``BCELoss`` and Keras's ``BinaryCrossentropy``: probabilities (clipped as the losses clip them: PyTorch
  floors the log at -100, Keras clips to [1e-7, 1 - 1e-7]); ``BCEWithLogitsLoss`` and ``_from_logits``:
  logits. Every output column is its own binary problem (multi-label), with its own null model;
* ``CrossEntropyLoss`` and ``_from_logits``: logits; ``NLLLoss``: log-probabilities; Keras's
  ``CategoricalCrossentropy``: probabilities (normalised over the class axis, then clipped, as Keras does).
  The target is class indices (one axis fewer than the prediction; PyTorch's default ``ignore_index`` -100
  left out) or a distribution over the classes (one-hot or soft, the prediction's shape). The class axis is
  1 in PyTorch, -1 in Keras; any further axes (a sequence) are more samples.

Points are validation passes (EVAL steps grouped by :func:`trial_phases`, each cut to the shortest pass's
length and the newest judged once, whole: :func:`whole_passes`). A pass pools its batches: CE over every
sample of every saved batch, CE_null the entropy of the whole pass's own class frequencies (per column for
a binary loss; columns of one class only are left out).

Fires at an EVAL step once there are ``min_passes`` passes when each of the newest ``consecutive`` passes
has pseudo-R^2 <= ``max_pseudo_r2``. Why patience: a slow starter (a warmup, a small learning rate) sits at
the prior for its first passes; why ``consecutive``: one bad pass of a noisy run is not a verdict.

With ``learning_z`` (off by default; 2 in the recommended set), a pass at or below the bound whose model is
learning is not judged: its predictions tell their own labels better than the labels permuted among the
pass's samples, a paired one-sided test at z >= ``learning_z`` (Ojala and Garriga 2010, "Permutation tests
for studying classifier performance", test 1, in its expectation over the permutations, each sample's
baseline the frequencies of the *other* samples' labels so that its own label cannot bias it), and that
mean gain is at least ``learning_growth`` x the previous pass's. Why: a net on a plateau at chance (a
recurrent net finding a long-range dependency) learns a little about each sample before its loss moves,
and that little grows pass over pass; shuffled labels, inputs that do not reach the model, a learning rate
far off or zeroed leave no information that grows. A model fitted to shuffled training labels can carry a
small, chance, information about the true validation labels (z 2-5 in the families benchmark): it does not
double from pass to pass.

What stays quiet, and why:

* any classifier that beats the class prior by more than ``max_pseudo_r2`` of its entropy;
* a pass whose targets hold one class only: the prior predicts it perfectly (CE_null = 0), nothing to beat;
* a batch whose prediction and target do not match in shape, that holds a non-finite value, or whose
  targets are not valid for the loss (class ids out of range or not whole, soft targets outside [0, 1]):
  left out of its pass;
* squared-error losses (RegressionWorseThanMean judges them) and losses whose kind the name does not say.
"""

from __future__ import annotations

import re

import numpy as np

from tornasole.rules.builtin.losses import BINARY_CROSS_ENTROPY, CROSS_ENTROPY, LossFeed
from tornasole.rules.builtin.pass_scores import PassScoreRule
from tornasole.rules.params import Param

__all__ = [
    "ClassifierNoBetterThanPrior",
    "binary_permutation_gains",
    "categorical_permutation_gains",
    "permutation_z",
    "binary_cross_entropies",
    "categorical_cross_entropies",
    "binary_null_entropy",
    "categorical_null_entropy",
    "pooled_pseudo_r2",
]

#: PyTorch's ``CrossEntropyLoss``/``NLLLoss`` default ``ignore_index``: such targets count in no loss.
TORCH_IGNORE_INDEX = -100
_KERAS_EPSILON = 1e-7  # Keras's backend epsilon: its cross-entropies clip probabilities to [eps, 1 - eps]
_TORCH_LOG_FLOOR = -100.0  # BCELoss clamps its log terms at -100


def _xlogy_entropy(q: np.ndarray) -> np.ndarray:
    """-q ln q, 0 where q is 0."""
    out = np.zeros_like(q, dtype=np.float64)
    pos = q > 0
    out[pos] = -q[pos] * np.log(q[pos])
    return out


def binary_null_entropy(targets: np.ndarray) -> np.ndarray:
    """The null model's cross-entropy per sample, per column of ``targets`` (``(samples, columns)``, each
    in [0, 1]): the binary entropy of the column's mean, the cross-entropy of the constant prediction that
    is its class frequency (nats).

    Examples
    --------
    >>> binary_null_entropy(np.array([[1.0, 1.0], [0.0, 1.0]])).round(4).tolist()
    [0.6931, 0.0]
    """
    q = np.asarray(targets, dtype=np.float64).mean(axis=0)
    return _xlogy_entropy(q) + _xlogy_entropy(1.0 - q)


def categorical_null_entropy(class_totals: np.ndarray) -> float:
    """The null model's cross-entropy per sample for targets whose per-class totals are ``class_totals``
    (``(classes,)``: how many samples of each class, or the sums of soft targets): the entropy of the class
    frequencies (nats).

    Examples
    --------
    >>> round(categorical_null_entropy(np.array([1, 1, 1, 1])), 4)  # four classes, once each: ln 4
    1.3863
    >>> categorical_null_entropy(np.array([0.0, 2.0]))
    0.0
    """
    totals = np.asarray(class_totals, dtype=np.float64)
    return float(_xlogy_entropy(totals / totals.sum()).sum())


def _binary_log_likelihoods(
    prediction: np.ndarray, target: np.ndarray, inputs: str, keras: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(log p, log (1 - p), target)`` of one batch, each ``(samples, columns)``, read as the loss reads
    the prediction; None when the batch cannot be read (see :func:`binary_cross_entropies`)."""
    p, t = np.asarray(prediction, dtype=np.float64), np.asarray(target, dtype=np.float64)
    if p.shape != t.shape or p.ndim == 0 or p.size == 0:
        return None
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(t))) or t.min() < 0 or t.max() > 1:
        return None
    if inputs == "logits":
        log_p = -np.logaddexp(0.0, -p)  # log sigmoid(x)
        log_1p = -np.logaddexp(0.0, p)  # log (1 - sigmoid(x))
    else:
        if p.min() < 0 or p.max() > 1:
            return None  # BCELoss refuses probabilities outside [0, 1]
        if keras:
            p = np.clip(p, _KERAS_EPSILON, 1.0 - _KERAS_EPSILON)
        with np.errstate(divide="ignore"):
            log_p = np.maximum(np.log(p), _TORCH_LOG_FLOOR)
            log_1p = np.maximum(np.log1p(-p), _TORCH_LOG_FLOOR)
    rows = len(p) if p.ndim > 1 else p.size
    return log_p.reshape(rows, -1), log_1p.reshape(rows, -1), t.reshape(rows, -1)


def binary_cross_entropies(
    prediction: np.ndarray, target: np.ndarray, inputs: str, keras: bool = False
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-element binary cross-entropies of one batch and its targets, both ``(samples, columns)``, or
    None when the batch cannot be read (shapes differ, a value is not finite, a target outside [0, 1]).

    ``inputs``: ``"probabilities"`` (clipped as the loss clips them: ``keras`` to [1e-7, 1 - 1e-7], PyTorch
    a log floored at -100) or ``"logits"``.

    Examples
    --------
    >>> ce, t = binary_cross_entropies(np.array([0.5, 0.9]), np.array([1.0, 0.0]), "probabilities")
    >>> ce.round(4).tolist(), t.tolist()
    ([[0.6931], [2.3026]], [[1.0], [0.0]])
    >>> ce, _ = binary_cross_entropies(np.array([[0.0]]), np.array([[1.0]]), "logits")
    >>> ce.round(4).tolist()
    [[0.6931]]
    >>> binary_cross_entropies(np.zeros((4, 1)), np.zeros(4), "logits") is None  # (4, 1) against (4,)
    True
    """
    logs = _binary_log_likelihoods(prediction, target, inputs, keras)
    if logs is None:
        return None
    log_p, log_1p, t = logs
    return -(t * log_p + (1.0 - t) * log_1p), t


def categorical_cross_entropies(
    prediction: np.ndarray, target: np.ndarray, inputs: str, class_axis: int, keras: bool = False
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-sample cross-entropies of one batch, ``(samples,)``, and its targets' per-class totals,
    ``(classes,)`` (class counts; sums of soft targets); None when the batch cannot be read (shapes that
    do not pair, a non-finite value, a class id out of range or not whole, a distribution target outside
    [0, 1]).

    ``inputs``: ``"logits"``, ``"log_probabilities"`` (``NLLLoss``) or ``"probabilities"`` (Keras,
    normalised over the class axis and clipped to [1e-7, 1 - 1e-7] as Keras does). The target holds class
    ids (the prediction's shape without the class axis; PyTorch's ``ignore_index`` -100 left out; with
    ``keras`` a trailing axis of size 1 is dropped, as its sparse loss does) or distributions (the
    prediction's shape). Further axes (a sequence) become more samples. Why totals and not a one-hot
    matrix: a language model's targets over a vocabulary of 50,000 would make it the size of the logits.

    Examples
    --------
    >>> logits = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]))
    >>> ce, t = categorical_cross_entropies(logits, np.array([0, 1]), "logits", 1)
    >>> ce.round(4).tolist(), t.tolist()
    ([0.6931, 0.2231], [1.0, 1.0, 0.0])
    >>> categorical_cross_entropies(logits, np.array([0, 3]), "logits", 1) is None  # class 3 of 3
    True
    """
    read = _categorical_log_probabilities(prediction, target, inputs, class_axis, keras)
    if read is None:
        return None
    log_p, t = read
    if t.ndim == 2:  # distributions over the classes
        return -(t * log_p).sum(axis=1), t.sum(axis=0)
    return -log_p[np.arange(len(t)), t], np.bincount(t, minlength=log_p.shape[1]).astype(np.float64)


def _categorical_log_probabilities(
    prediction: np.ndarray, target: np.ndarray, inputs: str, class_axis: int, keras: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(log-probabilities (samples, classes), target)`` of one batch, the target class ids
    ``(samples,)`` (``ignore_index`` rows left out of both) or distributions ``(samples, classes)``; None
    when the batch cannot be read (see :func:`categorical_cross_entropies`)."""
    p, t = np.asarray(prediction, dtype=np.float64), np.asarray(target)
    if p.ndim < 2 or p.size == 0 or not np.all(np.isfinite(p)):
        return None
    axis = class_axis % p.ndim
    n_classes = p.shape[axis]
    p = np.moveaxis(p, axis, -1).reshape(-1, n_classes)
    if inputs == "logits":
        log_p = p - np.max(p, axis=1, keepdims=True)
        log_p = log_p - np.log(np.exp(log_p).sum(axis=1, keepdims=True))
    elif inputs == "log_probabilities":
        log_p = p
    else:
        if p.min() < 0:
            return None
        total = p.sum(axis=1, keepdims=True)
        if not np.all(total > 0):
            return None
        log_p = np.log(np.clip(p / total, _KERAS_EPSILON, 1.0 - _KERAS_EPSILON))
    full_shape = np.asarray(prediction).shape
    id_shape = full_shape[:axis] + full_shape[axis + 1 :]
    if keras and t.shape == (*id_shape, 1) and t.shape != full_shape:
        t = t.reshape(id_shape)
    if t.shape == full_shape:  # distributions over the classes
        t = np.moveaxis(t.astype(np.float64), axis, -1).reshape(-1, n_classes)
        if not np.all(np.isfinite(t)) or t.min() < 0 or t.max() > 1:
            return None
        return log_p, t
    if t.shape != id_shape:
        return None
    ids = t.astype(np.float64).reshape(-1)
    if not np.all(np.isfinite(ids)) or not np.all(ids == np.round(ids)):
        return None
    if ids.size == 0 or ids.max() >= n_classes or ids.min() < min(TORCH_IGNORE_INDEX, 0):
        return None  # checked before the cast: a float id beyond int64 would wrap
    ids = ids.astype(np.int64)
    keep = ids != TORCH_IGNORE_INDEX if not keras else np.ones(len(ids), dtype=bool)
    ids, log_p = ids[keep], log_p[keep]
    if ids.size == 0 or ids.min() < 0 or ids.max() >= n_classes:
        return None
    return log_p, ids


def pooled_pseudo_r2(batches: list[tuple[np.ndarray, np.ndarray]], binary: bool) -> float | None:
    """McFadden's pseudo-R^2 of a pass's ``batches`` (``(cross-entropies, targets)`` as
    :func:`binary_cross_entropies` gives them, or ``(cross-entropies, class totals)`` as
    :func:`categorical_cross_entropies` does; all of one width), pooled: 1 - the summed
    cross-entropy / the summed null cross-entropy, the null model predicting the pass's own class
    frequencies (per column for ``binary``; columns of one class are left out). None when there is no batch
    or the targets hold one class only.

    Examples
    --------
    >>> t = np.array([[1.0], [1.0], [1.0], [0.0]])
    >>> prior = binary_cross_entropies(np.full((4, 1), 0.75), t, "probabilities")
    >>> round(pooled_pseudo_r2([prior], binary=True), 6)  # predicting the class frequency: 0
    0.0
    >>> good = binary_cross_entropies(np.array([[0.9], [0.9], [0.9], [0.1]]), t, "probabilities")
    >>> round(pooled_pseudo_r2([good], binary=True), 4)  # 1 - (-ln 0.9) / H(0.75)
    0.8126
    >>> pooled_pseudo_r2([binary_cross_entropies(np.full((2, 1), 0.5), np.ones((2, 1)), "logits")], True)
    """
    if not batches:
        return None
    ce = np.concatenate([c for c, _ in batches])
    if binary:
        targets = np.concatenate([t for _, t in batches])
        null = binary_null_entropy(targets)
        cols = null > 0
        if not np.any(cols):
            return None
        return 1.0 - float(ce[:, cols].sum()) / (len(targets) * float(null[cols].sum()))
    totals = np.sum([t for _, t in batches], axis=0)
    null_total = float(totals.sum()) * categorical_null_entropy(totals) if totals.sum() > 0 else 0.0
    if not null_total > 0:
        return None
    return 1.0 - float(ce.sum()) / null_total


def binary_permutation_gains(
    logs: tuple[np.ndarray, np.ndarray, np.ndarray], sums: np.ndarray, samples: int, columns: np.ndarray
) -> np.ndarray:
    """Per-sample gains of one batch of a binary loss (``logs``: ``(log p, log (1 - p), target)`` as
    :func:`_binary_log_likelihoods` reads them): the sample's cross-entropy against the pass's other
    labels (their frequency, ``(sums - target) / (samples - 1)``, ``sums`` the pass's target sums per
    column) minus its cross-entropy against its own label, summed over ``columns``.

    Examples
    --------
    >>> logs = (np.log([[0.9], [0.1]]), np.log([[0.1], [0.9]]), np.array([[1.0], [0.0]]))
    >>> binary_permutation_gains(logs, np.array([1.0]), 2, np.array([True])).round(4).tolist()
    [2.1972, 2.1972]
    """
    log_p, log_1p, t = logs
    others = (sums - t) / (samples - 1)
    against_others = -(others * log_p + (1.0 - others) * log_1p)
    against_own = -(t * log_p + (1.0 - t) * log_1p)
    return (against_others - against_own)[:, columns].sum(axis=1)


def categorical_permutation_gains(
    read: tuple[np.ndarray, np.ndarray], totals: np.ndarray, samples: int
) -> np.ndarray:
    """Per-sample gains of one batch of a categorical loss (``read``: ``(log-probabilities, target)`` as
    :func:`_categorical_log_probabilities` reads them): the sample's cross-entropy against the pass's
    other labels (their class frequencies, ``(totals - target) / (samples - 1)``, ``totals`` the pass's
    per-class totals) minus its cross-entropy against its own label.

    Examples
    --------
    >>> log_p = np.log(np.array([[0.9, 0.1], [0.1, 0.9]]))
    >>> categorical_permutation_gains((log_p, np.array([0, 1])), np.array([1.0, 1.0]), 2).round(4).tolist()
    [2.1972, 2.1972]
    """
    log_p, t = read
    own = -(t * log_p).sum(axis=1) if t.ndim == 2 else -log_p[np.arange(len(t)), t]
    return (-(log_p @ totals) - own) / (samples - 1) - own


def permutation_z(gains: np.ndarray) -> tuple[float, float] | None:
    """``(mean, z)`` of a pass's per-sample permutation gains: z = mean / its standard error, the paired
    statistic of a one-sided test that the predictions tell their own labels better than the same
    predictions would tell the labels shuffled among the samples (Ojala and Garriga 2010, "Permutation
    tests for studying classifier performance", test 1, in its expectation over the permutations). None
    with fewer than 8 samples or gains of no spread.

    Examples
    --------
    >>> [round(v, 4) for v in permutation_z(np.array([0.1, 0.3] * 8))]  # sd 0.1033, se 0.0258
    [0.2, 7.746]
    >>> permutation_z(np.ones(4)) is None
    True
    """
    if gains.size < 8:
        return None
    sd = float(np.std(gains, ddof=1))
    if not sd > 0:
        return None
    mean = float(np.mean(gains))
    return mean, mean / (sd / float(np.sqrt(gains.size)))


def cross_entropy_kind(loss: str) -> tuple[bool, str] | None:
    """``(binary, inputs)`` of a cross-entropy loss tensor's name, or None for any other loss.

    Examples
    --------
    >>> cross_entropy_kind("BCEWithLogitsLoss_output_0"), cross_entropy_kind("NLLLoss_output_0")
    ((True, 'logits'), (False, 'log_probabilities'))
    >>> cross_entropy_kind("batch_loss/CategoricalCrossentropy"), cross_entropy_kind("MSELoss_output_0")
    ((False, 'probabilities'), None)
    """
    if BINARY_CROSS_ENTROPY.match(loss):
        return True, "logits" if re.search(r"WithLogits|_from_logits$", loss) else "probabilities"
    if CROSS_ENTROPY.match(loss):
        if loss.startswith("batch_loss/"):
            return False, "logits" if loss.endswith("_from_logits") else "probabilities"
        return False, "log_probabilities" if re.search(r"NLLLoss(_output_\d+)?$", loss) else "logits"
    return None


class ClassifierNoBetterThanPrior(PassScoreRule):
    """Fires when a classifier's validation pseudo-R^2 is <= ``max_pseudo_r2`` in ``consecutive`` passes.

    Examples
    --------
    >>> # invoke_rule(ClassifierNoBetterThanPrior(trial, min_passes="4", max_pseudo_r2="0"))
    """

    LIKELY_CAUSE = (
        "{tensor}: the classifier predicts no better than the class frequencies on validation data after "
        "several epochs: labels misaligned with or shuffled against the inputs, inputs not reaching the "
        "model (all zeros, a wrong column), or a learning rate so low or high that nothing is learned; "
        "or a plateau the run will leave (a recurrent net learning a long-range dependency can sit at "
        "chance for several epochs first)"
    )
    SUGGESTED_FIX = (
        "check that the data pipeline pairs each input with its own label (shuffle inputs and labels "
        "together) and feeds the model the intended features, then try the learning rate 10x lower and "
        "10x higher; for a recurrent net on long sequences whose pipeline checks out, a few more epochs "
        "first"
    )

    PARAMETERS = (
        Param(
            "loss_regex",
            "regex",
            r".*(BCE|CrossEntropy|NLL|[Cc]rossentropy)",
            "loss outputs (losses collection, re.match) of a cross-entropy loss",
        ),
        Param("min_passes", "int", "4", "validation passes before judging"),
        Param(
            "max_pseudo_r2",
            "float",
            "0",
            "a pass with McFadden's pseudo-R^2 at or below this is no better than the class prior",
        ),
        Param("consecutive", "int", "2", "newest passes that must all be at or below max_pseudo_r2"),
        Param(
            "learning_z",
            "float",
            "0",
            "a pass whose predictions tell their own labels better than the labels permuted among the pass's "
            "samples (one-sided paired z at or above this) by learning_growth x the previous pass's gain is "
            "a model leaving a plateau: not judged; 0: off",
        ),
        Param(
            "learning_growth",
            "float",
            "2",
            "with learning_z: the factor by which the permutation gain must grow from one pass to the next",
        ),
    )

    BOUND_PARAM = "max_pseudo_r2"
    SCORE_NAME = "the pseudo-R^2"

    def judges(self, feed: LossFeed) -> bool:
        return cross_entropy_kind(feed.loss) is not None

    def score_pass(self, feed: LossFeed, steps: list[int]) -> float | None:
        """The pooled pseudo-R^2 of one validation pass; the loss's kind (:func:`cross_entropy_kind`) says
        how to read its prediction."""
        binary, inputs = cross_entropy_kind(feed.loss)
        keras = feed.same_rank
        batches = []
        for p, t in self.pass_batches(feed, steps):
            p, t = np.asarray(p), np.asarray(t)
            if binary:
                if keras and p.shape == (*t.shape, 1):
                    t = t.reshape(p.shape)
                got = binary_cross_entropies(p, t, inputs, keras=keras)
            else:
                got = categorical_cross_entropies(p, t, inputs, feed.class_axis, keras=keras)
            if got is not None:
                batches.append(got)
        if batches:  # one width (output columns, classes) per pass: the first batch's
            batches = [b for b in batches if b[1].shape[-1] == batches[0][1].shape[-1]]
        return pooled_pseudo_r2(batches, binary)

    def check_params(self) -> None:
        super().check_params()
        if self.learning_z < 0:
            raise self.param_error("learning_z", f"value {self.learning_z} must be >= 0 (0: off)")
        if not self.learning_growth > 0:
            raise self.param_error("learning_growth", f"value {self.learning_growth} must be > 0")

    def still_learning(self, feed: LossFeed, passes: list[list[int]], index: int) -> bool:
        """With ``learning_z``: the pass's predictions tell their own labels better than the labels
        permuted (:func:`permutation_z` at or above ``learning_z``), by ``learning_growth`` x the previous
        pass's mean gain at least. Why: a net on a plateau at chance (a recurrent net finding a long-range
        dependency) first learns a little about each sample, and that little grows pass over pass; shuffled
        labels, inputs that do not reach the model and a learning rate far off leave nothing that grows
        (a model fitted to shuffled labels can carry a small, chance, information about the true ones: it
        does not double)."""
        if not self.learning_z or index < 1:
            return False
        now, before = self._permutation(feed, passes[index]), self._permutation(feed, passes[index - 1])
        if now is None or before is None:
            return False
        return now[1] >= self.learning_z and now[0] >= self.learning_growth * before[0]

    def _permutation(self, feed: LossFeed, steps: list[int]) -> tuple[float, float] | None:
        """:func:`permutation_z` of one pass, once per pass. Two readings of its batches: the pass's label
        totals first (what each sample's "other labels" are), then each batch's gains; no pass-sized
        array of probabilities is held (a language model's vocabulary)."""
        cache = self.__dict__.setdefault("_permutation_cache", {})
        key = (feed, steps[0], len(steps))
        if key not in cache:
            cache[key] = self._permutation_of(feed, steps)
        return cache[key]

    def _permutation_of(self, feed: LossFeed, steps: list[int]) -> tuple[float, float] | None:
        binary, inputs = cross_entropy_kind(feed.loss)
        keras = feed.same_rank

        def reads():
            width = None
            for p, t in self.pass_batches(feed, steps):
                p, t = np.asarray(p), np.asarray(t)
                if binary:
                    if keras and p.shape == (*t.shape, 1):
                        t = t.reshape(p.shape)
                    read = _binary_log_likelihoods(p, t, inputs, keras)
                else:
                    read = _categorical_log_probabilities(p, t, inputs, feed.class_axis, keras)
                if read is None:
                    continue
                width = read[0].shape[1] if width is None else width
                if read[0].shape[1] == width:  # one width per pass, as the score reads it
                    yield read

        samples, totals = 0, None
        for read in reads():
            target = read[-1]
            if binary or target.ndim == 2:
                add = target.sum(axis=0)
            else:
                add = np.bincount(target, minlength=read[0].shape[1]).astype(np.float64)
            samples += len(target)
            totals = add if totals is None else totals + add
        if totals is None or samples < 8:
            return None
        if binary:
            columns = binary_null_entropy(totals[None, :] / samples) > 0
            gains = [binary_permutation_gains(r, totals, samples, columns) for r in reads()]
        else:
            gains = [categorical_permutation_gains(r, totals, samples) for r in reads()]
        return permutation_z(np.concatenate(gains))

    def finding(self, feed: LossFeed, scores: str, passes: int) -> str:
        learning = (
            f" (none learning: permutation z >= {self.fmt(self.learning_z)} with a "
            f"{self.fmt(self.learning_growth)}x gain)"
            if self.learning_z
            else ""
        )
        return (
            f"{feed.prediction} against {feed.target} ({feed.loss}): validation pseudo-R^2 {scores} in "
            f"the newest {self.consecutive} of {passes} passes{learning}, at or below max_pseudo_r2 "
            f"{self.fmt(self.max_pseudo_r2)}: the classifier predicts no better than the class "
            "frequencies"
        )
