"""The XGBoost hook: an ``xgboost.callback.TrainingCallback`` saving smdebug's XGBoost tensors.

One step per boosting round (the step is the round number, mode GLOBAL, as
smdebug's XGBoost hook). Names and collections are smdebug's, so the XGBoost
rules (``CreateXgboostReport``, ``TreeDepth``, ``FeatureImportanceOverweight``)
read this output unchanged:

* ``metrics`` (saved by default): ``<eval name>-<metric>`` of the round, e.g. ``train-rmse``;
  ``losses`` the same names except increasing metrics (``auc``, ``map``);
* ``feature_importance``: ``feature_importance/<type>/<feature>`` for ``weight``,
  ``gain``, ``cover``, ``total_gain``, ``total_cover``, each normalized to sum 1
  (tree boosters only);
* ``predictions`` / ``labels``: ``predictions`` and ``labels`` on ``validation_data``;
* ``trees``: ``trees/<column>`` of the round's trees (:mod:`tornasole.xgboost.trees`);
* ``full_shap`` / ``average_shap``: ``full_shap/<feature>`` (that feature's SHAP
  column on ``train_data``) and ``average_shap/<feature>`` (its mean), plus ``bias``;
* ``hyperparameters``: ``hyperparameters/<name>`` from ``hyperparameters=``.

Each is computed only on a round where its collection is saved. Reductions do
not apply (values are small); a ``reduction_config`` is ignored with a warning.
"""

from __future__ import annotations

import json
import logging
import os
import time
from itertools import repeat
from typing import Any

import numpy as np
import xgboost as xgb

from tornasole.core.collection import CollectionKeys
from tornasole.core.collection_manager import CollectionManager
from tornasole.core.save_config import SaveConfig
from tornasole.exceptions import ConfigurationError
from tornasole.hooks.numpy_hook import Hook as _CoreHook
from tornasole.hooks.save_manager import WritePlan
from tornasole.hooks.workers import WorkerInfo, detect_worker
from tornasole.modes import ModeKeys
from tornasole.xgboost.importance import IMPORTANCE_TYPES, feature_importances, importance_shares
from tornasole.xgboost.running_importance import RunningImportance
from tornasole.xgboost.trees import round_trees

__all__ = ["Hook", "K", "xgboost_collections", "feature_importances", "IMPORTANCE_TYPES"]

logger = logging.getLogger(__name__)
_GLOBAL = ModeKeys.GLOBAL


class K(CollectionKeys):
    """smdebug's collection names, the XGBoost ones included."""

    HYPERPARAMETERS = "hyperparameters"
    PREDICTIONS = "predictions"
    LABELS = "labels"
    FEATURE_IMPORTANCE = "feature_importance"
    AVERAGE_SHAP = "average_shap"
    FULL_SHAP = "full_shap"
    TREES = "trees"


DEFAULT_SAVE_INTERVAL = 10
_INCREASING = ("auc", "map")
XGBOOST_REGEXES = {
    K.HYPERPARAMETERS: "^hyperparameters/.*$",
    K.METRICS: "^[a-zA-z]+-[a-zA-z0-9]+$",
    K.LOSSES: "^[a-zA-z]+-.+(?<!(auc|map))$",
    K.PREDICTIONS: "^predictions$",
    K.LABELS: "^labels$",
    K.FEATURE_IMPORTANCE: "^feature_importance/.*",
    K.AVERAGE_SHAP: "^average_shap/.*[^/bias]$",
    K.FULL_SHAP: "^full_shap/.*[^/bias]$",
    K.TREES: "^trees/.*",
}


def xgboost_collections() -> CollectionManager:
    """smdebug's XGBoost collections with their regexes (plus ``all`` and ``default``)."""
    cm = CollectionManager()
    cm.get(K.ALL)
    cm.get(K.DEFAULT)
    for name, regex in XGBOOST_REGEXES.items():
        cm.get(name).include(regex)
    return cm


