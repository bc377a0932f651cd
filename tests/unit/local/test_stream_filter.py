"""The local stream source hands ``publish_events`` exactly what the stack's filter lets through on AWS."""

from __future__ import annotations

import pytest

from tornasole.local.filters import compile_pattern
from tornasole.stack_spec import DEFAULT_SPEC


def _record(event: str, sk: str) -> dict:
    return {"eventName": event, "dynamodb": {"Keys": {"pk": {"S": "JOB#a"}, "sk": {"S": sk}}}}


def test_the_stack_filter_keeps_outbox_inserts_only() -> None:
    wanted = compile_pattern(DEFAULT_SPEC.stream_filter_pattern)
    assert wanted(_record("INSERT", "OUTBOX#0001"))
    assert not wanted(_record("MODIFY", "OUTBOX#0001"))  # the outbox row's claim / published mark
    assert not wanted(_record("REMOVE", "OUTBOX#0001"))
    assert not wanted(_record("INSERT", "STEP#000000000001"))
    assert not wanted({"eventName": "INSERT", "dynamodb": {}})  # a field the pattern names is missing


def test_exact_values_lists_and_nested_objects() -> None:
    wanted = compile_pattern({"a": {"b": [1, "x"]}, "c": [{"prefix": "p-"}]})
    assert wanted({"a": {"b": 1}, "c": "p-1", "other": 0})
    assert wanted({"a": {"b": ["y", "x"]}, "c": "p-"})  # a list in the record: any element
    assert not wanted({"a": {"b": 2}, "c": "p-1"})
    assert not wanted({"a": {"b": 1}, "c": "q-1"})
    assert not wanted({"a": "b", "c": "p-1"})


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ('{"eventName": [{"anything-but": "REMOVE"}]}', "eventName: unsupported operator"),
        ('{"eventName": "INSERT"}', "eventName must be an object or a list"),
        ("[1]", "must be a JSON object"),
    ],
)
def test_an_operator_it_does_not_know_is_refused_not_matched(pattern: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        compile_pattern(pattern)
