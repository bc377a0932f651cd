"""The local mode's DynamoDB patches to moto answer exactly as moto does, only cheaper."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from tornasole.aws.clients import clear_client_cache, client
from tornasole.local.moto_patches import read_stream, release_stream
from tornasole.local.moto_patches.dynamodb_partition_query import patch_query, unpatch_query
from tornasole.local.moto_patches.dynamodb_request_lock import serialize_dynamodb, unserialize_dynamodb
from tornasole.local.moto_patches.dynamodb_transaction_rollback import (
    patch_transactions,
    unpatch_transactions,
)

TABLE = "guard-t"
# a transaction item whose condition fails on an existing item ("c", "s00"): it cancels the transaction
_CANCELLING_CHECK = {
    "ConditionCheck": {
        "TableName": TABLE,
        "Key": {"pk": {"S": "c"}, "sk": {"S": "s00"}},
        "ConditionExpression": "attribute_not_exists(pk)",
    }
}


def _patch_dynamodb() -> None:
    """The request lock with the speed patches that rely on it, as the local mode applies them."""
    serialize_dynamodb()
    patch_query()
    patch_transactions()


def _unpatch_dynamodb() -> None:
    unpatch_transactions()
    unpatch_query()
    unserialize_dynamodb()


@pytest.fixture
def ddb() -> Iterator[object]:
    with mock_aws():
        clear_client_cache()
        c = client("dynamodb")
        c.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk")],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        )
        for p in ("a", "b", "c"):
            for i in range(7):
                item = {"pk": {"S": p}, "sk": {"S": f"s{i:02d}"}, "v": {"N": str(i)}}
                c.put_item(TableName=TABLE, Item=item)
        for sk in ("#j", "b#0", "b#1", "b#2", "m#0", "m#1", "m#2", "x#0", "m", "b#10"):  # put out of order
            c.put_item(TableName=TABLE, Item={"pk": {"S": "d"}, "sk": {"S": sk}, "v": {"N": "1"}})
        yield c
    clear_client_cache()


QUERIES = [
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "b"}}},
    {
        "KeyConditionExpression": "pk = :p AND sk < :s",
        "ExpressionAttributeValues": {":p": {"S": "b"}, ":s": {"S": "s04"}},
        "ScanIndexForward": False,
        "Limit": 2,
    },
    {
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
        "FilterExpression": "v > :n",
        "ExpressionAttributeValues": {":p": {"S": "c"}, ":s": {"S": "s0"}, ":n": {"N": "3"}},
    },
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "nope"}}},
    # Sort key conditions (the view holds the run and its neighbours): every page and LastEvaluatedKey
    # as moto gives them, Limit reached on the run's last item included.
    *[
        {
            "KeyConditionExpression": f"pk = :p AND {cond}",
            "ExpressionAttributeValues": {":p": {"S": "d"}, **values},
            "ScanIndexForward": forward,
            **({"Limit": limit} if limit else {}),
        }
        for cond, values in [
            ("begins_with(sk, :s)", {":s": {"S": "m#"}}),
            ("begins_with(sk, :s)", {":s": {"S": "zz"}}),
            ("sk BETWEEN :a AND :b", {":a": {"S": "b#1"}, ":b": {"S": "m#2"}}),
            ("sk = :s", {":s": {"S": "m#1"}}),
            ("sk < :s", {":s": {"S": "m#0"}}),
            ("sk <= :s", {":s": {"S": "b#2"}}),
            ("sk > :s", {":s": {"S": "m#1"}}),
            ("sk >= :s", {":s": {"S": "a"}}),
        ]
        for forward in (True, False)
        for limit in (None, 1, 2, 3)
    ],
]


def _pages(c, q: dict) -> list[dict]:
    out, start = [], None
    while True:
        resp = c.query(TableName=TABLE, **q, **({"ExclusiveStartKey": start} if start else {}))
        out.append({k: resp.get(k) for k in ("Items", "Count", "ScannedCount", "LastEvaluatedKey")})
        start = resp.get("LastEvaluatedKey")
        if not start:
            return out


@pytest.mark.parametrize("query", QUERIES)
def test_a_partition_query_answers_as_moto_does(ddb, query: dict) -> None:
    from moto.dynamodb.models.table import Table

    expected = _pages(ddb, query)
    moto_query = Table.query
    _patch_dynamodb()
    try:
        assert Table.query is not moto_query  # the partition query is the one answering
        assert _pages(ddb, query) == expected
    finally:
        _unpatch_dynamodb()
    assert Table.query is moto_query


def test_read_stream_is_the_stream_in_order_after_a_position_and_survives_release(ddb) -> None:
    records = read_stream(TABLE, None, 1000)
    assert [r["eventName"] for r in records] == ["INSERT"] * 31  # the fixture's puts
    assert records[4]["dynamodb"]["Keys"] == {"pk": {"S": "a"}, "sk": {"S": "s04"}}
    assert records[4]["dynamodb"]["NewImage"]["v"] == {"N": "4"}
    assert "ApproximateCreationDateTime" not in records[0]["dynamodb"]  # not JSON: a Lambda event is
    seqs = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
    assert seqs == list(range(seqs[0], seqs[0] + 31))
    last = records[-1]["dynamodb"]["SequenceNumber"]
    assert read_stream(TABLE, last, 1000) == []
    assert len(read_stream(TABLE, None, 5)) == 5

    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "e"}, "sk": {"S": "x"}})
    ddb.delete_item(TableName=TABLE, Key={"pk": {"S": "e"}, "sk": {"S": "x"}})
    release_stream(TABLE, int(last))  # what was handed over is forgotten, not the numbering
    new = read_stream(TABLE, last, 1000)
    assert [r["eventName"] for r in new] == ["INSERT", "REMOVE"]
    assert [int(r["dynamodb"]["SequenceNumber"]) for r in new] == [seqs[-1] + 1, seqs[-1] + 2]
    assert read_stream(TABLE, None, 1000) == new  # released records are gone
    assert read_stream("no-such-table", None, 10) == []


def _items(c) -> list[dict]:
    return sorted(c.scan(TableName=TABLE)["Items"], key=lambda i: (i["pk"]["S"], i["sk"]["S"]))


def test_a_cancelled_transaction_leaves_the_table_as_it_was(ddb) -> None:
    """Put into an existing partition, update an existing item, then a failing condition: all undone."""
    _patch_dynamodb()
    try:
        before = _items(ddb)
        with pytest.raises(ddb.exceptions.TransactionCanceledException):
            ddb.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "a"}, "sk": {"S": "new"}}}},
                    {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "z"}, "sk": {"S": "new"}}}},
                    {
                        "Update": {
                            "TableName": TABLE,
                            "Key": {"pk": {"S": "b"}, "sk": {"S": "s01"}},
                            "UpdateExpression": "SET v = :v",
                            "ExpressionAttributeValues": {":v": {"N": "99"}},
                        }
                    },
                    _CANCELLING_CHECK,
                ]
            )
        assert _items(ddb) == before
        ddb.transact_write_items(  # and one that succeeds still writes
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "a"}, "sk": {"S": "new"}}}},
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": {"pk": {"S": "a"}, "sk": {"S": "s01"}},
                        "UpdateExpression": "SET v = :v",
                        "ExpressionAttributeValues": {":v": {"N": "7"}},
                    }
                },
            ]
        )
        after = {(i["pk"]["S"], i["sk"]["S"]): i.get("v") for i in _items(ddb)}
        assert after[("a", "new")] is None
        assert after[("a", "s01")] == {"N": "7"}
        assert len(after) == len(before) + 1
    finally:
        _unpatch_dynamodb()


def test_a_sort_key_condition_narrows_the_partition_moto_walks(ddb, monkeypatch: pytest.MonkeyPatch) -> None:
    from tornasole.local.moto_patches import dynamodb_partition_query as moto_query

    views: list[int] = []
    narrow = moto_query._in_key_range

    def counting(part, comparison, bounds):  # noqa: ANN001, ANN202
        view = narrow(part, comparison, bounds)
        views.append(len(view))
        return view

    monkeypatch.setattr(moto_query, "_in_key_range", counting)
    _patch_dynamodb()
    try:
        items = ddb.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
            ExpressionAttributeValues={":p": {"S": "d"}, ":s": {"S": "m#"}},
        )["Items"]
    finally:
        _unpatch_dynamodb()
    assert [i["sk"]["S"] for i in items] == ["m#0", "m#1", "m#2"]
    assert views == [5]  # the run of 3 and its neighbours ("m" and "x#0"), of the partition's 10


def test_queries_answer_as_moto_does_after_the_partition_changed(ddb) -> None:
    """The sorted partition follows puts, overwrites, deletes and a cancelled transaction's undo."""
    from moto.dynamodb.models import dynamodb_backends

    from tornasole.local.moto_patches.dynamodb_partition_query import SortedPartition

    _patch_dynamodb()
    try:
        _pages(ddb, QUERIES[4])  # converts partition "d"
        table = dynamodb_backends["123456789012"]["us-east-1"].tables[TABLE]
        assert isinstance(next(p for h, p in table.items.items() if h.value == "d"), SortedPartition)
        for sk in ("m#00", "a", "zz", "m#1", "b#05"):  # new keys, before, after and inside runs; an overwrite
            ddb.put_item(TableName=TABLE, Item={"pk": {"S": "d"}, "sk": {"S": sk}, "v": {"N": "2"}})
        for sk in ("m#2", "#j", "no-such-key"):
            ddb.delete_item(TableName=TABLE, Key={"pk": {"S": "d"}, "sk": {"S": sk}})
        with pytest.raises(ddb.exceptions.TransactionCanceledException):
            ddb.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "d"}, "sk": {"S": "m#05"}}}},
                    {"Delete": {"TableName": TABLE, "Key": {"pk": {"S": "d"}, "sk": {"S": "b#0"}}}},
                    _CANCELLING_CHECK,
                ]
            )
        ours = [_pages(ddb, q) for q in QUERIES]
    finally:
        _unpatch_dynamodb()
    assert ours == [_pages(ddb, q) for q in QUERIES]  # moto's own answers over the same items


