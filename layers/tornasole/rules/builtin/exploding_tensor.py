"""ExplodingTensor: NaN (or infinite) values appeared.

Choices: with neither ``collection_names`` nor ``tensor_regex`` every tensor
saved at the step is inspected (a NaN anywhere is worth knowing about, and the
DG's example only narrows it to gradients). Values are read in full; a tensor
saved only as reductions is checked through its saved reductions (a NaN or Inf
in the values makes every reduction NaN/Inf, so this loses nothing).
``only_nan=True`` ignores ±Inf.

``skip_scaler_overflow`` (off by default): a step where only tensors of the
``gradients`` collection are not finite while the step's saved losses are
finite is a step a mixed-precision loss scaler skipped (PyTorch's GradScaler
and DeepSpeed check the gradients for Inf/NaN, skip the update and lower the
scale): the weights never see those gradients. Such a step is passed over; a
run that diverges shows a non-finite loss or weights, which still fire. A step
with no loss saved is judged as before. (Families benchmark: every run with
one skipped fp16 step alarmed.)
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.builtin.base import COLLECTION_NAMES, TENSOR_REGEX, BuiltinRule
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
        Param(
            "skip_scaler_overflow",
            "bool",
            "False",
            "pass over a step where only gradients are not finite and the saved losses are (a step an fp16 "
            "loss scaler skipped)",
        ),
    )

    def invoke_at_step(self, step: int) -> bool:
        if self.collection_names or self.tensor_regex is not None:
            names = self.selected(step)
        else:
            names = self.base_trial.tensor_names(step=step)
        found: list[tuple[str, int, int, int]] = []
        for name in names:
            bad = self._non_finite(name, step)
            if bad is not None:
                found.append((name, *bad))
                if not self.skip_scaler_overflow:
                    break
        if not found or (self.skip_scaler_overflow and self._scaler_skipped(step, {f[0] for f in found})):
            return False
        name, n_nan, n_inf, size = found[0]
        what = "NaN" if self.only_nan else "NaN/Inf"
        self.report_issue(
            f"{name} has {n_nan} NaN and {n_inf} Inf of {size} values ({what} check)",
            tensor=name,
            nan_count=n_nan,
            inf_count=n_inf,
            size=size,
        )
        return True

    def _non_finite(self, name: str, step: int) -> tuple[int, int, int] | None:
        """``(NaN count, Inf count, size)`` of ``name`` at ``step`` when it holds any, else None."""
        v = self.value(name, step)
        if v is None:
            try:
                v = np.asarray(
                    list(self.base_trial.tensor(name).reduction_values(step).values()), dtype=float
                )
            except Exception:  # noqa: BLE001 - nothing readable for this tensor: nothing to check
                return None
        if v.dtype.kind not in "fc":
            return None
        n_nan = int(np.count_nonzero(np.isnan(v)))
        n_inf = 0 if self.only_nan else int(np.count_nonzero(np.isinf(v)))
        return (n_nan, n_inf, int(v.size)) if n_nan or n_inf else None

    def _scaler_skipped(self, step: int, bad: set[str]) -> bool:
        """Only gradients are not finite at ``step``, and it saved losses, every one finite."""
        if not bad <= set(self.names_at(step, ["gradients"])):
            return False
        losses = self.names_at(step, ["losses"])
        return bool(losses) and all(self._non_finite(n, step) is None for n in losses)
