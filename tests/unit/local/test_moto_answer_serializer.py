"""moto's DynamoDB answers are byte for byte the same with the short path for attribute values."""

from __future__ import annotations

import random
from typing import Any

import boto3
from moto import mock_aws
from moto.core.serialize import XFormedAttributePicker, get_serializer_class
from moto.core.utils import get_service_model

from tornasole.local.moto_patches import dynamodb_answer_serializer as moto_serialize


def _value(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    kinds = ["S", "N", "BOOL", "NULL", "SS", "NS", "B", "BS"] + (["M", "L"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "S":
        return {"S": rng.choice(["", "x", "é ü", "a" * 50, "{}"])}
    if kind == "N":
        return {"N": rng.choice(["0", "-1.5", "12345678901234567890"])}
    if kind in ("BOOL", "NULL"):
        return {kind: rng.random() < 0.5 or kind == "NULL"}
    if kind == "SS":
        return {"SS": ["a", "b"][: rng.randint(1, 2)]}
    if kind == "NS":
        return {"NS": ["1", "2.5"]}
    if kind == "B":
        return {"B": rng.choice([b"\x00\x01", "YWJj"])}  # moto's own path (it encodes again)
    if kind == "BS":
        return {"BS": [b"\x01"]}
    if kind == "M":
        return {"M": {f"k{i}": _value(rng, depth + 1) for i in range(rng.randint(0, 4))}}
    return {"L": [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]}


def _serialize(operation: str, result: dict[str, Any]) -> Any:
    model = get_service_model("dynamodb").operation_model(operation)
    serializer = get_serializer_class("dynamodb", "json")(
        operation_model=model, pretty_print=False, value_picker=XFormedAttributePicker()
    )
    return serializer.serialize(result)


def _results() -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(7)
    items = [{f"a{i}": _value(rng) for i in range(12)} for _ in range(40)]
    odd = [
        {"x": {"S": 5}},
        {"x": {"S": "a", "N": "1"}},
        {"x": {"M": {"": {"S": "e"}}}},
        {"x": {"L": [{"Q": 1}]}},
    ]
    return [
        ("Query", {"Items": items + odd, "Count": len(items) + len(odd), "ScannedCount": 44}),
        ("GetItem", {"Item": items[0]}),
        ("UpdateItem", {"Attributes": items[1]}),
        ("GetItem", {}),
    ]


def test_short_path_writes_what_moto_writes() -> None:
    expected = [_serialize(op, result) for op, result in _results()]
    moto_serialize.patch()
    try:
        assert moto_serialize._originals, "patch() did nothing on a supported moto"
        patched = [_serialize(op, result) for op, result in _results()]
    finally:
        moto_serialize.unpatch()
    assert patched == expected
    assert '"M": {"k0"' in expected[0]["body"]  # nested maps were in the sample


def test_values_moto_must_decide_are_left_to_it() -> None:
    assert moto_serialize.plain_attribute_value({"B": "YWJj"}) is None
    assert moto_serialize.plain_attribute_value({"S": 5}) is None
    assert moto_serialize.plain_attribute_value({"L": [{"S": "a"}, {"BS": []}]}) is None
    value = {"M": {"a": {"L": [{"N": "1"}, {"SS": ["x"]}]}}}
    copied = moto_serialize.plain_attribute_value(value)
    assert copied == value
    assert copied["M"]["a"]["L"] is not value["M"]["a"]["L"]


def test_round_trip_through_boto3() -> None:
    item = {"pk": {"S": "p"}, "sk": {"S": "s"}, "b": {"B": b"\x00\xff"}, **_results()[1][1]["Item"]}

    def run() -> Any:
        with mock_aws():
            ddb = boto3.client("dynamodb", region_name="us-east-1")
            ddb.create_table(
                TableName="t",
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
            ddb.put_item(TableName="t", Item=item)
            return ddb.query(
                TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p"}}
            )["Items"]

    expected = run()
    moto_serialize.patch()
    try:
        assert run() == expected
    finally:
        moto_serialize.unpatch()
    assert expected[0]["b"] == {"B": b"\x00\xff"}
