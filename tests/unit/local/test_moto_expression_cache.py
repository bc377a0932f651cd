"""moto answers the same with its expression parsing cached: items, returned values and errors."""

from __future__ import annotations

from typing import Any

import boto3
from moto import mock_aws

from tornasole.evaluator.store.state_table import CONDITIONS
from tornasole.local.moto_patches import dynamodb_expression_cache as moto_expressions

SET_STEP = "ADD workers :w SET step = :step, first_seen = if_not_exists(first_seen, :now), last_seen = :now"
PENDING = "SET gsi1pk = :p, gsi1sk = :s, pending_since = if_not_exists(pending_since, :now) ADD attempts :n"


def _requests() -> list[dict[str, Any]]:
    """UpdateItems as the evaluator sends them, repeated with new values, plus ones moto must refuse."""
    out: list[dict[str, Any]] = []
    for i in range(3):  # the same texts again and again: the cached path from the second on
        key = {"pk": {"S": "job#a"}, "sk": {"S": f"step#{i % 2}"}}
        out.append(
            {
                "Key": key,
                "UpdateExpression": SET_STEP,
                "ReturnValues": "ALL_NEW",
                "ExpressionAttributeValues": {
                    ":w": {"SS": [f"w{i}"]},
                    ":step": {"N": str(i)},
                    ":now": {"N": str(100 + i)},
                },
            }
        )
        out.append(
            {
                "Key": key,
                "UpdateExpression": PENDING,
                "ReturnValues": "ALL_NEW",
                "ConditionExpression": CONDITIONS["step_not_evaluated"],
                "ExpressionAttributeValues": {
                    ":p": {"S": "PENDING"},
                    ":s": {"S": f"a#{i}"},
                    ":now": {"N": str(i)},
                    ":n": {"N": "1"},
                },
            }
        )
        out.append(
            {
                "Key": {"pk": {"S": "job#a"}, "sk": {"S": "META"}},
                "UpdateExpression": "SET expected_steps = :n",
                "ConditionExpression": CONDITIONS["expected_steps_lower"],
                "ExpressionAttributeValues": {":n": {"N": str(5 - i)}},
            }
        )  # fails once lower
        out.append(
            {
                "Key": {"pk": {"S": "job#a"}, "sk": {"S": "META"}},
                "UpdateExpression": "SET #h = list_append(if_not_exists(#h, :e), :v), #s = :s",
                "ConditionExpression": "attribute_not_exists(#s) OR #s <> :s",
                "ExpressionAttributeNames": {"#h": "history", "#s": "status"},
                "ExpressionAttributeValues": {
                    ":e": {"L": []},
                    ":v": {"L": [{"N": str(i)}]},
                    ":s": {"S": f"s{i % 2}"},
                },
                "ReturnValues": "UPDATED_NEW",
            }
        )
        out.append({"Key": key, "UpdateExpression": "SET a = :undefined"})  # a placeholder not given
        out.append({"Key": key, "UpdateExpression": "SET = nothing"})  # not an expression
        out.append(
            {
                "Key": key,
                "UpdateExpression": "REMOVE pending_since, gsi1pk",
                "ConditionExpression": "attribute_exists(pk) AND (#x = :x OR size(workers) > :n)",
                "ExpressionAttributeNames": {"#x": "step"},
                "ExpressionAttributeValues": {":x": {"N": str(i)}, ":n": {"N": "0"}},
            }
        )
    return out


def _run() -> list[Any]:
    """Each request's answer (or error code and message), then the whole table."""
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
        answers: list[Any] = []
        for request in _requests():
            try:
                answers.append(ddb.update_item(TableName="t", **request).get("Attributes"))
            except ddb.exceptions.ClientError as exc:
                answers.append((exc.response["Error"]["Code"], exc.response["Error"]["Message"]))
        answers.append(sorted(ddb.scan(TableName="t")["Items"], key=lambda i: i["sk"]["S"]))
        return answers


def test_cached_parsing_answers_as_moto() -> None:
    expected = _run()
    moto_expressions.cache()
    try:
        assert moto_expressions._originals, "cache() patched nothing on a supported moto"
        cached = _run()
        assert moto_expressions._trees
        assert moto_expressions._tokens
        assert moto_expressions._node_types  # the validator's walkers asked
    finally:
        moto_expressions.uncache()
    assert cached == expected
    assert any(isinstance(a, tuple) and a[0] == "ConditionalCheckFailedException" for a in expected)
    assert any(isinstance(a, tuple) and a[0] == "ValidationException" for a in expected)


def test_cached_tree_is_never_changed_by_moto() -> None:
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    moto_expressions.cache()
    try:
        _run()
        tree, pickled = moto_expressions._trees[PENDING]
        assert UpdateExpressionParser.make(PENDING) is tree
        import pickle

        assert pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL) == pickled
    finally:
        moto_expressions.uncache()
    assert UpdateExpressionParser.make(PENDING) is not UpdateExpressionParser.make(PENDING)
    assert not moto_expressions._trees
