"""The Keras releases the hook's taps on private Keras attributes were checked against.

Why a gate: two of the hook's taps read or wrap attributes Keras does not publish, so a Keras release
may rename or reshape them without notice, and a tap that half-works saves wrong tensors under the
right names (a loss from the wrong call, one layer's output under another's name):

* the loss tap (:mod:`tornasole.keras.loss_tap`) wraps ``model._compile_loss.call`` and reads its
  ``_flat_losses`` and ``_user_loss``: ``predictions``, ``labels`` and ``batch_loss/<Kind>``;
* the layer taps (:class:`tornasole.keras.capture.LayerTap`) find the layers with
  ``model._flatten_layers``: every layer's ``inputs``/``outputs``.

Each is on only on a release in :data:`CHECKED_KERAS`. On another, it is off and the hook says once what
it does not save and how to check the release. The taps on public methods (``optimizer.apply`` for the
gradients, ``make_train_function`` for the two train variants) and everything else the hook saves
(weights, biases, optimizer variables, losses, metrics) work on any Keras 3.

How a release joins the table: ``make check-keras-versions KERAS_VERSIONS="3.16.0"`` runs the Keras
hook's tests on it with :data:`tornasole.config.KERAS_UNCHECKED` set; when they pass, add it here.
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import PackageNotFoundError, version

from tornasole import config

__all__ = ["CHECKED_KERAS", "PRIVATE_TAPS", "installed_keras", "private_tap_enabled"]

logger = logging.getLogger(__name__)

#: Every Keras release the hook's tests (tests/frameworks/test_keras_{hook,capture,loss_values}.py)
#: passed on with the private taps on, with tensorflow-cpu 2.21.0, oldest first.
CHECKED_KERAS: tuple[str, ...] = (
    "3.10.0",
    "3.11.3",
    "3.12.4",
    "3.13.2",
    "3.14.0",
    "3.14.1",
    "3.15.0",
    "3.15.1",
)

#: Each tap on a private attribute -> what it saves (said when it is off).
PRIVATE_TAPS: dict[str, str] = {
    "loss": "predictions, labels and batch_loss (model._compile_loss)",
    "layers": "layer inputs and outputs (model._flatten_layers)",
}

_ON = {"1", "true", "yes", "on"}
_warned: set[tuple[str, str]] = set()  # (release, tap) already said to be off


def installed_keras() -> str:
    """The installed Keras's version: the imported module's, else the distribution's."""
    try:
        import keras

        found = getattr(keras, "__version__", None)
        if found:
            return str(found)
    except ImportError:
        pass
    try:
        return version("keras")
    except PackageNotFoundError:
        return "not installed"


def private_tap_enabled(tap: str, keras_version: str | None = None) -> bool:
    """Whether the private-attribute tap ``tap`` (a key of :data:`PRIVATE_TAPS`) may run on
    ``keras_version`` (default: the installed one): a checked release, or the environment's
    :data:`tornasole.config.KERAS_UNCHECKED` says to try it. Says once per release and tap when not.

    Examples
    --------
    >>> private_tap_enabled("loss", "3.15.1")
    True
    """
    if tap not in PRIVATE_TAPS:
        raise ValueError(f"unknown private Keras tap {tap!r}: one of {', '.join(PRIVATE_TAPS)}")
    found = installed_keras() if keras_version is None else keras_version
    if found in CHECKED_KERAS:
        return True
    if os.environ.get(config.KERAS_UNCHECKED, "").strip().lower() in _ON:
        return True
    if (found, tap) not in _warned:
        _warned.add((found, tap))
        logger.warning(
            "Tornasole: Keras %s is not a release the hook's tap on private Keras attributes was checked "
            "against (%s): %s are not saved. To try it: %s=1; to check it: make check-keras-versions "
            "KERAS_VERSIONS=%s",
            found,
            ", ".join(CHECKED_KERAS),
            PRIVATE_TAPS[tap],
            config.KERAS_UNCHECKED,
            found,
        )
    return False
