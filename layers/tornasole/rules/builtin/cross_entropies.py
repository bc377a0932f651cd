"""A cross-entropy loss's prediction and target, read as the loss reads them: per-sample cross-entropies, the
null model's (the class frequencies'), McFadden's pooled pseudo-R^2, and the permutation gains that say
whether the predictions carry information about their own labels.

Pure numpy over one batch or one pass, no trial: ClassifierNoBetterThanPrior scores a validation pass with
them, and :mod:`~tornasole.rules.builtin.plateau_learning` asks whether a model at chance is leaving its
plateau (ClassifierNoBetterThanPrior and ValidationLossNotDecreasing). The loss's kind comes from its name
(:func:`cross_entropy_kind`); the readers return None for a batch they cannot read (shapes that do not
pair, a non-finite value, a target out of range), which the callers leave out.
"""

from __future__ import annotations

import re

import numpy as np

from tornasole.rules.builtin.losses import BINARY_CROSS_ENTROPY, CROSS_ENTROPY

__all__ = [
    "TORCH_IGNORE_INDEX",
    "binary_cross_entropies",
    "binary_log_likelihoods",
    "binary_null_entropy",
    "binary_permutation_gains",
    "categorical_cross_entropies",
    "categorical_log_probabilities",
    "categorical_null_entropy",
    "categorical_permutation_gains",
    "cross_entropy_kind",
    "permutation_z",
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


def binary_log_likelihoods(
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
    logs = binary_log_likelihoods(prediction, target, inputs, keras)
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
    read = categorical_log_probabilities(prediction, target, inputs, class_axis, keras)
    if read is None:
        return None
    log_p, t = read
    if t.ndim == 2:  # distributions over the classes
        return -(t * log_p).sum(axis=1), t.sum(axis=0)
    return -log_p[np.arange(len(t)), t], np.bincount(t, minlength=log_p.shape[1]).astype(np.float64)


def categorical_log_probabilities(
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
    :func:`binary_log_likelihoods` reads them): the sample's cross-entropy against the pass's other
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
    :func:`categorical_log_probabilities` reads them): the sample's cross-entropy against the pass's
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
