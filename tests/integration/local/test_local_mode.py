"""The local mode behaves like the deployed stack: a worker per function, ordered events, no dead thread."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote_plus

import numpy as np
import pytest

from tornasole.aws.clients import client
from tornasole.format.writer import StepWriter, TrialWriter
from tornasole.jobs import describe, register_job, rule_job_summary
from tornasole.local import LocalMode, LocalSettings
from tornasole.local.moto_patches.versions import speed_patch_checked, speed_patches_enabled
from tornasole.modes import ModeKeys

RULE = "ExplodingTensor"
STOP = json.dumps({"name": "stoptraining"})


@pytest.fixture
def local() -> Iterator[LocalMode]:
    with LocalMode(LocalSettings(port=0)) as mode:
        yield mode


class Events:
    def __init__(self, local: LocalMode) -> None:
        self.seen: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        assert local.dispatcher is not None
        local.dispatcher.event_subscribers.append(self._on)

    def _on(self, event: dict[str, Any]) -> None:
        with self.cond:
            self.seen.append(event)
            self.cond.notify_all()

    def wait_for(self, predicate, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for e in self.seen:
                    if predicate(e):
                        return e
                left = deadline - time.monotonic()
                assert left > 0, (
                    f"no matching event in {timeout} s; seen {[e['detail-type'] for e in self.seen]}"
                )
                self.cond.wait(left)


def job_status(job: str, status: str):
    def match(e: dict[str, Any]) -> bool:
        d = e["detail"]
        return (
            d.get("TrainingJobName") == job
            and d.get("TrainingJobStatus") == status
            and "RuleConfigurationName" not in d
        )

    return match


def register(local: LocalMode, job: str, stop: bool = False) -> str:
    params = {"rule_to_invoke": RULE, **({"action_json": STOP} if stop else {})}
    trial = f"{local.trial_root}{job}"
    register_job(job, trial, [{"RuleConfigurationName": RULE, "RuleParameters": params}])
    return trial


def write_run(trial: str, losses: list[float], end: bool = True) -> None:
    writer = TrialWriter(trial)
    writer.write_collections({"losses": {"name": "losses", "include_regex": ["loss.*"]}}, 1)
    for step, loss in enumerate(losses):
        sw = StepWriter(step, "worker_0", mode=ModeKeys.TRAIN, mode_step=step)
        sw.add_tensor("loss", np.float32(loss), wall_time=1.0)
        writer.write_step(sw)
    if end:
        writer.write_end_marker()


def test_a_run_is_evaluated_and_events_arrive_in_commit_order(local: LocalMode) -> None:
    events = Events(local)
    trial = register(local, "ordered", stop=True)
    write_run(trial, [1.0, 0.5, float("nan"), 0.2])
    events.wait_for(job_status("ordered", "Stopping"), timeout=60)
    assert local.drain(timeout=60)
    # The stop signal the hook polls for is in the trial.
    assert client("s3").head_object(Bucket=local.settings.bucket, Key="ordered/tornasole_stop_training.json")
    job_events = [e["detail"] for e in events.seen if e["detail"].get("TrainingJobName") == "ordered"]
    changes = [d for d in job_events if "RuleConfigurationName" not in d]
    # Commit order: each state change is newer than the one before, and once a rule has a verdict
    # no later event shows it InProgress again (the bug was InProgress printed after the verdict).
    modified = [int(d["LastModifiedTime"]) for d in changes]
    assert modified == sorted(modified)
    verdict_seen = False
    for d in changes:
        (status,) = [s["RuleEvaluationStatus"] for s in d["DebugRuleEvaluationStatuses"]]
        verdict_seen = verdict_seen or status == "IssuesFound"
        assert not (verdict_seen and status == "InProgress"), changes
    assert verdict_seen
    assert local.dispatcher is not None
    assert local.dispatcher.errors == []


def test_publishing_never_waits_behind_evaluations(local: LocalMode) -> None:
    assert local.dispatcher is not None
    events = Events(local)
    invoker = local.dispatcher.on_object_created
    original, release, entered = invoker.handler, threading.Event(), threading.Event()

    def stuck(event: dict[str, Any], context: Any) -> Any:
        entered.set()
        release.wait(60)
        return original(event, context)

    invoker.handler = stuck
    try:
        trial = register(local, "busy")
        write_run(trial, [1.0, 0.5], end=False)
        assert entered.wait(30), "no evaluation started"
        # Every evaluation worker is stuck; a registration's event is still published at once.
        register(local, "waiting")
        events.wait_for(job_status("waiting", "InProgress"), timeout=10)
    finally:
        release.set()
        invoker.handler = original


def test_a_rule_calling_sys_exit_fails_the_invocation_not_the_worker(local: LocalMode) -> None:
    assert local.dispatcher is not None
    invoker = local.dispatcher.on_object_created
    original, calls = invoker.handler, []

    def exits(event: dict[str, Any], context: Any) -> Any:
        key = unquote_plus(event["Records"][0]["s3"]["object"]["key"])  # moto encodes even "/"
        if key.startswith("exits/"):
            calls.append(key)
            raise SystemExit(3)
        return original(event, context)

    invoker.handler = exits
    client("s3").put_object(Bucket=local.settings.bucket, Key="exits/tornasole_job.json", Body=b"{}")
    assert local.drain(timeout=30)
    # Retried as Lambda retries an asynchronous invocation, then reported once.
    assert calls == ["exits/tornasole_job.json"] * 3
    assert local.dispatcher.errors == ["OnObjectCreated failed 3 times: SystemExit: 3"]
    # Both workers are alive: two runs are still evaluated.
    events = Events(local)
    for job in ("after-1", "after-2"):
        write_run(register(local, job), [1.0, float("nan")])
    for job in ("after-1", "after-2"):
        events.wait_for(job_status(job, "Completed"), timeout=60)
    assert [s["RuleEvaluationStatus"] for s in rule_job_summary("after-2")] == ["IssuesFound"]


def test_the_stream_survives_a_failed_transaction(local: LocalMode) -> None:
    # moto rolls a failed TransactWriteItems back by swapping in a copy of the table (and of its stream
    # shard); a reader that only chains NextShardIterator would never see another record.
    events = Events(local)
    assert local.resources is not None
    ddb = client("dynamodb")
    with pytest.raises(ddb.exceptions.TransactionCanceledException):
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": local.resources.table,
                        "Item": {"pk": {"S": "X"}, "sk": {"S": "Y"}},
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                }
            ]
        )
    register(local, "after-rollback")
    events.wait_for(job_status("after-rollback", "InProgress"), timeout=10)
    assert describe("after-rollback")["TrainingJobStatus"] == "InProgress"


def test_disabled_metrics_do_not_pile_up(local: LocalMode) -> None:
    from tornasole.lambda_support.observability import metrics

    write_run(register(local, "metrics"), [1.0, 0.5])
    assert local.drain(timeout=60)
    assert metrics.metric_set == {}


# Run in a fresh interpreter: the claim is about a process that starts a local mode, and botocore's
# handler list is process-wide state other tests of a long session may have rebuilt.
SOCKET_PROBE = """
import json, os, boto3, urllib3.connection
from tornasole.local import LocalMode, LocalSettings
from tornasole.local.moto_patches.versions import speed_patch_checked, speed_patches_enabled

