"""The table's stream read in the server's own process, and what the local mode has read forgotten.

A speed patch (``tornasole.local.moto_patches``): the local mode's stream source
reads through GetShardIterator + GetRecords when these are off. Both read
moto's shard under the DynamoDB request lock (``dynamodb_request_lock``).
"""

from __future__ import annotations

from typing import Any

from tornasole.local.moto_patches.dynamodb_request_lock import LOCK

__all__ = ["read_stream", "release_stream"]


def release_stream(table_name: str, consumed_through: int | None) -> None:
    """Forget stream records up to ``consumed_through`` and the iterators handed out so far.

    moto keeps every stream record of a table for ever; each ``GetShardIterator``
    and ``GetRecords`` also leaves an iterator object behind. The local mode is
    the stream's only reader and takes a fresh iterator on every poll, so once
    it has handed records to ``publish_events`` (AWS would age them out after 24 h)
    both can go. Sequence numbers of later records do not change.
    """
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    with LOCK:
        for regions in dynamodbstreams_backends.values():
            for backend in regions.values():
                backend.shard_iterators.clear()
        if consumed_through is None:
            return
        for regions in dynamodb_backends.values():
            for backend in regions.values():
                table = backend.tables.get(table_name)
                shard = getattr(table, "stream_shard", None)
                if shard is None:
                    continue
                drop = min(len(shard.items), consumed_through - shard.starting_sequence_number + 1)
                if drop > 0:
                    shard.items = shard.items[drop:]
                    shard.starting_sequence_number += drop


def read_stream(table_name: str, after: str | None, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` records of the table's stream after sequence number ``after`` (None: the oldest kept).

    What ``GetShardIterator`` + ``GetRecords`` return, read in-process: the local
    mode's stream reader lives in the server's own process, and those two
    requests cost more than the rest of the pipeline's per step (moto serializes
    every record with its new image, botocore parses it back, only for the
    reader to keep the few outbox inserts). Records are in the stream record's
    shape, sequence numbers as text, without ``ApproximateCreationDateTime``.
    Only the top two levels are copies: the images are moto's own, which it
    never changes; a consumer that keeps or changes a record copies it
    (``StreamSource`` does, for what it delivers).
    """
    from moto.dynamodb.models import dynamodb_backends

    with LOCK:
        for regions in dynamodb_backends.values():
            for backend in regions.values():
                shard = getattr(backend.tables.get(table_name), "stream_shard", None)
                if shard is None:
                    continue
                start = 0 if after is None else int(after) + 1 - shard.starting_sequence_number
                picked = shard.items[max(0, start) : max(0, start) + limit]
                return [_record_copy(r.to_json()) for r in picked]
    return []


def _record_copy(record: dict[str, Any]) -> dict[str, Any]:
    dynamodb = {k: v for k, v in record["dynamodb"].items() if k != "ApproximateCreationDateTime"}
    return {**record, "dynamodb": dynamodb}
