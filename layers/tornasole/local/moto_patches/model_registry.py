"""moto's registry of model objects, kept from growing for as long as the local mode runs.

A speed patch (``tornasole.local.moto_patches``): memory, for a long run.

moto appends every model object it creates to a list on its class: every
DynamoDB item version a write makes, every SQS message, every copy moto takes.
Only its dashboard reads those lists and only its reset empties them, so a
local mode that evaluated ten thousand steps held every item version it ever
wrote, replaced or deleted, and the memory grew with every step. While the
local mode runs, objects are no longer registered; S3's keep being, because
moto's reset closes the keys' buffers through that list.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register_models", "stop_registering_models"]

_ORIGINAL: list[Any] = []
_KEPT = ("moto.s3.",)  # services whose reset walks the list


def _new(cls: type, *args: Any, **kwargs: Any) -> Any:
    from moto.core.common_models import BaseModel

    instance = super(BaseModel, cls).__new__(cls)  # type: ignore[misc]
    if cls.__module__.startswith(_KEPT):
        cls.instances_tracked.append(instance)  # type: ignore[attr-defined]
    return instance


def stop_registering_models() -> None:
    """New moto model objects (S3's aside) are no longer added to their class's list (idempotent)."""
    from moto.core.common_models import BaseModel

    if not _ORIGINAL:
        _ORIGINAL.append(BaseModel.__dict__["__new__"])
        BaseModel.__new__ = staticmethod(_new)  # type: ignore[assignment,method-assign]


def register_models() -> None:
    """moto's own registration back."""
    from moto.core.common_models import BaseModel

    if _ORIGINAL:
        BaseModel.__new__ = _ORIGINAL.pop()  # type: ignore[method-assign]
