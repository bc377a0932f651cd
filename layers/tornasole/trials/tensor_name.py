"""A tensor name that also works as the :class:`~tornasole.trials.tensor.Tensor` it names.

smdebug's ``trial.tensors_in_collection(...)`` returns names; Tornasole's 2019
documentation iterated the same call and used the items as Tensors
(``t.value(step)``, ``t.steps()``). Returning a ``str`` subclass serves both:
it is equal to, hashes like, sorts like and pickles as the plain name, and any
attribute ``str`` does not have (none of the Tensor API clashes with ``str``'s)
is looked up on ``trial.tensor(name)``, fetched when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tornasole.trials.tensor import Tensor

__all__ = ["TensorName"]


class TensorName(str):
    """The name of a saved tensor of ``trial``; ``.value(step)`` is ``trial.tensor(name).value(step)``.

    Examples
    --------
    >>> for t in trial.tensors_in_collection("losses"):  # doctest: +SKIP
    ...     print(t, t == "loss", t.steps(), t.value(0))
    loss True [0, 1, 2] [0.53]
    """

    _trial: Any

    def __new__(cls, name: str, trial: Any) -> TensorName:
        obj = super().__new__(cls, name)
        obj._trial = trial
        return obj

    @property
    def name(self) -> str:
        """The plain name (a Tensor's ``name``)."""
        return str(self)

    @property
    def tensor(self) -> Tensor:
        """The Tensor this name stands for."""
        return self._trial.tensor(str(self))

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr == "_trial":
            raise AttributeError(attr)
        return getattr(self.tensor, attr)

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        return (str, (str(self),))

    def __repr__(self) -> str:
        return str.__repr__(self)
