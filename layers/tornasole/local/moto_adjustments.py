"""Everything the local mode changes in moto, applied and undone as one.

Why one place: the local mode (``LocalMode.start``/``stop``) and the reliability
suite run moto the same way, and a change made at one of two call sites and not
the other would make the suite test a different moto than users run. The three
adjustments, each explained in its own module:

* :mod:`~tornasole.local.moto_guard`: DynamoDB requests serialized (each atomic, as
  on AWS), transactions that save and restore only the items they name, and
  key-condition queries answered by bisection;
* :mod:`~tornasole.local.moto_cache`: work moto repeats on every request though its
  answer never changes (JSONPath parsing, queue attributes), done once;
* :mod:`~tornasole.local.moto_registry`: moto's model objects no longer kept on
  their classes for the life of the process.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tornasole.local import moto_cache, moto_registry
from tornasole.local.moto_guard import serialize_dynamodb, unserialize_dynamodb

__all__ = ["adjust_moto", "moto_adjusted", "restore_moto"]


def adjust_moto() -> None:
    """Apply the local mode's moto adjustments (each is idempotent)."""
    serialize_dynamodb()
    moto_cache.cache()
    moto_registry.stop_registering_models()


def restore_moto() -> None:
    """Undo :func:`adjust_moto`: moto as it was imported."""
    moto_registry.register_models()
    moto_cache.uncache()
    unserialize_dynamodb()


@contextmanager
def moto_adjusted() -> Iterator[None]:
    """:func:`adjust_moto` for the duration of a ``with`` block, undone however it ends."""
    adjust_moto()
    try:
        yield
    finally:
        restore_moto()
