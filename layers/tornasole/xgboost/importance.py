"""Feature importances of a tree booster: the five ``get_score`` types, bit for bit, for less.

XGBoost computes every type in one C function (``XGBoosterFeatureScore``),
walking every tree of the model: ``weight`` is the split count of each
feature, ``total_gain`` / ``total_cover`` the float32 sums of the splits'
loss change / hessian sum, and ``gain`` / ``cover`` those totals divided by
the split count in float32. So three walks give all five types (dividing in
float32 here gives the very values ``get_score`` returns), and calling the C
function directly skips ``Booster.get_score``'s Python wrapping, which costs
more than the walk itself on models of a few hundred trees.

The direct call uses xgboost's own library handle and argument encoding; if
they are missing (another xgboost version) or the scores are not one value
per feature (multi-target trees), ``Booster.get_score`` is used instead.
"""

from __future__ import annotations

import ctypes
import json
import logging
from typing import Any

import numpy as np

__all__ = [
    "IMPORTANCE_TYPES",
    "feature_importances",
    "feature_scores",
    "five_types",
    "importance_shares",
    "importance_table",
]

logger = logging.getLogger(__name__)

IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")
# the arguments Booster.get_score passes (no feature map), encoded once
_ARGS = {
    kind: json.dumps({"importance_type": kind, "feature_map": ""}).encode()
    for kind in ("weight", "total_gain", "total_cover")
}


def feature_importances(model: Any) -> dict[str, dict[str, float]]:
    """The five ``get_score`` importance types of ``model``, ``{type: {feature: score}}``."""
    table = _table(model)
    if isinstance(table, dict):
        return table
    features, scores = table
    return {kind: dict(zip(features, row)) for kind, row in zip(IMPORTANCE_TYPES, scores.tolist())}


def importance_table(model: Any) -> tuple[tuple[str, ...], np.ndarray] | dict[str, dict[str, float]]:
    """``(features, float32 scores of shape (5, features))``, rows in :data:`IMPORTANCE_TYPES` order:
    :func:`feature_importances` without its dictionaries (a hook saves every value anyway); that
    function's dictionaries where the three walks do not list the same features (never seen)."""
    return _table(model)


def importance_shares(
    table: tuple[tuple[str, ...], np.ndarray] | dict[str, dict[str, float]],
    names_cache: dict[tuple[str, ...], list[str]],
) -> tuple[list[str], list[np.ndarray]]:
    """What a hook saves of an :func:`importance_table`: ``feature_importance/<type>/<feature>``
    names and their ``[share]`` values, each type normalized to sum 1 (summed in order, as smdebug
    did), all five divided at once. The names list comes from ``names_cache`` (one list per feature
    list, the same object each round)."""
    if isinstance(table, dict):  # the walks listed different features: type by type
        names, values = [], []
        for kind in IMPORTANCE_TYPES:
            row = list(table[kind].values())
            names += [f"feature_importance/{kind}/{f}" for f in table[kind]]
            values += list(np.divide(row, float(sum(row)) or 1.0).reshape(-1, 1))
        return names, values
    features, scores = table
    totals = [float(sum(row)) or 1.0 for row in scores.tolist()]
    # float32 scores over float64 totals: each float32 widened, as the per-type lists were
    shares = np.divide(scores, np.array(totals)[:, None])
    names = names_cache.get(features)
    if names is None:
        if len(names_cache) >= 64:  # the split features change early in training
            names_cache.clear()
        names = names_cache[features] = [
            f"feature_importance/{kind}/{f}" for kind in IMPORTANCE_TYPES for f in features
        ]
    return names, list(shares.reshape(-1, 1))


def _table(model: Any) -> tuple[tuple[str, ...], np.ndarray] | dict[str, dict[str, float]]:
    weight_names, weight = _scores(model, "weight")
    gain_names, total_gain = _scores(model, "total_gain")
    cover_names, total_cover = _scores(model, "total_cover")
    if not weight_names == gain_names == cover_names:  # each lists the split features; never seen
        weights = dict(zip(weight_names, weight.tolist()))
        return _by_name(weights, gain_names, total_gain, cover_names, total_cover)
    return weight_names, five_types(weight, total_gain, total_cover)


