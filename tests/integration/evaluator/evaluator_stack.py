"""A moto stack built from ``stack_spec`` and the three handlers invoked in-process.

``Stack`` writes trials into moto S3 with the real writer; moto queues an S3
notification per object (the local resources route them to SQS), the test
decides how to deliver them (in order, shuffled, duplicated, concurrently) to
``on_object_created``; ``pump_stream`` hands the table's stream records to
``publish_events`` as Lambda would; EventBridge delivers our events to an SQS
target, which ``events()`` reads back.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from moto_stack import load_handler_file
from tornasole.aws.clients import client
from tornasole.format.writer import StepWriter, TrialWriter
from tornasole.local.resources import LocalResources
from tornasole.modes import ModeKeys
from tornasole.stack_spec import EVENT_ID_FIELD

REPO = Path(__file__).resolve().parents[3]
EVENTS_DIR = REPO / "tests" / "events"
BUCKET = "tornasole-trials"
TRIAL = f"s3://{BUCKET}/jobs/my-job"
COLLECTIONS = {
    "gradients": {"name": "gradients", "include_regex": ["gradients/.*"]},
    "losses": {"name": "losses", "include_regex": ["loss.*"]},
}


def load_handler(name: str) -> ModuleType:
    """Import ``functions/<name>/handler.py`` by path (as Lambda does), as a cold start."""
    return load_handler_file(name)


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS_DIR / name).read_text())


def s3_event(bucket: str, key: str, template: str = "s3_put_index.json") -> dict[str, Any]:
    event = load_event(template)
    event["Records"][0]["s3"]["bucket"]["name"] = bucket
    event["Records"][0]["s3"]["object"]["key"] = key
    return event


class Stack:
    """Resources, writers and handler invocations of one test."""

    def __init__(self, res: LocalResources, context: Any) -> None:
        self.res = res
        self.context = context
        self.on_object = load_handler("on_object_created")
        self.publish = load_handler("publish_events")
        self.scheduled = load_handler("scheduled_check")
        self._last_seq: dict[str, str] = {}

    # -- writing trials ------------------------------------------------------------------
    def writer(self, worker: str = "worker_0", trial: str = TRIAL) -> TrialWriter:
        return TrialWriter(trial, worker=worker)

    def write_step(
        self,
        step: int,
        grad: float = 1.0,
        worker: str = "worker_0",
        trial: str = TRIAL,
        loss: float | None = None,
    ) -> None:
        sw = StepWriter(step, worker, mode=ModeKeys.TRAIN, mode_step=step)
        sw.add_tensor("gradients/fc.weight", np.full((4, 4), grad, dtype=np.float32), wall_time=1.0)
        sw.add_tensor("loss", np.float32(loss if loss is not None else 1.0 / (step + 1)), wall_time=1.0)
        self.writer(worker, trial).write_step(sw)

    def write_collections(self, num_workers: int = 1, worker: str = "worker_0", trial: str = TRIAL) -> None:
        self.writer(worker, trial).write_collections(COLLECTIONS, num_workers)

    def write_end(self, trial: str = TRIAL) -> None:
        self.writer(trial=trial).write_end_marker()

    def put_job_config(self, config: dict[str, Any], trial: str = TRIAL) -> None:
        key = trial.removeprefix(f"s3://{BUCKET}/") + "/tornasole_job.json"
        client("s3").put_object(Bucket=BUCKET, Key=key, Body=json.dumps(config).encode())

    # -- notifications -----------------------------------------------------------------------
    def notifications(self) -> list[dict[str, Any]]:
        """The S3 notifications moto queued since the last call (test events dropped)."""
        sqs, out = client("sqs"), []
        while True:
            msgs = sqs.receive_message(QueueUrl=self.res.notification_queue_url, MaxNumberOfMessages=10)
            if not msgs.get("Messages"):
                return out
            for m in msgs["Messages"]:
                body = json.loads(m["Body"])
                if body.get("Event") != "s3:TestEvent":
                    out.append(body)
                sqs.delete_message(QueueUrl=self.res.notification_queue_url, ReceiptHandle=m["ReceiptHandle"])

    def deliver(self, event: dict[str, Any]) -> dict[str, Any]:
        return self.on_object.handler(event, self.context)

    def pump_stream(self) -> int:
        """Hand new stream records to ``publish_events`` (as the event source mapping would).

        Each pump starts after the last sequence number handed over (moto's iterators go stale).
        """
        streams = client("dynamodbstreams")
        desc = streams.describe_stream(StreamArn=self.res.stream_arn)["StreamDescription"]
        n = 0
        for shard in desc["Shards"]:
            sid = shard["ShardId"]
            last = self._last_seq.get(sid)
            kwargs = {"ShardIteratorType": "TRIM_HORIZON"}
            if last:
                kwargs = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": last}
            while True:
                it = streams.get_shard_iterator(StreamArn=self.res.stream_arn, ShardId=sid, **kwargs)
                records = streams.get_records(ShardIterator=it["ShardIterator"], Limit=100).get("Records", [])
                if not records:
                    break
                for r in records:
                    r.setdefault("eventSourceARN", self.res.stream_arn)
                    r["dynamodb"].pop("ApproximateCreationDateTime", None)
                resp = self.publish.handler({"Records": records}, self.context)
                assert resp == {"batchItemFailures": []}, resp
                self._last_seq[sid] = last = records[-1]["dynamodb"]["SequenceNumber"]
                kwargs = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": last}
                n += len(records)
        return n

    def _drain(self, url: str) -> list[dict[str, Any]]:
        sqs, out = client("sqs"), []
        while True:
            msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
            if not msgs.get("Messages"):
                return out
            for m in msgs["Messages"]:
                out.append(json.loads(m["Body"]))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

    def events(self) -> list[dict[str, Any]]:
        """EventBridge events delivered to the bus's SQS target since the last call."""
        return self._drain(self.res.events_queue_url)

    def alerts(self) -> list[dict[str, Any]]:
        return self._drain(self.res.alerts_queue_url)

    def describe(self, job: str = "my-job") -> dict[str, Any]:
        from tornasole.jobs import describe

        return describe(job)


def event_ids(events: list[dict[str, Any]]) -> list[str]:
    return [e["detail"][EVENT_ID_FIELD] for e in events]