connects = []
original = urllib3.connection.HTTPConnection.connect

def counting(self):
    connects.append(f"{self.host}:{self.port}")
    original(self)

urllib3.connection.HTTPConnection.connect = counting
with LocalMode(LocalSettings(port=0)) as local:
    os.environ.update(local.environment())
    session = boto3.session.Session()  # a session created while the local mode runs carries the route
    s3, ddb = session.client("s3"), session.client("dynamodb")
    s3.put_object(Bucket=local.settings.bucket, Key="own/x.bin", Body=b"\\x00\\x01")
    own = s3.get_object(Bucket=local.settings.bucket, Key="own/x.bin")["Body"].read() == b"\\x00\\x01"
    table = ddb.describe_table(TableName=local.resources.table)["Table"]["TableName"] == local.resources.table
    in_process = list(connects)
    # Any other address of the server (what another process uses) still goes over the socket.
    port = local.endpoint.rsplit(":", 1)[1]
    other = session.client("s3", endpoint_url=f"http://localhost:{port}")
    body = other.get_object(Bucket=local.settings.bucket, Key="own/x.bin")["Body"].read()
    via_socket = body == b"\\x00\\x01"
    print(json.dumps({"own": own, "table": table, "in_process": in_process,
                      "via_socket": via_socket, "socket_connects": connects[len(in_process):]}))
"""


def test_this_process_reaches_its_own_endpoint_without_a_socket(tmp_path: Any) -> None:
    """With the in-process transport (a speed patch) on, this process's own calls open no socket; with it
    off (TORNASOLE_MOTO_SPEED_PATCHES=0, or a moto it was not checked on: `make test-moto-newest`) the
    same calls go over the socket and still work."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", SOCKET_PROBE], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["own"]
    assert result["table"]
    assert result["via_socket"]
    assert result["socket_connects"]
    if speed_patches_enabled() and speed_patch_checked("in_process_transport"):
        assert result["in_process"] == []
    else:
        assert result["in_process"], "with the transport patch off, this process's own calls use the socket"


def test_a_failed_transaction_rolls_back_its_own_writes_only(local: LocalMode) -> None:
    # The local mode snapshots only the partitions a transaction writes (moto copies the whole table).
    assert local.resources is not None
    ddb, table = client("dynamodb"), local.resources.table

    def key(pk: str, sk: str) -> dict[str, Any]:
        return {"pk": {"S": pk}, "sk": {"S": sk}}

    ddb.put_item(TableName=table, Item={**key("P", "a"), "v": {"N": "1"}})
    ddb.put_item(TableName=table, Item={**key("R", "c"), "v": {"N": "7"}})
    with pytest.raises(ddb.exceptions.TransactionCanceledException):
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table,
                        "Key": key("P", "a"),
                        "UpdateExpression": "SET v = :two",
                        "ExpressionAttributeValues": {":two": {"N": "2"}},
                    }
                },
                {"Put": {"TableName": table, "Item": key("Q", "new")}},
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": key("R", "c"),
                        "ConditionExpression": "v = :zero",
                        "ExpressionAttributeValues": {":zero": {"N": "0"}},
                    }
                },
            ]
        )
    assert ddb.get_item(TableName=table, Key=key("P", "a"))["Item"]["v"] == {"N": "1"}
    assert "Item" not in ddb.get_item(TableName=table, Key=key("Q", "new"))
    assert ddb.get_item(TableName=table, Key=key("R", "c"))["Item"]["v"] == {"N": "7"}
    ddb.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": table,
                    "Key": key("P", "a"),
                    "UpdateExpression": "SET v = :two",
                    "ExpressionAttributeValues": {":two": {"N": "2"}},
                }
            },
            {"Put": {"TableName": table, "Item": key("Q", "new")}},
        ]
    )
    assert ddb.get_item(TableName=table, Key=key("P", "a"))["Item"]["v"] == {"N": "2"}
    assert "Item" in ddb.get_item(TableName=table, Key=key("Q", "new"))
    assert ddb.get_item(TableName=table, Key=key("R", "c"))["Item"]["v"] == {"N": "7"}
