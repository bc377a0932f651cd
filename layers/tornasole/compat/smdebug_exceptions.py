"""``smdebug.exceptions`` under the alias: Tornasole's exceptions plus smdebug's other names.

Code written for smdebug catches ``SMDebugValueError``, ``SMDebugError`` and
friends. Here they are Tornasole's own classes where one plays the same role
(so ``except SMDebugValueError`` catches a :class:`~tornasole.exceptions.ConfigurationError`),
and small subclasses of :class:`~tornasole.exceptions.TornasoleError` where
Tornasole never raises that kind (catching them is harmless).
"""

from __future__ import annotations

import tornasole.exceptions as _exc
from tornasole.exceptions import *  # noqa: F403 - the module re-exports every Tornasole exception
from tornasole.exceptions import (
    ConfigurationError,
    TensorUnavailableForStep,
    TornasoleError,
    TornasoleValueError,
)

SMDebugError = TornasoleError
SMDebugCustomerError = TornasoleError
SMDebugValueError = TornasoleValueError
InvalidCollectionConfiguration = ConfigurationError


class SMDebugTypeError(TornasoleError, TypeError):
    """smdebug's type error (Tornasole raises ``ConfigurationError`` or ``TypeError`` instead)."""


class SMDebugRuntimeError(TornasoleError, RuntimeError):
    """smdebug's runtime error (not raised by Tornasole)."""


class SMDebugNotImplementedError(TornasoleError, NotImplementedError):
    """smdebug's not-implemented error (not raised by Tornasole)."""


# The reader may define its own; if not, a shape request that finds no shape is a missing value too.
ShapeUnavailableForStep = getattr(_exc, "ShapeUnavailableForStep", TensorUnavailableForStep)

__all__ = [  # noqa: PLE0604 - extends the star-imported names
    *_exc.__all__,
    "SMDebugError",
    "SMDebugCustomerError",
    "SMDebugValueError",
    "SMDebugTypeError",
    "SMDebugRuntimeError",
    "SMDebugNotImplementedError",
    "InvalidCollectionConfiguration",
    "ShapeUnavailableForStep",
]