def test_a_cancelled_transaction_leaves_no_stream_record(ddb) -> None:
    _patch_dynamodb()
    try:
        before = read_stream(TABLE, None, 1000)
        with pytest.raises(ddb.exceptions.TransactionCanceledException):
            ddb.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "a"}, "sk": {"S": "new"}}}},
                    _CANCELLING_CHECK,
                ]
            )
        assert read_stream(TABLE, None, 1000) == before
        ddb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "sk": {"S": "later"}})
        after = read_stream(TABLE, None, 1000)
        assert len(after) == len(before) + 1
        seq = [int(r["dynamodb"]["SequenceNumber"]) for r in (before[-1], after[-1])]
        assert seq[1] == seq[0] + 1
    finally:
        _unpatch_dynamodb()


def test_transactions_neither_copy_the_table_nor_leave_objects_behind(ddb) -> None:
    """A long local run made one table copy per transaction, and moto's registry kept them all."""
    import gc

    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import Table

    from tornasole.local.moto_patches.model_registry import register_models, stop_registering_models

    _patch_dynamodb()
    stop_registering_models()
    try:
        tracked = len(Item.instances_tracked)
        for i in range(30):
            ddb.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "a"}, "sk": {"S": f"t{i}"}}}},
                    {
                        "Update": {
                            "TableName": TABLE,
                            "Key": {"pk": {"S": "b"}, "sk": {"S": "s01"}},
                            "UpdateExpression": "SET v = :v",
                            "ExpressionAttributeValues": {":v": {"N": str(i)}},
                        }
                    },
                ]
            )
        gc.collect()
        assert sum(isinstance(o, Table) for o in gc.get_objects()) == 1
        assert len(Item.instances_tracked) == tracked
        item = ddb.get_item(TableName=TABLE, Key={"pk": {"S": "b"}, "sk": {"S": "s01"}})["Item"]
        assert item["v"] == {"N": "29"}
    finally:
        register_models()
        _unpatch_dynamodb()
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "sk": {"S": "moto-again"}})
    assert len(Item.instances_tracked) > tracked  # moto's own registration is back
