"""Profiler rules through the serverless path, against moto: a job registered with profiler rules (its
job file, or the real SDK's CreateTrainingJob request), profiler files landing under
``<trial>/profiler-output/``, one evaluation per file, verdicts in ``jobs status`` and in the events."""

from __future__ import annotations

import json
from typing import Any

import pytest
from evaluator_stack import BUCKET, REPO, TRIAL, Stack

from tornasole.aws.clients import client
from tornasole.cli.main import main
from tornasole.evaluator.store.profiler_state import ProfilerStateStore
from tornasole.evaluator.store.state_table import StateTable
from tornasole.exceptions import InvalidJobConfiguration
from tornasole.jobs import TornasoleJobs, register_from_request, rule_job_summary
from tornasole.jobs.text import format_job
from tornasole.lambda_support.env import HandlerEnv
from tornasole.profiler.format import paths, system_records, trace_events
from tornasole.profiler.format.system_records import SystemRecord
from tornasole.profiler.format.trace_events import TraceEvent
from tornasole.stack_spec import DETAIL_TYPE_JOB_STATE_CHANGE

T0 = 1_700_000_000
PROFILER_RULES = [
    {
        "RuleConfigurationName": "CPUBottleneck",
        "RuleParameters": {"rule_to_invoke": "CPUBottleneck", "patience": "20"},
    },
    {"RuleConfigurationName": "StepOutlier", "RuleParameters": {"rule_to_invoke": "StepOutlier"}},
    {
        "RuleConfigurationName": "IOBottleneck",
        "RuleParameters": {"rule_to_invoke": "IOBottleneck", "patience": "20"},
    },
]


def _key(trial: str, relative: str) -> str:
    return paths.profiler_root(trial).removeprefix(f"s3://{BUCKET}/") + "/" + relative


def put_system_file(t: int, *, cpu: float, gpu: float, trial: str = TRIAL, body: bytes | None = None) -> str:
    """A 60 s system-metrics file (two samples a second) starting ``t`` seconds after T0."""
    records = []
    for i in range(120):
        ts = T0 + t + i * 0.5
        records += [
            SystemRecord("cpu", system_records.CPU_TOTAL, system_records.CPU_UTILIZATION, cpu, "algo-1", ts),
            SystemRecord("cpu", system_records.CPU_TOTAL, system_records.IO_WAIT, 1.0, "algo-1", ts),
            SystemRecord("gpu", "gpu0", system_records.GPU_UTILIZATION, gpu, "algo-1", ts),
        ]
    key = _key(trial, paths.system_file_name(T0 + t))
    data = body if body is not None else system_records.encode_records(records).encode()
    client("s3").put_object(Bucket=BUCKET, Key=key, Body=data)
    return key


def put_trace_file(t: int, durations_s: list[float], trial: str = TRIAL) -> str:
    origin = (T0 + t) * 1_000_000
    events, at = [], origin
    for i, d in enumerate(durations_s):
        phase = trace_events.step_phase("TRAIN")
        events.append(TraceEvent(phase, phase, at, int(d * 1e6), args={"step_num": str(i)}))
        at += int(d * 1e6)
    text = trace_events.encode_trace_file(origin, events)
    key = _key(trial, paths.framework_file_name(at, paths.framework_node_id(0, "host")))
    client("s3").put_object(Bucket=BUCKET, Key=key, Body=text.encode())
    return key


def statuses(job: str = "my-job") -> dict[str, tuple[str, str]]:
    d = TornasoleJobs().describe(job)
    return {
        s["RuleConfigurationName"]: (s["RuleEvaluationStatus"], s["StatusDetails"])
        for s in d["ProfilerRuleEvaluationStatuses"]
    }


def deliver_new(stack: Stack) -> list[dict[str, Any]]:
    return [stack.deliver(n)["results"][0] for n in stack.notifications()]


def register(stack: Stack) -> None:
    stack.put_job_config({"TrainingJobName": "my-job", "ProfilerRuleConfigurations": PROFILER_RULES})
    assert [r["action"] for r in deliver_new(stack)] == ["registered"]