def _dmatrix(where: str, data: Any) -> xgb.DMatrix | None:
    """``data`` as a DMatrix: a DMatrix, or ``(local file, "csv" | "libsvm")`` (CSV: label in column 0)."""
    if data is None or isinstance(data, xgb.DMatrix):
        return data
    if not (isinstance(data, tuple) and len(data) == 2 and all(isinstance(x, str) for x in data)):
        raise ConfigurationError(f"{where}: expected an xgboost.DMatrix or (file path, 'csv'|'libsvm')")
    path, kind = os.path.expanduser(data[0]), data[1].lower().removeprefix("text/")
    if kind not in ("csv", "libsvm"):
        raise ConfigurationError(f"{where}: content type {data[1]!r} is not 'csv' or 'libsvm'")
    if not os.path.isfile(path):
        raise ConfigurationError(f"{where}: {path} is not a local file")
    uri = f"{path}?format={kind}" + ("&label_column=0" if kind == "csv" else "")
    return xgb.DMatrix(uri)


class Hook(_CoreHook, xgb.callback.TrainingCallback):
    """Save XGBoost training tensors; pass it in ``xgboost.train(..., callbacks=[hook])``.

    Same arguments as :class:`tornasole.Hook` (default: every 10 rounds, collection
    ``metrics``), plus ``hyperparameters`` (dict), ``train_data`` (for SHAP values)
    and ``validation_data`` (for predictions and labels), each a DMatrix or
    ``(local file, "csv" | "libsvm")``.

    Examples
    --------
    >>> import tempfile, numpy as np, xgboost as xgb
    >>> from tornasole.xgboost import Hook, SaveConfig
    >>> d = xgb.DMatrix(np.random.rand(20, 3), label=np.random.rand(20))
    >>> hook = Hook(tempfile.mkdtemp(), save_config=SaveConfig(save_interval=1),
    ...             include_collections=["feature_importance", "trees"])
    >>> _ = xgb.train({"max_depth": 2}, d, 3, evals=[(d, "train")], callbacks=[hook], verbose_eval=False)
    >>> hook.close()
    """

    _INIT_STEP = -1
    _OPEN_AT_START = False
    _PROFILE_STEPS_IN_BASE = False  # a round's time is from before_iteration to after_iteration
    _DEFAULT_INCLUDE = (K.METRICS,)

    def __init__(
        self,
        out_dir: str | None = None,
        save_config: Any = None,
        reduction_config: Any = None,
        include_regex: Any = None,
        include_collections: list[str] | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        hyperparameters: dict[str, Any] | None = None,
        train_data: Any = None,
        validation_data: Any = None,
        **kwargs: Any,
    ) -> None:
        if reduction_config is not None:
            logger.warning("Tornasole: the XGBoost hook does not use reduction_config; it is ignored")
        xgb.callback.TrainingCallback.__init__(self)
        if save_config is None:
            save_config = SaveConfig(save_interval=DEFAULT_SAVE_INTERVAL)
        super().__init__(  # keywords: the base follows smdebug's positional order
            out_dir=out_dir,
            save_config=save_config,
            reduction_config=None,
            include_regex=include_regex,
            include_collections=include_collections,
            save_all=save_all,
            include_workers=include_workers,
            **kwargs,
        )
        self.hyperparameters = dict(hyperparameters or {})
        self.train_data = _dmatrix("train_data", train_data)
        self.validation_data = _dmatrix("validation_data", validation_data)
        self._importance_names: dict[tuple[str, ...], list[str]] = {}
        self._importances = RunningImportance()
        self._plans_key: tuple[Any, ...] | None = None
        self._plans: dict[str, tuple[WritePlan | None, bool]] = {}
        self._whole_lists: dict[int, list[str]] = {}  # lists of names _save_all found all saved whole
        # Rounds in [_quiet_from, _quiet_until) save nothing (SaveManager.next_saved_step). XGBoost
        # rounds are short: the 99 idle rounds of an interval of 100 only move the step counters.
        self._quiet_from, self._quiet_until = 0, 0.0

    def _default_collections(self) -> CollectionManager:
        return xgboost_collections()

    def _worker_info(self) -> WorkerInfo:
        if self._worker is None:
            coll = getattr(xgb, "collective", None)
            if coll is not None and coll.is_distributed():
                self._worker = WorkerInfo(coll.get_rank(), coll.get_world_size(), "xgboost.collective")
            else:
                self._worker = detect_worker()
        return self._worker

    # -- TrainingCallback ---------------------------------------------------------------------
    def before_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        """The profiler's round timing starts here (nothing else runs before a round); never stops."""
        if self.profiler_config is not None and not self._closed:
            self._profile_step_begin(epoch)
        return False

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        """Save the round's tensors when a collection is saved at this round; never stops training."""
        if self._step_timer is not None:
            self._step_timer.end()
        # An idle round (see _next_saved_round): this runs on every round, right after XGBoost's own
        # work has evicted the hook's objects from the CPU caches.
        if self._quiet_from <= epoch < self._quiet_until and self.mode is _GLOBAL and self._still_quiet():
            self.step = self.mode_steps[_GLOBAL] = epoch  # what _begin_step does on such a round
            return False
        if self._closed:
            return False
        # the step is the round of this xgboost.train (from 0, continued training included)
        self.step = self.mode_steps[_GLOBAL] = epoch - 1
        self._begin_step()
        if self._saving:
            saved = {c.name for c in self._current_step_colls()}
            self._write_round(model, epoch, evals_log or {}, saved)
            self._end_step()
            self._open = False
            self._quiet_until = 0
        else:
            self._quiet_until = self._next_saved_round(epoch + 1)
        return False

    def _next_saved_round(self, first: int) -> float:
        """The first round from ``first`` on that any saved collection saves (under today's settings)."""
        self._quiet_from = first  # rounds before it (a new xgboost.train with this hook) are asked again
        return self._next_saving_step(ModeKeys.GLOBAL, first)

    def after_training(self, model: Any) -> Any:
        """Make everything saved so far readable (``close()`` or interpreter exit ends the trial)."""
        self.flush()
        return model

    def _write_round(self, model: Any, epoch: int, evals_log: Any, saved: set[str]) -> None:
        all_ = K.ALL in saved
        want = {name: all_ or name in saved for name in XGBOOST_REGEXES}
        if want[K.HYPERPARAMETERS]:
            for name, value in self.hyperparameters.items():
                self._save_named(f"hyperparameters/{name}", _flat(value))
        if want[K.METRICS] or want[K.LOSSES] or all_:
            every = want[K.METRICS] or all_
            metrics = [(n, v) for n, v in _metrics(evals_log) if every or not n.endswith(_INCREASING)]
            names = [name for name, _ in metrics]
            self._save_all(names, [np.array(value, dtype=np.float64).reshape(-1) for _, value in metrics])
        if (want[K.PREDICTIONS] or want[K.LABELS]) and self.validation_data is None:
            logger.warning("Tornasole: predictions and labels need validation_data; not saved")
        elif self.validation_data is not None:
            if want[K.PREDICTIONS]:
                self._save_named("predictions", model.predict(self.validation_data))
            if want[K.LABELS]:
                self._save_named("labels", self.validation_data.get_label())
        if want[K.FEATURE_IMPORTANCE]:
            self._save_importances(model)
        if want[K.TREES] and self._tree_booster(model):
            for column, values in round_trees(model, epoch).items():
                self._save_named(f"trees/{column}", values)
        if want[K.FULL_SHAP] or want[K.AVERAGE_SHAP]:
            self._write_shap(model, want[K.FULL_SHAP], want[K.AVERAGE_SHAP])

    def _save_importances(self, model: Any) -> None:
        """The feature importances of a tree booster. Walking the trees is what tells: only tree
        boosters have gain and cover, and another booster's walk fails (then its type is asked once,
        from the JSON config, which costs more than the walks of a few hundred trees)."""
        cached = self.__dict__.get("_is_tree_booster")
        if cached is not None and cached[0] is model and not cached[1]:
            return
        try:
            shares = importance_shares(self._importances.table(model), self._importance_names)
        except xgb.core.XGBoostError:
            if self._tree_booster(model):
                raise
            return
        self._is_tree_booster = (model, True)
        self._save_all(*shares, cached_names=True)

    def _save_all(self, names: list[str], values: list[np.ndarray], cached_names: bool = False) -> None:
        """``_save_named`` for many fresh (hook-owned, never empty) values of an open round: the
        collections, time and plans looked up once; a value saved whole is queued without a copy,
        and a list of names all saved whole in one ``extend`` when the same list comes again
        (``cached_names``: the caller passes the same list object round after round)."""
        colls = self._current_step_colls()
        if not colls:
            return
        key = (colls, self.mode, self._saves.generation, self._tb_enabled)
        if self._plans_key != key:
            self._plans_key, self._plans, self._whole_lists = key, {}, {}
        now = time.time()
        if self._whole_lists.get(id(names)) is names:  # held there: its id is not reused meanwhile
            self._pending.extend(zip(repeat("t"), names, values, repeat(now)))
            return
        plans, plan, mode = self._plans, self._saves.plan, self.mode
        pending, write = self._pending, self._write_planned
        all_whole = True
        for name, value in zip(names, values):
            found = plans.get(name)
            if found is None:
                chosen = plan(name, colls, mode)
                found = plans[name] = (chosen, chosen is not None and _whole_only(chosen, key[3]))
            chosen, whole_only = found
            if whole_only:
                pending.append(("t", name, value, now))
            else:
                all_whole = False
                if chosen is not None:
                    write(name, value, chosen, now)
        if all_whole and cached_names:
            if len(self._whole_lists) >= 8:
                self._whole_lists.clear()
            self._whole_lists[id(names)] = names

    def _tree_booster(self, model: Any) -> bool:
        """Whether ``model`` boosts trees (asked once per model: the booster's JSON config is not cheap)."""
        cached = self.__dict__.get("_is_tree_booster")
        if cached is None or cached[0] is not model:
            self._is_tree_booster = cached = (model, _booster_name(model) in ("gbtree", "dart"))
        return cached[1]

    def _write_shap(self, model: Any, full: bool, average: bool) -> None:
        if self.train_data is None:
            logger.warning("Tornasole: SHAP values need train_data; not saved")
            return
        shap = model.predict(self.train_data, pred_contribs=True)  # (..., features + 1)
        names = list(model.feature_names or [f"f{i}" for i in range(model.num_features())]) + ["bias"]
        for i, name in enumerate(names):
            column = shap[..., i]
            if full:
                self._save_named(f"full_shap/{name}", column)
            if average:
                self._save_named(f"average_shap/{name}", np.asarray([column.mean()]))


def _whole_only(plan: WritePlan, tensorboard: bool) -> bool:
    """Whether ``plan`` writes the value as it is and nothing else (no shape, reduction or summary)."""
    summaries = tensorboard and (plan.histogram_of or plan.scalar_summary)
    return plan.save_raw and not (plan.save_shape or plan.reductions or summaries)


def _flat(value: Any) -> np.ndarray:
    """A hyperparameter as a 1-d array (smdebug reads strings only 1-d; mixed or nested values as text)."""
    arr = np.asarray(value)
    if arr.dtype.kind == "O":
        arr = np.asarray(str(value))
    return arr.reshape(-1)


def _metrics(evals_log: Any) -> list[tuple[str, Any]]:
    """``(<eval name>-<metric>, value of the latest round)`` pairs of an ``evals_log``."""
    out = []
    for data_name, metrics in evals_log.items():
        for metric, history in metrics.items():
            if len(history):
                out.append((f"{data_name}-{metric}", history[-1]))
    return out


def _booster_name(model: Any) -> str:
    try:
        return json.loads(model.save_config())["learner"]["gradient_booster"]["name"]
    except (KeyError, ValueError, xgb.core.XGBoostError):
        return "unknown"
