"""Feature importances kept up to date by walking only the trees added since the last save.

``get_score`` walks every tree of the model, so a hook that saved importances
every 100 rounds paid, at each save, for every tree grown so far: 0.26 ms at
100 trees, 0.9-2.7 ms at 2,000 (three walks, measured inside ``xgboost.train``
on the 2-core VM), a cost that grows with the model and sums to a quadratic
one over a long job. Tree statistics never change once a tree is grown (except
under ``process_type=update``), so the sums of the trees seen so far plus the
sums of the new trees are the model's sums. XGBoost's C function walks a list
of trees (``"tree_idx"``), and a save pays for the trees of its own interval.

The price is the order of the float32 sums: XGBoost adds every split of every
tree in turn, this adds the new trees' sums to the old ones in float64, so
``total_gain`` and ``total_cover`` (and ``gain`` / ``cover``) may differ from
``get_score``'s in the last bit or two (relative 1e-7 to 1e-6); ``weight``, a
split count, is exact. The first save of every model, and every save where a
walk of chosen trees cannot be made safely, walks the whole model as before.

**Safety.** XGBoost checks a tree index with ``<=`` the number of trees, so
an index one past the last tree reads past the tree list inside the user's
training process. Indices are therefore only ever taken below a tree count
known to be a lower bound of the model's:

* exact from the model's JSON configuration (``num_trees``) at the first save;
* after it, when every round so far grew one tree, the count at the last save
  plus one per round since (``XGBoosterBoostedRounds``, cheap): every round of
  a tree booster grows at least one tree, so this never overshoots;
* otherwise (forests, several classes) exact from the configuration again
  (about 0.13 ms a save, still less than walking a few hundred trees).

The whole model is walked again when the booster object, the booster type or
``process_type`` is not one this can follow, or the round count went down.
Changing ``num_parallel_tree`` in the middle of a training (never done by
``xgboost.train``) is not followed: a forest grown after a first save saw one
tree a round would have its extra trees left out of the sums.
"""

from __future__ import annotations

import json
import logging
import weakref
from typing import Any

import numpy as np
from xgboost.core import XGBoostError

from tornasole.xgboost.importance import _c_api, _direct_scores, five_types, importance_table

__all__ = ["RunningImportance"]

logger = logging.getLogger(__name__)

_WALKED = ("weight", "total_gain", "total_cover")
_FOLLOWED_BOOSTERS = ("gbtree", "dart")


class RunningImportance:
    """One model's importance table (:func:`importance_table`'s shape), kept across saves."""

    def __init__(self) -> None:
        self._model: weakref.ref[Any] | None = None
        self._following = False
        self._trees = 0  # trees summed so far: a lower bound of the model's count (see above)
        self._rounds = 0
        self._one_per_round = False
        self._rank: dict[str, int] = {}  # feature name -> feature index: XGBoost's order
        self._features: tuple[str, ...] = ()
        self._column: dict[str, int] = {}  # feature name -> its column in _features / _sums
        self._sums = np.zeros((3, 0))  # weight, total_gain, total_cover in float64
        self._table: Any = None

    def table(self, model: Any) -> Any:
        """The five importance types of ``model`` now, rows in ``IMPORTANCE_TYPES`` order."""
        if self._model is None or self._model() is not model:
            return self._restart(model)
        if not self._following:
            return importance_table(model)
        rounds = model.num_boosted_rounds()
        if rounds < self._rounds:
            return self._restart(model)
        if rounds == self._rounds:
            return self._table
        if self._one_per_round:
            trees = self._trees + (rounds - self._rounds)
        else:
            config = _booster_config(model)
            if config is None or config[2] < self._trees:  # fewer trees: not the model summed
                return self._restart(model)
            trees = config[2]
        if trees > self._trees and not self._walk_new(model, trees):
            self._following = False  # this model is walked whole from now on
            return importance_table(model)
        self._trees, self._rounds = trees, rounds
        self._table = self._current()
        return self._table

    def _restart(self, model: Any) -> Any:
        """Walk the whole model (the exact ``get_score`` values) and decide whether to follow it."""
        table = importance_table(model)
        self._model, self._following, self._table = weakref.ref(model), False, table
        if isinstance(table, dict) or _c_api()[0] is None:
            return table  # features listed differently by the walks, or no C API: walked whole
        config = _booster_config(model)
        rounds = model.num_boosted_rounds()
        if config is None or rounds <= 0:
            return table
        name, process_type, trees = config
        if name not in _FOLLOWED_BOOSTERS or process_type != "default":
            return table
        features, scores = table
        names = model.feature_names
        self._rank = (
            {n: i for i, n in enumerate(names)}
            if names
            else {f"f{i}": i for i in range(model.num_features())}
        )
        if any(f not in self._rank for f in features):
            return table
        self._features = features
        self._column = {f: i for i, f in enumerate(features)}
        self._sums = scores[[0, 3, 4]].astype(np.float64)
        self._trees, self._rounds, self._one_per_round = trees, rounds, trees == rounds
        self._following = True
        return table

    def _walk_new(self, model: Any, trees: int) -> bool:
        """:meth:`_add_trees` for the trees grown since the last save. An XGBoost error there is not
        the user's: walking chosen trees only saves time, so the model is then walked whole."""
        try:
            return self._add_trees(model, self._trees, trees)
        except XGBoostError:
            logger.warning("Tornasole: walking the new trees failed; feature importances walk every tree")
            return False

    def _add_trees(self, model: Any, first: int, end: int) -> bool:
        """Add the sums of trees ``[first, end)`` to the running ones; ``False`` if a walk could not
        be read as one score per feature, or named a feature the model does not have."""
        indices = ",".join(map(str, range(first, end)))
        walked = []
        for kind in _WALKED:
            args = f'{{"importance_type":"{kind}","feature_map":"","tree_idx":[{indices}]}}'.encode()
            found = _direct_scores(model, kind, args)
            if found is None:
                return False
            walked.append(found)
        features = walked[0][0]
        if not all(w[0] == features for w in walked[1:]):
            return False
        if any(f not in self._rank for f in features):
            return False
        columns = self._columns(features)
        self._sums[:, columns] += np.stack([w[1] for w in walked]).astype(np.float64)
        return True

    def _columns(self, features: tuple[str, ...]) -> list[int]:
        """The running table's column of each feature, new features put in XGBoost's order."""
        column = self._column
        if any(f not in column for f in features):
            merged = sorted(set(self._features).union(features), key=self._rank.__getitem__)
            sums = np.zeros((3, len(merged)))
            sums[:, [merged.index(f) for f in self._features]] = self._sums
            self._features, self._sums = tuple(merged), sums
            column = self._column = {f: i for i, f in enumerate(merged)}
        return [column[f] for f in features]

    def _current(self) -> tuple[tuple[str, ...], np.ndarray]:
        return self._features, five_types(*self._sums.astype(np.float32))


def _booster_config(model: Any) -> tuple[str, str, int] | None:
    """``(booster name, process_type, number of trees)`` from the model's JSON configuration."""
    try:
        booster = json.loads(model.save_config())["learner"]["gradient_booster"]
        tree = booster.get("gbtree", booster)
        return (
            booster["name"],
            tree["gbtree_train_param"]["process_type"],
            int(tree["gbtree_model_param"]["num_trees"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
