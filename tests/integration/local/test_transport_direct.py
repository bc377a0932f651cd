"""In-process requests of the local mode: answered by moto as over HTTP, errors and faults included."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tornasole.local import LocalMode, LocalSettings
from tornasole.local.moto_patches import in_process_transport as transport
from tornasole.local.moto_patches.versions import speed_patch_checked, speed_patches_enabled

pytestmark = pytest.mark.skipif(
    not (speed_patches_enabled() and speed_patch_checked("in_process_transport")),
    reason="the in-process transport (a speed patch) is off: TORNASOLE_MOTO_SPEED_PATCHES=0 or this moto",
)


@pytest.fixture(scope="module")
def local() -> Iterator[LocalMode]:
    with LocalMode(LocalSettings(port=0)) as mode:
        yield mode


def _ddb(local: LocalMode):
    return boto3.client(
        "dynamodb",
        endpoint_url=local.endpoint,
        config=Config(retries={"mode": "standard", "max_attempts": 1}),
    )


def test_a_service_error_is_the_services_error(local: LocalMode) -> None:
    with pytest.raises(ClientError) as err:
        _ddb(local).get_item(TableName="no-such-table", Key={"pk": {"S": "x"}})
    assert err.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_the_direct_route_answers_dynamodb_and_a_moto_fault_is_a_500(
    local: LocalMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    ddb = _ddb(local)
    assert local.resources is not None
    assert local.resources.table in ddb.list_tables()["TableNames"]
    routed = []
    real = transport._direct_handler

    def spy(service: str):
        routed.append(service)
        return real(service)

    monkeypatch.setattr(transport, "_direct_handler", spy)
    ddb.list_tables()
    assert routed == ["dynamodb"]

    def broken(service: str):
        def fail(*_: object) -> None:
            raise RuntimeError("moto bug")

        return fail

    monkeypatch.setattr(transport, "_direct_handler", broken)
    with pytest.raises(ClientError) as err:
        ddb.list_tables()
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
