"""ExplodingTensor: NaN (or infinite) values appeared.

Choices: with neither ``collection_names`` nor ``tensor_regex`` every tensor
saved at the step is inspected (a NaN anywhere is worth knowing about, and the
DG's example only narrows it to gradients). Values are read in full; a tensor
saved only as reductions is checked through its saved reductions (a NaN or Inf
in the values makes every reduction NaN/Inf, so this loses nothing).
``only_nan=True`` ignores ±Inf.
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.generic.base import COLLECTION_NAMES, TENSOR_REGEX, BuiltinRule
from tornasole.rules.params import Param

__all__ = ["ExplodingTensor"]


class ExplodingTensor(BuiltinRule):
    """Fires when any inspected tensor holds NaN (or ±Inf unless ``only_nan``).

    Parameters
    ----------
    collection_names : str or list, optional
    tensor_regex : str, optional
    only_nan : bool or str
        Default ``False``.

    Examples
    --------
    >>> # invoke_rule(ExplodingTensor(trial, collection_names="gradients"))
    """

    LIKELY_CAUSE = (
        "NaN/Inf in {tensor}: the training diverged (learning rate too high, unnormalised inputs, a log "
        "or division of 0)"
    )
    SUGGESTED_FIX = (
        "lower the learning rate 10x, clip gradients, normalise inputs, or use a stable loss "
        "(log_softmax, BCEWithLogitsLoss)"
    )

    READS_EARLIER_STEPS = False
    PARAMETERS = (
        COLLECTION_NAMES,
        TENSOR_REGEX,
        Param("only_nan", "bool", "False", "True: only NaN fires (Inf is ignored)"),
    )

    def invoke_at_step(self, step: int) -> bool:
        if self.collection_names or self.tensor_regex is not None:
            names = self.selected(step)
        else:
            names = self.base_trial.tensor_names(step=step)
        for name in names:
            v = self.value(name, step)
            if v is None:
                try:
                    v = np.asarray(
                        list(self.base_trial.tensor(name).reduction_values(step).values()), dtype=float
                    )
                except Exception:  # noqa: BLE001 - nothing readable for this tensor: nothing to check
                    continue
            if v.dtype.kind not in "fc":
                continue
            n_nan = int(np.count_nonzero(np.isnan(v)))
            n_inf = 0 if self.only_nan else int(np.count_nonzero(np.isinf(v)))
            if n_nan or n_inf:
                what = "NaN" if self.only_nan else "NaN/Inf"
                self.report_issue(
                    f"{name} has {n_nan} NaN and {n_inf} Inf of {v.size} values ({what} check)",
                    tensor=name,
                    nan_count=n_nan,
                    inf_count=n_inf,
                    size=int(v.size),
                )
                return True
        return False
