"""How the families scorer counts a built-broken run as detected, and which built-broken runs did harm.

Pure functions over the result dicts :mod:`score` builds (one per run: ``case``, ``family``, ``seed``,
``kind``, ``final_val_acc``, ``firings[set_name][configuration] = {"first_step": ...}``), importable without
PyTorch, TensorFlow or scikit-learn so that the counting itself is unit-tested (``tests/unit/rules``).

* **Twin-quiet detection** (issue 29's target: "counting only firings that stay quiet on the run's healthy
  twin"): a built-broken run counts as detected only by a rule configuration that does *not* fire on the
  healthy twin, the family's ``healthy`` case trained with the same seed. A configuration that fires on
  both is reacting to the recipe, not to the fault. Without a twin among the results (a subset scored) the
  run has nothing to be compared with and counts by its own firings; :func:`twin_of` says which.
* **Harmful** (DeepFD, Cao et al., ICSE'22, section III: a mutant is a fault only when it is *killed*, its
  accuracy statistically worse than the original program's over repeated runs): a built-broken run is
  harmful when its final validation score (``final_val_acc``: accuracy for a classifier, R^2 for the
  autoencoder, R^2 over the reference for a regression, all higher-is-better and recorded while it
  trains, never by the rules) is below that of *every* built-healthy run of its family that did not
  collapse (below), over every seed scored. With two seeds per case DeepFD's statistical test has no
  power, so the criterion is the stricter, distribution-free one: worse than the worst healthy run. A
  non-finite score (a run that diverged) is worse than any.
* **Collapsed** (issue 29: "healthy runs trained well to the end"): a built-healthy run whose final
  validation score is no better than the input-independent baseline's (:func:`null_score`: the majority
  class, or the mean's R^2 of 0; Karpathy, "A Recipe for Training Neural Networks", 2019, the baseline a
  model must beat) did not train, whatever its recipe. It is no healthy sample: a firing on it is no false
  alarm, and its score is no floor for harm. The scorer counts it apart (:func:`collapsed`) and says
  whether a rule fired on it. The criterion reads the run's final score and its validation targets only,
  never a rule.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "collapsed",
    "fires",
    "firing_configurations",
    "harmful",
    "healthy_floor",
    "null_score",
    "twin_of",
    "twin_quiet_configurations",
    "worst_family",
]

#: The case whose run of the same seed is a broken run's healthy twin: the family's recipe, unmutated.
TWIN_CASE = "healthy"


def firing_configurations(r: dict, set_name: str) -> set[str]:
    """The configurations of ``set_name`` that fired on run ``r``."""
    return {conf for conf, f in r["firings"][set_name].items() if f["first_step"] is not None}


def fires(r: dict, set_name: str) -> list[tuple[int, str]]:
    """``(first step, configuration)`` of every configuration that fired on ``r``, earliest first."""
    return sorted(
        (f["first_step"], conf) for conf, f in r["firings"][set_name].items() if f["first_step"] is not None
    )


def twin_of(r: dict, results: list[dict]) -> dict | None:
    """The healthy twin of ``r`` among ``results``: the family's ``healthy`` case, same seed; None if absent
    (or ``r`` is that run).

    >>> runs = [{"case": f"cnn/{c}", "family": "cnn", "seed": 0} for c in ("healthy", "x")]
    >>> twin_of(runs[1], runs)["case"]
    'cnn/healthy'
    """
    name = f"{r['family']}/{TWIN_CASE}"
    for other in results:
        if other["case"] == name and other["seed"] == r["seed"] and other is not r:
            return other
    return None


def twin_quiet_configurations(r: dict, results: list[dict], set_name: str) -> set[str]:
    """The configurations that fired on ``r`` and not on its healthy twin (every one that fired, without a
    twin)."""
    fired = firing_configurations(r, set_name)
    twin = twin_of(r, results)
    return fired if twin is None else fired - firing_configurations(twin, set_name)


def _score(r: dict) -> float:
    v = r.get("final_val_acc")
    try:
        v = float(v)
    except (TypeError, ValueError):
        return -math.inf
    return v if math.isfinite(v) else -math.inf


def null_score(task: str, targets: np.ndarray) -> float:
    """The validation score of the input-independent baseline, on the score's own scale (``final_val_acc``):
    the share of the most frequent class for a classifier (``classify``: class ids); for a sigmoid output
    (``binary``, ``multilabel``: 0/1 targets, one column per attribute) the mean over the columns of the
    share of each column's more frequent value; 0 for an R^2 (``regress``, ``reconstruct``, ``denoise``,
    ``vae``: predicting the mean explains nothing).

    >>> null_score("classify", np.array([0, 1, 1, 2]))
    0.5
    >>> null_score("multilabel", np.array([[1, 0], [1, 1], [1, 0], [0, 0]]))
    0.75
    >>> null_score("regress", np.array([1.0, 2.0]))
    0.0
    """
    targets = np.asarray(targets)
    if task == "classify":
        counts = np.bincount(targets.reshape(-1).astype(np.int64))
        return float(counts.max() / counts.sum())
    if task in ("binary", "multilabel"):
        ones = (targets.reshape(len(targets), -1) > 0.5).mean(axis=0)
        return float(np.maximum(ones, 1.0 - ones).mean())
    if task in ("regress", "reconstruct", "denoise", "vae"):
        return 0.0
    raise ValueError(
        f"null_score: unknown task {task!r} "
        "(classify, binary, multilabel, regress, reconstruct, denoise, vae)"
    )


def collapsed(r: dict) -> bool:
    """Whether built-healthy run ``r`` ended no better than the input-independent baseline (its
    ``null_score``, module docstring); False for a built-broken run or one without a ``null_score``.

    >>> collapsed({"kind": "healthy", "final_val_acc": 0.13, "null_score": 0.13})
    True
    >>> collapsed({"kind": "healthy", "final_val_acc": 0.14, "null_score": 0.13})
    False
    """
    null = r.get("null_score")
    return r["kind"] == "healthy" and null is not None and _score(r) <= null + NULL_TOLERANCE


#: float32 scores against a float64 baseline: 39/300 is 0.13 exactly, its float32 accuracy 0.12999999523.
NULL_TOLERANCE = 1e-6


def healthy_floor(family_runs: list[dict]) -> float | None:
    """The lowest final validation score of the built-healthy runs among ``family_runs`` that did not
    collapse (None: none)."""
    scores = [_score(r) for r in family_runs if r["kind"] == "healthy" and not collapsed(r)]
    return min(scores) if scores else None


def harmful(r: dict, family_runs: list[dict]) -> bool:
    """Whether built-broken ``r`` ended worse than every built-healthy run of its family that did not
    collapse (DeepFD's killed mutant, module docstring). False when the family has no such run.

    >>> fam = [{"kind": "healthy", "final_val_acc": 0.9}, {"kind": "healthy", "final_val_acc": 0.8}]
    >>> [harmful({"kind": "broken", "final_val_acc": v}, fam) for v in (0.79, 0.85)]
    [True, False]
    """
    floor = healthy_floor(family_runs)
    return r["kind"] == "broken" and floor is not None and _score(r) < floor


def worst_family(per: dict[str, dict], hits: str, total: str) -> tuple[str, int, int] | None:
    """``(family, hits, total)`` of the family with the lowest ``per[family][hits] / per[family][total]``
    (ties: the larger total, then the name); families with a zero total are passed over; None if none is left.

    >>> worst_family({"a": {"h": 3, "n": 4}, "b": {"h": 1, "n": 2}, "c": {"h": 0, "n": 0}}, "h", "n")
    ('b', 1, 2)
    """
    scored = [(m[hits] / m[total], -m[total], f) for f, m in per.items() if m[total]]
    if not scored:
        return None
    _, _, family = min(scored)
    return family, per[family][hits], per[family][total]