def test_profiler_files_fire_rules_once_per_file_and_the_job_completes(stack: Stack, capsys) -> None:
    register(stack)
    d = TornasoleJobs().describe("my-job")
    assert d["DebugRuleConfigurations"] == []
    assert [r["RuleConfigurationName"] for r in d["ProfilerRuleConfigurations"]] == [
        "CPUBottleneck",
        "StepOutlier",
        "IOBottleneck",
    ]
    put_system_file(0, cpu=95, gpu=3)  # GPU idle, CPU busy: a CPU bottleneck in every sample
    results = deliver_new(stack)
    assert [(r["kind"], r["action"]) for r in results] == [("profiler", "evaluated")]
    assert results[0]["rules"] == {"CPUBottleneck": "fired", "StepOutlier": "ok", "IOBottleneck": "ok"}
    status, details = statuses()["CPUBottleneck"]
    assert status == "IssuesFound"
    assert "Suggested fix" in details
    assert statuses()["IOBottleneck"][0] == "InProgress"

    put_trace_file(60, [0.1] * 50 + [3.0] + [0.1] * 10)
    assert [r["action"] for r in deliver_new(stack)] == ["evaluated"]
    store = ProfilerStateStore(StateTable(HandlerEnv.from_environ().state_table))
    assert store.files_folded("my-job", "StepOutlier") == 2  # every rule counts every file it folded
    assert store.load("my-job")["StepOutlier"].state["modes"]["TRAIN"]["outliers"] == 1

    stack.write_end()
    assert [r["action"] for r in deliver_new(stack)] == ["completed"]  # no tensor step to wait for
    final = statuses()
    assert final["CPUBottleneck"][0] == "IssuesFound"
    assert final["IOBottleneck"] == ("NoIssuesFound", "IOBottleneck: no issues found in 2 profiler files")
    assert TornasoleJobs().describe("my-job")["TrainingJobStatus"] == "Completed"
    summary = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in rule_job_summary("my-job")}
    assert summary == {
        "CPUBottleneck": "IssuesFound",
        "StepOutlier": "NoIssuesFound",
        "IOBottleneck": "NoIssuesFound",
    }
    assert (
        TornasoleJobs().describe("my-job")["ProfilerRuleEvaluationStatuses"][0]["LastModifiedTime"].year
        > 2000
    )
    text = format_job(TornasoleJobs().describe("my-job"))
    assert "CPUBottleneck" in text
    assert "IssuesFound" in text
    capsys.readouterr()
    assert main(["jobs", "status", "my-job"]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.startswith("CPUBottleneck"))
    assert "IssuesFound" in row
    assert "CPUBottleneck: Likely cause: the CPU cannot prepare batches" in table  # the "what to do" part
    assert main(["jobs", "status", "my-job", "--fail-on-issues"]) != 0

    stack.pump_stream()
    changes = [e["detail"] for e in stack.events() if e["detail-type"] == DETAIL_TYPE_JOB_STATE_CHANGE]
    assert changes[-1]["TrainingJobStatus"] == "Completed"
    assert {
        s["RuleConfigurationName"]: s["RuleEvaluationStatus"]
        for s in changes[-1]["ProfilerRuleEvaluationStatuses"]
    } == {
        "CPUBottleneck": "IssuesFound",
        "StepOutlier": "NoIssuesFound",
        "IOBottleneck": "NoIssuesFound",
    }
    assert any(
        s["RuleEvaluationStatus"] == "IssuesFound"
        for e in changes
        for s in e["ProfilerRuleEvaluationStatuses"]
        if s["RuleConfigurationName"] == "CPUBottleneck"
    )


def test_a_profiler_file_is_counted_as_such_in_the_handler_s_metrics(stack: Stack, capsys) -> None:
    register(stack)
    put_system_file(0, cpu=20, gpu=90)
    capsys.readouterr()
    assert [r["action"] for r in deliver_new(stack)] == ["evaluated"]
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    assert [m.get("ProfilerFilesEvaluated") for m in emf] == [[1.0]]
    assert "StepsEvaluated" not in emf[0]


def test_the_same_file_twice_changes_nothing(stack: Stack) -> None:
    register(stack)
    put_system_file(0, cpu=20, gpu=90)
    (note,) = stack.notifications()
    first = stack.deliver(note)["results"][0]
    table = StateTable(HandlerEnv.from_environ().state_table)
    before = ProfilerStateStore(table).load("my-job")
    again = stack.deliver(note)["results"][0]
    assert (first["action"], again["action"]) == ("evaluated", "duplicate")
    assert ProfilerStateStore(table).load("my-job") == before
    assert before["CPUBottleneck"].files == 1