def five_types(weight: np.ndarray, total_gain: np.ndarray, total_cover: np.ndarray) -> np.ndarray:
    """The ``(5, features)`` float32 table from the three walked sums: ``gain`` and ``cover`` are the
    totals over the split count, divided in float32 as XGBoost does."""
    splits = np.maximum(np.float32(1.0), weight)
    gain = total_gain / splits  # float32 / float32: XGBoost's own division
    cover = total_cover / splits
    return np.stack((weight, gain, cover, total_gain, total_cover))


def _by_name(weight: dict[str, float], *named: Any) -> dict[str, dict[str, float]]:
    """The same scores when the three lists of features differ: divided feature by feature."""
    one = np.float32(1.0)
    out: dict[str, dict[str, float]] = {"weight": weight}
    for kind, names, totals in (("gain", *named[:2]), ("cover", *named[2:])):
        splits = [max(one, np.float32(weight.get(f, 0.0))) for f in names]
        out[kind] = {f: float(t / s) for f, t, s in zip(names, totals, splits)}
        out[f"total_{kind}"] = dict(zip(names, totals.tolist()))
    return {kind: out[kind] for kind in IMPORTANCE_TYPES}


def feature_scores(model: Any, kind: str) -> tuple[list[str], np.ndarray]:
    """``(features, float32 scores)`` of ``model.get_score(importance_type=kind)``, in its order."""
    names, scores = _scores(model, kind)
    return list(names), np.array(scores)  # the caller's own (the direct call's array is read-only)


def _scores(model: Any, kind: str) -> tuple[tuple[str, ...], np.ndarray]:
    direct = _direct_scores(model, kind)
    if direct is not None:
        return direct
    scores = model.get_score(importance_type=kind)
    return tuple(scores), np.asarray(list(scores.values()), dtype=np.float32)


def _direct_scores(
    model: Any, kind: str, args: bytes | None = None
) -> tuple[tuple[str, ...], np.ndarray] | None:
    """The C function's ``(features, float32 scores)`` for ``kind``, over every tree or over the
    trees ``args`` (its JSON arguments) names; ``None`` where the C API or one score per feature is
    missing."""
    lib, check, ulong = _c_api()
    if lib is None:
        return None
    n_features, dim = ulong(), ulong()
    names = ctypes.POINTER(ctypes.c_char_p)()
    shape = ctypes.POINTER(ulong)()
    values = ctypes.POINTER(ctypes.c_float)()
    check(
        lib.XGBoosterFeatureScore(
            model.handle,
            args or _ARGS[kind],
            ctypes.byref(n_features),
            ctypes.byref(names),
            ctypes.byref(dim),
            ctypes.byref(shape),
            ctypes.byref(values),
        )
    )
    count = n_features.value
    if dim.value != 1 or shape[0] != count:
        return None  # a score vector per feature (multi-target trees): get_score's lists
    if count == 0:
        return (), np.zeros(0, dtype=np.float32)
    # copied out at once: the buffers belong to the booster (string_at is a memcpy; as_array costs more)
    scores = np.frombuffer(ctypes.string_at(values, 4 * count), dtype=np.float32)
    return _names(names[:count]), scores


# the latest feature names seen, raw and decoded: the three walks of a round, and round after round,
# list the same features (one tuple, replaced whole: several hooks may share it)
_last_names: list[tuple[list[bytes], tuple[str, ...]]] = [([], ())]


def _names(raw: list[bytes]) -> tuple[str, ...]:
    last = _last_names[0]
    if raw == last[0]:
        return last[1]
    decoded = tuple(_text(name) for name in raw)
    _last_names[0] = (raw, decoded)
    return decoded


def _text(raw: bytes) -> str:
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        return raw.decode("utf-8")


_C_API: list[Any] = []


def _c_api() -> tuple[Any, Any, Any]:
    """xgboost's loaded library, its error check and its ``bst_ulong`` type (``None``s if absent)."""
    if not _C_API:
        try:
            from xgboost import core

            found = (core._LIB, core._check_call, core.c_bst_ulong)
            found[0].XGBoosterFeatureScore  # noqa: B018 - the symbol must exist
        except (ImportError, AttributeError):
            logger.debug("xgboost's C API is not reachable; feature importances use Booster.get_score")
            found = (None, None, None)
        _C_API.append(found)
    return _C_API[0]
