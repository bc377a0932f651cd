"""One method of one object, wrapped on that instance and handed back on :meth:`InstanceWrap.remove`.

Why on the instance: the hook's in-graph taps (:mod:`tornasole.keras.capture`,
:mod:`tornasole.keras.loss_tap`, :mod:`tornasole.keras.input_tap`) must see what *this* model's step
does, never another model's, so the wrapper is an attribute of the one layer, model, compiled loss or
optimizer, set past Keras's attribute tracking; the class and every other instance keep their method. A
method the instance already had of its own (a user's) is put back as it was; otherwise the attribute
goes, and the class's method shows through again.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

__all__ = ["InstanceWrap"]


class InstanceWrap(ABC):
    """Base of a tap that wraps ``target.<method>``: a subclass builds the wrapper in :meth:`_wrap`."""

    def _install(self, target: Any, method: str) -> None:
        """Replace ``target.<method>`` on the instance with :meth:`_wrap` of the current one."""
        self._target = target
        self._method = method
        self._original = target.__dict__.get(method)
        object.__setattr__(target, method, self._wrap(getattr(target, method)))

    @abstractmethod
    def _wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        """The wrapper that stands in for ``method`` (the target's current one) until :meth:`remove`."""

    def remove(self) -> None:
        """Hand the method back: the instance's own one if it had one, else the class's."""
        if self._original is None:
            self._target.__dict__.pop(self._method, None)
        else:
            object.__setattr__(self._target, self._method, self._original)
