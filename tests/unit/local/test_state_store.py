"""--state-dir: what is saved comes back byte for byte, binary attributes included; keys stay inside."""

from __future__ import annotations

from pathlib import Path

import pytest
from moto import mock_aws

from tornasole.aws.clients import clear_client_cache, client
from tornasole.exceptions import TornasoleValueError
from tornasole.local.state_store import (
    STATE_FILE,
    _object_path,
    check_bucket,
    restore_objects,
    restore_table,
    save_state,
)

INDEX = "run/index/000000000/000000000000_worker_0.json"
ITEM = {"pk": {"S": "JOB#a"}, "sk": {"S": "RULE#r"}, "blob": {"B": b"\x00\xffbin"}, "n": {"N": "3"}}


def _table(name: str = "t") -> None:
    client("dynamodb").create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    )


def test_save_then_restore_into_an_empty_endpoint(tmp_path: Path) -> None:
    with mock_aws():
        clear_client_cache()
        client("s3").create_bucket(Bucket="bkt-state")
        client("s3").put_object(Bucket="bkt-state", Key=INDEX, Body=b"{}")
        client("s3").put_object(Bucket="bkt-state", Key="run/events/x.tfevents", Body=bytes(range(256)))
        _table()
        client("dynamodb").put_item(TableName="t", Item=ITEM)
        assert save_state(tmp_path, "bkt-state", "t") == {"objects": 2, "written": 2, "items": 1}
        # Unchanged objects are not written again; a deleted one disappears from the saved state.
        client("s3").delete_object(Bucket="bkt-state", Key="run/events/x.tfevents")
        assert save_state(tmp_path, "bkt-state", "t") == {"objects": 1, "written": 0, "items": 1}
        assert not (tmp_path / "s3" / "run/events/x.tfevents").exists()
    with mock_aws():
        clear_client_cache()
        assert restore_objects(tmp_path) == "bkt-state"
        _table()
        assert restore_table(tmp_path, "t") == 1
        body = client("s3").get_object(Bucket="bkt-state", Key=INDEX)["Body"]
        assert body.read() == b"{}"
        assert (
            client("dynamodb").get_item(TableName="t", Key={"pk": ITEM["pk"], "sk": ITEM["sk"]})["Item"]
            == ITEM
        )
    clear_client_cache()


def test_a_key_cannot_escape_the_state_dir(tmp_path: Path) -> None:
    with pytest.raises(TornasoleValueError, match="escapes"):
        _object_path(tmp_path, "../../etc/passwd")


def test_a_damaged_state_file_is_named(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text("{not json")
    with pytest.raises(TornasoleValueError, match=f"{STATE_FILE}: cannot read the saved local state"):
        restore_objects(tmp_path)


def test_a_state_dir_belongs_to_one_bucket(tmp_path: Path) -> None:
    with mock_aws():
        clear_client_cache()
        client("s3").create_bucket(Bucket="bkt-state")
        _table()
        save_state(tmp_path, "bkt-state", "t")
    clear_client_cache()
    check_bucket(tmp_path, "bkt-state")
    with pytest.raises(TornasoleValueError, match="holds the local state of bucket 'bkt-state', not 'other'"):
        check_bucket(tmp_path, "other")
