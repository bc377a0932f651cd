"""The stack writes a job's HTML report into its trial when the job ends, and says where.

Through the real handlers on moto: the completion event (``SageMaker Training Job State Change``,
``Completed``) and ``describe`` carry ``TornasoleReportLocation``; the report holds the job's verdicts
and the step where its rule fired; a report that cannot be rendered leaves the job Completed with the
location null.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote_plus

import pytest
from evaluator_stack import BUCKET, TRIAL, Stack

from tornasole.aws.clients import client
from tornasole.evaluator.service import Evaluator
from tornasole.evaluator.store.outbox import OutboxPublisher
from tornasole.evaluator.store.state_table import StateTable
from tornasole.jobs import TornasoleJobs
from tornasole.lambda_support.env import HandlerEnv
from tornasole.reports import REPORT_FILE

VG = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}}
REPORT_KEY = TRIAL.removeprefix(f"s3://{BUCKET}/") + "/" + REPORT_FILE


def _train(stack: Stack) -> None:
    stack.write_collections()
    for step in range(4):
        stack.write_step(step, grad=1e-9 if step == 2 else 1.0)
    stack.write_end()


def _completed_event(stack: Stack) -> dict[str, Any]:
    stack.pump_stream()
    done = [e for e in stack.events() if e["detail"].get("TrainingJobStatus") == "Completed"]
    assert len(done) == 1, done
    return done[0]["detail"]


def test_the_completion_event_carries_the_report_the_stack_wrote(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    _train(stack)
    for note in stack.notifications():
        stack.deliver(note)
    detail = _completed_event(stack)
    assert detail["TornasoleReportLocation"] == f"s3://{BUCKET}/{REPORT_KEY}"
    assert stack.describe()["TornasoleReportLocation"] == detail["TornasoleReportLocation"]
    html = client("s3").get_object(Bucket=BUCKET, Key=REPORT_KEY)["Body"].read().decode()
    assert "<title>Tornasole report: my-job</title>" in html
    row = html[html.index('<tr class="verdict"') :]
    assert 'data-status="IssuesFound"' in row.split("</tr>")[0]
    assert "<td>1: 2</td>" in row  # fired at step 2 only
    assert 'id="loss-chart"' in html
    assert "<path" in html
    # the report is not a .json key: no notification routes it back to the evaluator
    assert all(REPORT_FILE not in n["Records"][0]["s3"]["object"]["key"] for n in stack.notifications())


def test_a_report_that_cannot_be_rendered_never_stops_the_completion(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tornasole.reports.build as build

    def broken(*_: Any, **__: Any) -> str:
        raise RuntimeError("renderer broke")

    monkeypatch.setattr(build, "job_report_html", broken)
    monkeypatch.setattr(build.JobReportWriter.__init__, "__defaults__", (broken, None))
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    _train(stack)
    for note in stack.notifications():
        stack.deliver(note)
    detail = _completed_event(stack)
    assert detail["TrainingJobStatus"] == "Completed"
    assert detail["TornasoleReportLocation"] is None
    assert "Contents" not in client("s3").list_objects_v2(Bucket=BUCKET, Prefix=REPORT_KEY)


def test_a_writer_that_raises_is_the_evaluator_s_problem_not_the_job_s(stack: Stack) -> None:
    """The evaluator guards its collaborator too: any writer's exception is logged, the job completes."""
    calls: list[dict[str, Any]] = []

    def writer(detail: dict[str, Any], fired: dict[str, list[int]]) -> str:
        calls.append({"status": detail["TrainingJobStatus"], "fired": fired})
        raise OSError("bucket gone")

    env = HandlerEnv.from_environ()
    evaluator = Evaluator(StateTable(env.state_table), OutboxPublisher.from_env(env), report_writer=writer)
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    _train(stack)
    for note in stack.notifications():
        rec = note["Records"][0]
        evaluator.handle_object_created(rec["s3"]["bucket"]["name"], unquote_plus(rec["s3"]["object"]["key"]))
    assert calls == [{"status": "Completed", "fired": {"VanishingGradient": [2]}}]  # the final detail
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    assert _completed_event(stack)["TornasoleReportLocation"] is None


def test_an_in_progress_job_has_no_report_field(stack: Stack) -> None:
    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    assert "TornasoleReportLocation" not in stack.describe()


def test_tornasole_report_of_a_job_reads_what_jobs_status_reads(
    stack: Stack, tmp_path: Any, capsys: Any
) -> None:
    from tornasole.cli.main import main

    TornasoleJobs().register_job("my-job", TRIAL, [VG])
    _train(stack)
    for note in stack.notifications():
        stack.deliver(note)
    out = tmp_path / "report.html"
    assert main(["report", "my-job", "-o", str(out)]) == 0
    assert "1 rules, 1 found issues" in capsys.readouterr().out
    html = out.read_text()
    assert "<td>1: 2</td>" in html
    assert "Completed" in html
    assert oct(out.stat().st_mode & 0o777) != "0o600"
    assert main(["report", "no-such-job", "-o", str(tmp_path / "x.html")]) == 3
    assert "no training job named 'no-such-job'" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()