def test_a_corrupt_file_is_named_and_does_not_poison_later_files(stack: Stack) -> None:
    register(stack)
    bad = put_system_file(
        0, cpu=95, gpu=3, body=b'{"Type": "cpu"}\n{"Type": "cpu", "Dimension": "x", "Value": 1}\n'
    )
    (result,) = deliver_new(stack)
    assert result["action"] == "invalid"
    assert bad in result["reason"]
    assert "line 1" in result["reason"]
    assert bad in TornasoleJobs().describe("my-job")["TornasoleJobError"]  # shown on the job, not only logged
    put_system_file(60, cpu=95, gpu=3)
    (later,) = deliver_new(stack)
    assert later["action"] == "evaluated"
    assert statuses()["CPUBottleneck"][0] == "IssuesFound"
    table = StateTable(HandlerEnv.from_environ().state_table)
    assert (
        ProfilerStateStore(table).files_folded("my-job", "CPUBottleneck") == 1
    )  # the corrupt one folded nothing


def test_files_before_the_job_is_registered_are_kept_and_adopted(stack: Stack) -> None:
    put_system_file(0, cpu=95, gpu=3)
    (orphan,) = deliver_new(stack)
    assert orphan["action"] == "orphan"
    assert "no job registered" in orphan["reason"]
    register(stack)
    assert statuses()["CPUBottleneck"][0] == "InProgress"
    put_system_file(60, cpu=95, gpu=3)  # the job's next file adopts the one that came before it
    (later,) = deliver_new(stack)
    assert later["action"] == "evaluated"
    table = StateTable(HandlerEnv.from_environ().state_table)
    states = ProfilerStateStore(table).load("my-job")
    assert states["CPUBottleneck"].files == 2
    assert states["CPUBottleneck"].state["datapoints"] == 240
    assert ProfilerStateStore(table).take_orphans(TRIAL) == []  # adopted once, then gone


def test_files_of_a_job_without_profiler_rules_are_ignored(stack: Stack) -> None:
    stack.put_job_config(
        {
            "TrainingJobName": "my-job",
            "DebugRuleConfigurations": [{"RuleConfigurationName": "VanishingGradient"}],
        }
    )
    deliver_new(stack)
    put_system_file(0, cpu=95, gpu=3)
    (result,) = deliver_new(stack)
    assert (result["action"], result["reason"]) == ("ignored", "no profiler rule to evaluate")


def test_the_sdk_s_profiler_payload_registers_and_sagemaker_s_layout_is_found(stack: Stack) -> None:
    request = json.loads(
        (REPO / "tests/fixtures/sagemaker_requests/profiler_rules_and_config.json").read_text()
    )
    d = register_from_request(request)
    assert [s["RuleConfigurationName"] for s in d["ProfilerRuleEvaluationStatuses"]] == [
        "ProfilerReport",
        "LowGPUUtilization",
    ]
    assert [s["RuleConfigurationName"] for s in d["DebugRuleEvaluationStatuses"]] == ["LossNotDecreasing"]
    assert d["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] == 500
    kept = {r["RuleConfigurationName"]: r["RuleParameters"] for r in d["ProfilerRuleConfigurations"]}
    assert kept["ProfilerReport"]["CPUBottleneck_threshold"] == "30"
    assert kept["LowGPUUtilization"]["window"] == "200"
    # SageMaker writes profiler-output beside debug-output: <S3OutputPath>/<job>/profiler-output
    put_system_file(0, cpu=95, gpu=3, trial=f"s3://{BUCKET}/sdk-profiler-job")
    (result,) = deliver_new(stack)
    assert result["action"] == "evaluated"
    assert result["job"] == "sdk-profiler-job"
    assert set(result["rules"]) == {"ProfilerReport", "LowGPUUtilization"}


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        (
            {"RuleConfigurationName": "CPUBottle", "RuleParameters": {"rule_to_invoke": "CPUBottle"}},
            "CPUBottleneck",
        ),
        (
            {
                "RuleConfigurationName": "Low",
                "RuleParameters": {"rule_to_invoke": "LowGPUUtilization", "windw": "5"},
            },
            "'windw'",
        ),
        (
            {
                "RuleConfigurationName": "R",
                "RuleParameters": {"rule_to_invoke": "ProfilerReport", "BatchSize_x": "1"},
            },
            "BatchSize_x",
        ),
        (
            {
                "RuleConfigurationName": "S",
                "RuleParameters": {"rule_to_invoke": "StepOutlier", "stddev": "-1"},
            },
            "'stddev'",
        ),
    ],
)
def test_bad_profiler_rules_are_refused_naming_rule_and_parameter(
    stack: Stack, entry: dict, words: str
) -> None:
    request = json.loads(
        (REPO / "tests/fixtures/sagemaker_requests/profiler_rules_and_config.json").read_text()
    )
    request["ProfilerRuleConfigurations"] = [entry]
    with pytest.raises(InvalidJobConfiguration) as err:
        register_from_request(request)
    assert words in str(err.value)
    assert repr(entry["RuleConfigurationName"]) in str(err.value)


