"""Every change the local mode makes to moto, applied and undone as one, gated on moto's version.

Why one place: the local mode (``LocalMode.start``/``stop``) and the reliability
suite run moto the same way, and a change made at one of two call sites and not
the other would make the suite test a different moto than users run. The
correctness patches are always applied (on a moto outside ``CHECKED_MOTO`` they
refuse, ``versions``); the speed patches only where ``speed_patches_enabled``.
What each patch is for: the package's docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tornasole.local.moto_patches import (
    dynamodb_answer_serializer,
    dynamodb_expression_cache,
    dynamodb_partition_query,
    dynamodb_request_lock,
    dynamodb_transaction_rollback,
    in_process_transport,
    model_registry,
    repeated_work_cache,
    s3_request_lock,
    sqs_one_receiver,
)
from tornasole.local.moto_patches.versions import (
    check_correctness_patches,
    speed_patch_checked,
    speed_patches_enabled,
)

__all__ = ["CORRECTNESS", "SPEED", "MotoPatch", "adjust_moto", "moto_adjusted", "restore_moto"]


@dataclass(frozen=True)
class MotoPatch:
    """One change to moto: how to apply it and how to undo it (both idempotent)."""

    name: str
    apply: Callable[[], None]
    undo: Callable[[], None]


#: Without these the local mode answers wrongly (lost writes, a message handed to two workers, a
#: completed PUT answered with a 500).
CORRECTNESS: tuple[MotoPatch, ...] = (
    MotoPatch(
        "dynamodb_request_lock",
        dynamodb_request_lock.serialize_dynamodb,
        dynamodb_request_lock.unserialize_dynamodb,
    ),
    MotoPatch("sqs_one_receiver", sqs_one_receiver.patch_receive, sqs_one_receiver.unpatch_receive),
    MotoPatch("s3_request_lock", s3_request_lock.serialize_s3, s3_request_lock.unserialize_s3),
)
#: Without these moto answers the same, slower (and a long run's memory grows).
SPEED: tuple[MotoPatch, ...] = (
    MotoPatch(
        "dynamodb_transaction_rollback",
        dynamodb_transaction_rollback.patch_transactions,
        dynamodb_transaction_rollback.unpatch_transactions,
    ),
    MotoPatch(
        "dynamodb_partition_query",
        dynamodb_partition_query.patch_query,
        dynamodb_partition_query.unpatch_query,
    ),
    MotoPatch(
        "dynamodb_expression_cache", dynamodb_expression_cache.cache, dynamodb_expression_cache.uncache
    ),
    MotoPatch(
        "dynamodb_answer_serializer", dynamodb_answer_serializer.patch, dynamodb_answer_serializer.unpatch
    ),
    MotoPatch("repeated_work_cache", repeated_work_cache.cache, repeated_work_cache.uncache),
    MotoPatch("model_registry", model_registry.stop_registering_models, model_registry.register_models),
    # Nothing to apply: whether the local mode reads moto's stream shard itself (else GetRecords).
    MotoPatch("dynamodb_stream_reader", lambda: None, lambda: None),
    # botocore's handler and signers; the local mode then routes its endpoint (``route_to``).
    MotoPatch("in_process_transport", in_process_transport.install, in_process_transport.uninstall),
)


def adjust_moto(speed: bool | None = None) -> frozenset[str]:
    """Apply the correctness patches, and the speed ones where ``speed`` (default: the version gate).

    Raises ``UnsupportedMotoError`` (nothing applied) on a moto the correctness patches were not
    checked against. A speed patch is applied only on a release it was checked against. Returns
    the names of the speed patches applied.
    """
    check_correctness_patches()
    speed = speed_patches_enabled() if speed is None else speed
    chosen = tuple(p for p in SPEED if speed and speed_patch_checked(p.name))
    for patch in CORRECTNESS + chosen:
        patch.apply()
    return frozenset(p.name for p in chosen)


def restore_moto() -> None:
    """Undo :func:`adjust_moto` (whatever it applied): moto as it was imported."""
    for patch in reversed(CORRECTNESS + SPEED):
        patch.undo()


@contextmanager
def moto_adjusted(speed: bool | None = None) -> Iterator[frozenset[str]]:
    """:func:`adjust_moto` for the duration of a ``with`` block, undone however it ends."""
    applied = adjust_moto(speed)
    try:
        yield applied
    finally:
        restore_moto()
