"""The reliability suite's rig: a moto stack, the real handler files, and the scoreboard's counters.

``Rig`` writes trials with the real writer into moto S3, reads the S3
notifications moto queued, hands them to ``functions/on_object_created/handler.py``,
pumps the state table's stream through ``functions/publish_events/handler.py`` and
reads the events EventBridge delivered to its SQS target. ``tally`` measures what
the scoreboard reports: evaluation records lost, duplicate events and steps left
unevaluated, from the stored state (not from what the code under test says).

Scale: defaults are small so the suite runs in the normal ``pytest`` run;
``TORNASOLE_RELIABILITY_FULL=1`` (``make reliability``) runs the full sizes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock
from urllib.parse import unquote_plus

import numpy as np
from moto.core.botocore_stubber import BotocoreStubber

from moto_stack import load_handler_file
from tornasole.aws.clients import client
from tornasole.evaluator.service import Evaluator
from tornasole.evaluator.store.outbox import OutboxPublisher
from tornasole.evaluator.store.state_table import StateTable
from tornasole.format.writer import StepWriter, TrialWriter
from tornasole.jobs import TornasoleJobs
from tornasole.lambda_support.env import HandlerEnv
from tornasole.modes import ModeKeys
from tornasole.stack_spec import EVENT_ID_FIELD

REPO = Path(__file__).resolve().parents[2]
BUCKET = "tornasole-trials"
RULES_PREFIX = f"s3://{BUCKET}/rules/"
FULL = os.environ.get("TORNASOLE_RELIABILITY_FULL", "").strip() in ("1", "true", "yes")
COLLECTIONS = {
    "gradients": {"name": "gradients", "include_regex": ["gradients/.*"]},
    "losses": {"name": "losses", "include_regex": ["loss.*"]},
}
DRAIN_EVERY = 200  # step writes between takes of the notification queue
VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}}


@dataclass
class Scoreboard:
    """What the suite counted; printed as one line at the end of the session."""

    scenarios: int = 0
    passed: int = 0
    hostile: int = 0
    lost: int = 0
    duplicates: int = 0
    unevaluated: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, lost: int = 0, duplicates: int = 0, unevaluated: int = 0, hostile: int = 0) -> None:
        with self.lock:
            self.lost += lost
            self.duplicates += duplicates
            self.unevaluated += unevaluated
            self.hostile += hostile

    def line(self) -> str:
        counts = [
            f"{self.scenarios} scenarios",
            f"{self.passed} passed",
            f"{self.hostile} hostile inputs",
            f"{self.lost} records lost",
            f"{self.duplicates} duplicate events",
            f"{self.unevaluated} unevaluated steps",
        ]
        return "reliability: " + ", ".join(counts)


SCOREBOARD = Scoreboard()


def load_handler(name: str) -> ModuleType:
    """``functions/<name>/handler.py`` imported by path (as Lambda does), its cached services cleared."""
    return load_handler_file(name)


def trial(job: str) -> str:
    return f"s3://{BUCKET}/jobs/{job}"


def note_key(note: dict[str, Any]) -> str:
    return unquote_plus(note["Records"][0]["s3"]["object"]["key"])


class Rig:
    """Resources, writers and handler invocations of one scenario."""

    def __init__(self, res: Any, context: Any) -> None:
        self.res = res
        self.context = context
        self.on_object = load_handler("on_object_created")
        self.publish = load_handler("publish_events")
        self._last_seq: dict[str, str] = {}
        self._drained: list[dict[str, Any]] = []  # notifications taken off the queue while writing
        self._writes = 0

    # -- writing -------------------------------------------------------------------------------
    def write_step(
        self, job: str, step: int, worker: str = "worker_0", grad: float = 1.0, extra: dict | None = None
    ) -> None:
        sw = StepWriter(step, worker, mode=ModeKeys.TRAIN, mode_step=step)
        sw.add_tensor("gradients/fc.weight", np.full((4, 4), grad, dtype=np.float32), wall_time=1.0)
        sw.add_tensor("loss", np.float32(1.0 / (step + 1)), wall_time=1.0)
        for name, value in (extra or {}).items():
            sw.add_tensor(name, value, wall_time=1.0)
        TrialWriter(trial(job), worker=worker).write_step(sw)
        self._writes += 1
        if self._writes % DRAIN_EVERY == 0:
            # moto's SQS walks every queued message on each send, so a queue left to hold the
            # full sizes' 40,000 notifications made each write slower than the last
            self._drained.extend(self._notifications())

    def write_collections(self, job: str, num_workers: int = 1, worker: str = "worker_0") -> None:
        TrialWriter(trial(job), worker=worker).write_collections(COLLECTIONS, num_workers)

    def write_end(self, job: str) -> None:
        TrialWriter(trial(job)).write_end_marker()

    def put(self, key: str, body: bytes) -> None:
        client("s3").put_object(Bucket=BUCKET, Key=key, Body=body)

    @staticmethod
    def register(job: str, rules: list[Any] | None = None, **kw: Any) -> None:
        TornasoleJobs().register_job(job, trial(job), rules if rules is not None else [VG], **kw)

    # -- notifications and handlers ----------------------------------------------------------------
    def notes(self) -> list[dict[str, Any]]:
        """Every S3 notification since the last call, in the order S3 sent them."""
        out, self._drained = self._drained + self._notifications(), []
        return out

    def _notifications(self) -> list[dict[str, Any]]:
        return [b for b in self._drain(self.res.notification_queue_url) if b.get("Event") != "s3:TestEvent"]

    def deliver(self, note: dict[str, Any]) -> dict[str, Any]:
        return self.on_object.handler(note, self.context)["results"][0]

    def deliver_key(self, key: str, bucket: str = BUCKET) -> dict[str, Any]:
        event = json.loads((REPO / "tests" / "events" / "s3_put_index.json").read_text())
        event["Records"][0]["s3"]["bucket"]["name"] = bucket
        event["Records"][0]["s3"]["object"]["key"] = key
        return self.deliver(event)

    def deliver_all(self) -> list[dict[str, Any]]:
        return [self.deliver(n) for n in self.notes()]

    def pump(self) -> int:
        """Hand new stream records to ``publish_events`` (as the event source mapping would)."""
        streams = client("dynamodbstreams")
        desc = streams.describe_stream(StreamArn=self.res.stream_arn)["StreamDescription"]
        n = 0
        for shard in desc["Shards"]:
            sid = shard["ShardId"]
            while True:
                last = self._last_seq.get(sid)
                kwargs: dict[str, Any] = {"ShardIteratorType": "TRIM_HORIZON"}
                if last:
                    kwargs = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": last}
                it = streams.get_shard_iterator(StreamArn=self.res.stream_arn, ShardId=sid, **kwargs)
                records = streams.get_records(ShardIterator=it["ShardIterator"], Limit=100).get("Records", [])
                if not records:
                    break
                self._last_seq[sid] = records[-1]["dynamodb"]["SequenceNumber"]
                # the event source mapping's filter (stack_spec.stream_filter_pattern): outbox inserts only
                records = [r for r in records if r["eventName"] == "INSERT" and self._outbox(r)]
                for r in records:
                    r.setdefault("eventSourceARN", self.res.stream_arn)
                    r["dynamodb"].pop("ApproximateCreationDateTime", None)
                if records:
                    resp = self.publish.handler({"Records": records}, self.context)
                    assert resp == {"batchItemFailures": []}, resp
                n += len(records)
        return n

    @staticmethod
    def _outbox(record: dict[str, Any]) -> bool:
        return record["dynamodb"]["Keys"]["sk"]["S"].startswith("OUTBOX#")

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
        return self._drain(self.res.events_queue_url)

    @staticmethod
    def evaluator(clock_offset: float = 0.0, **kw: Any) -> Evaluator:
        env = HandlerEnv.from_environ()
        return Evaluator(
            StateTable(env.state_table),
            OutboxPublisher.from_env(env),
            clock=lambda: time.time() + clock_offset,
            allowed_rule_prefixes=env.allowed_rule_prefixes,
            trial_bucket=env.trial_bucket,
            **kw,
        )

    def settle(self, job: str | None = None) -> None:
        """What time does: the scheduled check long after every grace period, then the stream.
        With ``job``: only while that job is not completed or has pending steps."""
        for hour in (1, 2, 3, 4):
            if (
                job is not None
                and self.describe_status(job) == "Completed"
                and not self.evaluator().steps.pending()
            ):
                break
            report = self.evaluator(clock_offset=hour * 3600).scheduled_check()
            if job is None and not report.errors and report.steps_redriven == 0:
                break
        self.pump()

    # -- measuring -----------------------------------------------------------------------------
    @staticmethod
    def statuses(job: str) -> dict[str, tuple[str, str]]:
        return {
            s["RuleConfigurationName"]: (s["RuleEvaluationStatus"], s["StatusDetails"])
            for s in TornasoleJobs().rule_job_summary(job)
        }

    @staticmethod
    def describe_status(job: str) -> str:
        return TornasoleJobs().describe(job)["TrainingJobStatus"]

    @staticmethod
    def records(job: str, rule: str = "VanishingGradient") -> dict[int, dict[str, Any]]:
        return {r["step"]: r for r in TornasoleJobs().rule_evaluations(job, rule)}

    def tally(self, job: str, steps: list[int], rules: tuple[str, ...] = ("VanishingGradient",)) -> None:
        """Count, from the stored state, (rule, step) records missing and steps never settled."""
        recorded = {r: self.records(job, r) for r in rules}
        lost = sum(1 for r in rules for s in steps if s not in recorded[r])
        items = StateTable().query(f"JOB#{job}", "STEP#")
        settled = {int(i["step"]) for i in items if "evaluated" in i}
        unevaluated = sum(1 for s in steps if s not in settled)
        SCOREBOARD.add(lost=lost, unevaluated=unevaluated)
        assert lost == 0, f"{lost} evaluation records lost"
        assert unevaluated == 0, f"{unevaluated} steps never evaluated"

    @staticmethod
    def count_duplicates(events: list[dict[str, Any]]) -> list[str]:
        """Event ids in delivery order; duplicates are added to the scoreboard and fail the scenario."""
        ids = [e["detail"][EVENT_ID_FIELD] for e in events]
        dups = sum(n - 1 for n in Counter(ids).values())
        SCOREBOARD.add(duplicates=dups)
        assert dups == 0, f"duplicate events: {Counter(ids).most_common(3)}"
        return ids


@contextmanager
def moto_serialised():
    """moto's in-process backends are not thread-safe: apply each API call atomically (as AWS does),
    while the evaluator's read-decide-commit sequences still interleave between calls."""
    lock = threading.Lock()
    original = BotocoreStubber.__call__

    def one_call_at_a_time(self: BotocoreStubber, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return original(self, *args, **kwargs)

    with mock.patch.object(BotocoreStubber, "__call__", one_call_at_a_time):
        yield