def test_a_bad_profiler_config_is_refused(stack: Stack) -> None:
    request = json.loads(
        (REPO / "tests/fixtures/sagemaker_requests/profiler_rules_and_config.json").read_text()
    )
    request["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] = 7
    with pytest.raises(InvalidJobConfiguration, match="ProfilingIntervalInMilliseconds"):
        register_from_request(request)


def test_two_files_landing_at_once_both_count(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another invocation commits a file between this one's read of the states and its write: this one's
    transaction fails on the version, re-reads, folds its file into the newer states; both count."""
    from tornasole.evaluator.service import Evaluator

    register(stack)
    first = put_system_file(0, cpu=95, gpu=3)
    second = put_system_file(60, cpu=95, gpu=3)
    stack.notifications()
    table = StateTable(HandlerEnv.from_environ().state_table)
    original = ProfilerStateStore.commit
    raced: list[str] = []

    def racing(self, job, relative, updates, now_ms, error=None):
        if not raced:
            raced.append(relative)
            assert Evaluator(table).handle_object_created(BUCKET, second).action == "evaluated"
        return original(self, job, relative, updates, now_ms, error)

    monkeypatch.setattr(ProfilerStateStore, "commit", racing)
    assert Evaluator(table).handle_object_created(BUCKET, first).action == "evaluated"
    assert raced
    states = ProfilerStateStore(table).load("my-job")
    assert states["CPUBottleneck"].files == 2
    assert states["CPUBottleneck"].state["datapoints"] == 240  # both files' samples, none twice


def test_every_profiler_file_reaches_the_evaluator_through_the_bucket_s_notification_filters() -> None:
    """S3 filters allow one prefix and one suffix per configuration (``stack_spec.notifications``, what the
    CDK stack and the local resources configure): both kinds of profiler file end in one of them."""
    from tornasole.stack_spec import DEFAULT_SPEC

    keys = [
        "trials/run/profiler-output/" + paths.system_file_name(T0),
        "trials/run/profiler-output/"
        + paths.framework_file_name(T0 * 10**6, paths.framework_node_id(0, "h")),
        "trials/run/profiler-output/"
        + paths.framework_file_name(T0 * 10**6, "0-h", paths.MODEL_TIMELINE_SUFFIX),
    ]
    for key in keys:
        assert paths.profiler_file_kind(key) is not None
        assert any(key.endswith(suffix) for suffix in DEFAULT_SPEC.notifications.suffixes), key


def test_a_firing_profiler_rule_alerts_once_and_can_stop_training(stack: Stack) -> None:
    actions = [{"name": "email", "endpoint": "ml@example.com"}, {"name": "stoptraining"}]
    rules = [
        {
            "RuleConfigurationName": "CPUBottleneck",
            "RuleParameters": {
                "rule_to_invoke": "CPUBottleneck",
                "patience": "20",
                "action_json": json.dumps(actions),
            },
        }
    ]
    stack.put_job_config({"TrainingJobName": "my-job", "ProfilerRuleConfigurations": rules})
    deliver_new(stack)
    put_system_file(0, cpu=95, gpu=3)
    put_system_file(60, cpu=95, gpu=3)
    assert [r["action"] for r in deliver_new(stack)] == ["evaluated", "evaluated"]
    stack.pump_stream()
    alerts = stack.alerts()
    assert [a["MessageAttributes"]["tornasole_action"]["Value"] for a in alerts] == ["email"]
    assert "CPUBottleneck" in alerts[0]["Message"]
    d = TornasoleJobs().describe("my-job")
    assert d["TrainingJobStatus"] == "Stopping"
    stop = client("s3").get_object(Bucket=BUCKET, Key="jobs/my-job/tornasole_stop_training.json")
    assert json.loads(stop["Body"].read())["RuleConfigurationName"] == "CPUBottleneck"
