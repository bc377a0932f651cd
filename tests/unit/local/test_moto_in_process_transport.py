"""S3 requests served in-process by the local transport answer exactly as the server does over TCP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tornasole.local.moto_patches import in_process_transport as transport
from tornasole.local.moto_patches.versions import CHECKED_MOTO, CHECKED_SPEED_PATCHES, installed_moto

# A checked release this patch is known not to work on (it is not applied there); any other is tested.
pytestmark = pytest.mark.skipif(
    installed_moto() in set(CHECKED_MOTO) - set(CHECKED_SPEED_PATCHES["in_process_transport"]),
    reason=f"moto {installed_moto()} lacks what the in-process transport calls; it is not applied there",
)


def _client(endpoint: str) -> Any:
    import boto3

    return boto3.session.Session().client("s3", endpoint_url=endpoint, region_name="us-east-1")


def _exchange(s3: Any, bucket: str) -> list[Any]:
    """Uploads, ranged and whole reads, a listing, a missing key: what the evaluator and hooks do."""
    keys = ["run/index/000000000/000000000001_worker_0.json", "run/odd key %2F+é.json"]
    out: list[Any] = []
    for i, key in enumerate(keys):
        s3.put_object(Bucket=bucket, Key=key, Body=f"body-{i}".encode() * 10)
    out.append(s3.get_object(Bucket=bucket, Key=keys[1])["Body"].read())
    ranged = s3.get_object(Bucket=bucket, Key=keys[0], Range="bytes=2-9")
    out.append((ranged["ResponseMetadata"]["HTTPStatusCode"], ranged["Body"].read()))
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="run/")
    out.append(sorted((o["Key"], o["Size"]) for o in listed["Contents"]))
    with pytest.raises(s3.exceptions.ClientError) as missing:
        s3.head_object(Bucket=bucket, Key="run/absent")
    out.append(missing.value.response["Error"]["Code"])
    s3.delete_object(Bucket=bucket, Key=keys[0])
    out.append([o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]])
    return out


@pytest.fixture
def routed(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Route the session's moto server in-process; yields the services answered without WSGI."""
    served: list[str] = []
    direct = transport._direct

    def counting(request: Any, service: str, handler: Any) -> Any:
        served.append(service)
        return direct(request, service, handler)

    monkeypatch.setattr(transport, "_direct", counting)
    transport.route_to(moto_endpoint)
    try:
        yield served
    finally:
        transport.unroute(moto_endpoint)
        transport.uninstall()  # botocore as it was


def test_s3_in_process_answers_like_the_server(moto_endpoint: str, routed: list[str]) -> None:
    over_tcp, in_process = (f"tcp-{uuid.uuid4().hex[:12]}", f"local-{uuid.uuid4().hex[:12]}")
    transport.unroute(moto_endpoint)
    expected = _exchange(_s3_client_with_bucket(moto_endpoint, over_tcp), over_tcp)
    assert routed == []
    transport.route_to(moto_endpoint)
    assert _exchange(_s3_client_with_bucket(moto_endpoint, in_process), in_process) == expected
    assert routed
    assert set(routed) == {"s3"}
    assert expected[1] == (206, b"dy-0body")


def _s3_client_with_bucket(endpoint: str, bucket: str) -> Any:
    s3 = _client(endpoint)
    s3.create_bucket(Bucket=bucket)
    return s3


def _authorization_sent(client: Any) -> list[str]:
    sent: list[str] = []

    def capture(request: Any, **_: Any) -> None:
        sent.append(request.headers["Authorization"].decode())

    client.meta.events.register_first("before-send", capture)
    return sent


def test_in_process_requests_are_not_hmac_signed_others_are(moto_endpoint: str) -> None:
    import boto3

    transport.unroute(moto_endpoint)
    session = boto3.session.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
    over_tcp = session.client("sqs", endpoint_url=moto_endpoint, region_name="eu-west-1")
    tcp_sent = _authorization_sent(over_tcp)
    over_tcp.list_queues()
    transport.route_to(moto_endpoint)
    try:
        in_process = session.client("sqs", endpoint_url=moto_endpoint, region_name="eu-west-1")
        local_sent = _authorization_sent(in_process)
        url = in_process.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        arn = in_process.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        elsewhere = session.client("sqs", endpoint_url="http://127.0.0.1:9", region_name="eu-west-1")
        elsewhere_sent = _authorization_sent(elsewhere)
        elsewhere.meta.events.register("before-send", lambda **_: _refused())
        with pytest.raises(Exception, match="refused"):
            elsewhere.list_queues()
    finally:
        transport.unroute(moto_endpoint)
        transport.uninstall()
    # moto read the region and the account from the header: the queue is in eu-west-1.
    assert arn.startswith("arn:aws:sqs:eu-west-1:")
    assert all(s.endswith("Signature=" + "0" * 64) for s in local_sent)
    scope = "Credential=AKIDEXAMPLE/"
    assert all(scope in s and "/eu-west-1/sqs/aws4_request" in s for s in local_sent + tcp_sent)
    assert tcp_sent
    assert not tcp_sent[0].endswith("0" * 64)
    assert elsewhere_sent
    assert not elsewhere_sent[0].endswith("0" * 64)


def _refused() -> Any:
    raise ConnectionRefusedError("refused (no request leaves the test)")
