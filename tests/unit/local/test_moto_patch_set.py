"""``moto_patches.patch_set``: the local mode's changes to moto, applied and undone as one."""

from __future__ import annotations

from typing import Any

import botocore.auth
import jsonpath_ng.ext
import pytest
from moto.core.common_models import BaseModel
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler
from moto.sqs.models import SQSBackend

from tornasole.local.moto_patches import adjust_moto, moto_adjusted, restore_moto
from tornasole.local.moto_patches.versions import speed_patch_checked


def _moto_as_imported() -> dict[str, Any]:
    """What each adjustment replaces, as the classes and modules hold it now."""
    return {
        "Table.query": Table.__dict__.get("query"),
        "DynamoHandler.call_action": DynamoHandler.__dict__.get("call_action"),
        "DynamoDBBackend.transact_write_items": DynamoDBBackend.__dict__.get("transact_write_items"),
        "jsonpath parse": jsonpath_ng.ext.parse,
        "SQS receive": SQSBackend.__dict__.get("receive_message"),
        "BaseModel.__new__": BaseModel.__dict__.get("__new__"),
        "botocore's SigV4 signer": botocore.auth.AUTH_TYPE_MAPS["v4"],
    }


def _expected(before: dict[str, Any]) -> set[str]:
    """Every part, but the in-process transport's signer on a moto it is not applied to."""
    transport = speed_patch_checked("in_process_transport")
    return set(before) - (set() if transport else {"botocore's SigV4 signer"})


def _changed(before: dict[str, Any]) -> set[str]:
    return {name for name, value in _moto_as_imported().items() if value is not before[name]}


def test_adjusting_changes_every_part_and_restoring_puts_each_back() -> None:
    before = _moto_as_imported()
    adjust_moto()
    try:
        adjust_moto()  # idempotent: a second application wraps nothing twice
        changed = _changed(before)
    finally:
        restore_moto()
    assert changed == _expected(before)  # every part, the serialized handlers to the registry
    assert _changed(before) == set()


def test_the_context_manager_restores_moto_when_its_block_raises() -> None:
    before = _moto_as_imported()
    seen: list[set[str]] = []

    def fail_inside() -> None:
        with moto_adjusted():
            seen.append(_changed(before))
            raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        fail_inside()
    assert seen == [_expected(before)]
    assert _changed(before) == set()
