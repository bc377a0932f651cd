"""The local mode's shortcuts in moto answer as moto does: SQS still drops messages past retention."""

from __future__ import annotations

import time
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from tornasole.local.moto_patches import repeated_work_cache as moto_cache


@pytest.fixture
def cached() -> Iterator[None]:
    moto_cache.cache()
    try:
        yield
    finally:
        moto_cache.uncache()


def test_retention_check_reads_the_queues_period(cached: None) -> None:
    from moto.sqs.models import SQSBackend

    assert SQSBackend.is_message_valid_based_on_retention_period is moto_cache._within_retention
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q", Attributes={"MessageRetentionPeriod": "60"})["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="fresh")
        received = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"]
        assert [m["Body"] for m in received] == ["fresh"]

        from moto.sqs.models import sqs_backends

        queue = sqs_backends["123456789012"]["us-east-1"].queues["q"]
        for message in queue._messages:
            message.sent_timestamp = int((time.time() - 61) * 1000)  # older than the retention period
        assert "Messages" not in sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)


def test_uncache_restores_moto(cached: None) -> None:
    from moto.sqs.models import SQSBackend

    moto_cache.uncache()
    assert SQSBackend.is_message_valid_based_on_retention_period is not moto_cache._within_retention
    moto_cache.cache()


def test_action_lookup_is_kept_per_class_and_answers_as_moto(cached: None) -> None:
    import moto.core.responses
    from moto.core.utils import method_names_from_class
    from moto.sqs.responses import SQSResponse

    cached_names = moto.core.responses.method_names_from_class
    assert cached_names is not method_names_from_class
    assert cached_names(SQSResponse) == method_names_from_class(SQSResponse)
    assert "receive_message" in cached_names(SQSResponse)
    moto_cache.uncache()
    assert moto.core.responses.method_names_from_class is method_names_from_class
    moto_cache.cache()
