"""Reduction records: tag naming, and the numpy maths for computing one.

A saved reduction is an ordinary tensor record whose tag is
``smdebug/reductions/[abs_]<reduction>/<tensor name>`` (FORMAT.md 2.4), with any
``:<digits>`` (TF output index) removed from the tensor name. Readers map the tag
back with :func:`parse_reduction_tag`, and compute a reduction that was not saved
with :func:`compute`.

Numerics. Plain reductions are numpy's (``np.amin``, ``np.amax``, ``np.mean``,
``np.std``, ``np.var``, ``np.sum``, ``np.prod``), as smdebug's
``get_numpy_reduction``, so results keep numpy's dtype rules (``mean`` of float32 is
float32, of int32 is float64; ``sum`` of int32 is int64). Norms are *vector* norms
of the flattened tensor, ``np.linalg.norm(x.ravel(), ord=1|2)``: that is what the
hooks save (``torch.norm(t, p)`` flattens). smdebug's numpy path differs for
matrices: it calls ``np.linalg.norm(x, ord)`` unflattened, which for a 2-D array is
the *matrix* 1-norm / spectral norm and for 3-D and up raises; we deliberately do
not reproduce that (a saved ``l2`` and a computed one then agree). ``abs`` applies
``np.absolute`` first. smdebug returns a numpy scalar; we return the same value as
a 0-d array (``result[()]`` gives the scalar, ``result.reshape(1)`` the shape-[1]
array smdebug's core writer stores).
"""

from __future__ import annotations

import re

import numpy as np

__all__ = [
    "REDUCTIONS_PREFIX",
    "REDUCTIONS",
    "NORMS",
    "STATISTICS",
    "ALL_REDUCTIONS",
    "canonical_reduction",
    "reduction_tag",
    "parse_reduction_tag",
    "compute",
]

REDUCTIONS_PREFIX = "smdebug/reductions/"
REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod")
NORMS = ("l1", "l2")
#: Tornasole's own reductions, written by the PyTorch hook's statistics mode (smdebug reads them as
#: stored reductions; it cannot compute them from a full tensor)
STATISTICS = ("zero_fraction", "nonfinite_count")
ALL_REDUCTIONS = REDUCTIONS + NORMS + STATISTICS
_ALIASES = {"l1_norm": "l1", "l2_norm": "l2"}
_COLON_INDEX = re.compile(r":\d+")
_NUMPY = {
    "min": np.amin,
    "max": np.amax,
    "mean": np.mean,
    "std": np.std,
    "variance": np.var,
    "sum": np.sum,
    "prod": np.prod,
    "zero_fraction": lambda d: np.float32(np.count_nonzero(d == 0) / d.size) if d.size else np.float32("nan"),
    "nonfinite_count": lambda d: np.float32(d.size - np.count_nonzero(np.isfinite(d))),
}


_CANONICAL = {name: name for name in ALL_REDUCTIONS}
#: dtypes whose mean, sum, min and max are computed by the ufunc reduce directly (see ``compute``).
_FAST_CHARS = ("f", "d")  # float32, float64 (either byte order: the ufuncs handle it as np.mean does)
_add_reduce = np.add.reduce
_FAST_REDUCE = {"sum": np.add.reduce, "min": np.minimum.reduce, "max": np.maximum.reduce}


def canonical_reduction(name: str) -> str:
    """Return the canonical reduction name (``l2_norm`` -> ``l2``), or raise ``ValueError``.

    Examples
    --------
    >>> canonical_reduction("l2_norm"), canonical_reduction("mean")
    ('l2', 'mean')
    """
    canon = _ALIASES.get(name, name)
    if canon not in ALL_REDUCTIONS:
        raise ValueError(
            f"unknown reduction {name!r}; expected one of {', '.join(ALL_REDUCTIONS)} (or l1_norm, l2_norm)"
        )
    return canon


def reduction_tag(tensor_name: str, reduction: str, abs: bool = False) -> str:
    """The tag a reduction record is saved under.

    Examples
    --------
    >>> reduction_tag("gradient/Net_fc1.weight", "mean", abs=True)
    'smdebug/reductions/abs_mean/gradient/Net_fc1.weight'
    >>> reduction_tag("dense/kernel:0", "l2_norm")
    'smdebug/reductions/l2/dense/kernel'
    """
    red = canonical_reduction(reduction)
    name = _COLON_INDEX.sub("", tensor_name)
    return f"{REDUCTIONS_PREFIX}{'abs_' if abs else ''}{red}/{name}"


def parse_reduction_tag(tag: str) -> tuple[str, str, bool] | None:
    """Split a reduction tag into ``(tensor_name, reduction, abs)``; ``None`` if it is not one.

    Examples
    --------
    >>> parse_reduction_tag("smdebug/reductions/abs_l2/relu_output_0")
    ('relu_output_0', 'l2', True)
    >>> parse_reduction_tag("relu_output_0") is None
    True
    """
    if not tag.startswith(REDUCTIONS_PREFIX):
        return None
    red, sep, name = tag[len(REDUCTIONS_PREFIX) :].partition("/")
    if not sep or not name:
        return None
    is_abs = red.startswith("abs_")
    if is_abs:
        red = red[4:]
    red = _ALIASES.get(red, red)
    if red not in ALL_REDUCTIONS:
        return None
    return name, red, is_abs


def compute(array: np.ndarray, reduction: str, abs: bool = False) -> np.ndarray:
    """Compute one reduction of ``array`` with numpy (see the module docstring for the maths).

    Parameters
    ----------
    array : array-like
        The full tensor.
    reduction : str
        One of ``min max mean std variance sum prod l1 l2 zero_fraction nonfinite_count``
        (``l1_norm``/``l2_norm`` accepted).
    abs : bool
        Reduce ``np.absolute(array)`` instead.

    Returns
    -------
    numpy.ndarray
        A 0-d array of the dtype numpy's reduction produces.

    Raises
    ------
    ValueError
        Unknown reduction name, or ``min``/``max`` of an empty array.

    Examples
    --------
    >>> compute(np.float32([[3, -4]]), "l2").item(), compute(np.float32([-3, 1]), "max", abs=True).dtype
    (5.0, dtype('float32'))
    """
    red = _CANONICAL.get(reduction) or canonical_reduction(reduction)
    data = np.asarray(array)
    if abs:
        data = np.absolute(data)
    if data.dtype.char in _FAST_CHARS and data.size:
        # numpy's own reductions minus their Python wrappers (a few microseconds a call): the
        # same ufunc reduce over every axis, and for ``mean`` the same division as ``np.mean``.
        if red == "mean":
            total = _add_reduce(data, axis=None)
            return np.asarray(total.dtype.type(total / data.size))
        fast = _FAST_REDUCE.get(red)
        if fast is not None:
            return np.asarray(fast(data, axis=None))
    if red in NORMS:
        return np.asarray(np.linalg.norm(data.ravel(), ord=1 if red == "l1" else 2))
    return np.asarray(_NUMPY[red](data))
