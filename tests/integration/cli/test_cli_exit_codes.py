"""Exit codes and messages of ``tornasole jobs ...`` in-process against moto: the user is never left guessing.

0 ok, 1 issues found where asked (``status --fail-on-issues``), 2 usage or invalid input,
3 not found (job, rule, bucket, file) or a wait that timed out; one whole line on stderr.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tornasole.cli.main import main


@pytest.fixture
def stack(moto_local_resources: None) -> None:
    """The jobs API's resources in moto (``moto_local_resources``)."""


def _register(name: str, output: str, *rules: str) -> int:
    argv = ["jobs", "register", "--name", name, "--s3-output", output]
    for rule in rules:
        argv += ["--rule", rule]
    return main(argv)


def test_logs_for_a_rule_the_job_does_not_have_is_not_found(stack: None, capsys) -> None:
    assert _register("j1", "s3://trials/j1", "VanishingGradient", "ExplodingTensor") == 0
    capsys.readouterr()
    assert main(["jobs", "logs", "j1", "--rule", "VanishingGradiant"]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (
        "tornasole: error: job 'j1' has no rule 'VanishingGradiant' (did you mean 'VanishingGradient'?); "
        "its rules: VanishingGradient, ExplodingTensor"
    )


def test_logs_before_any_step_says_so(stack: None, capsys) -> None:
    assert _register("j1", "s3://trials/j1", "VanishingGradient") == 0
    capsys.readouterr()
    assert main(["jobs", "logs", "j1", "--rule", "VanishingGradient"]) == 0
    assert capsys.readouterr().out.strip() == "job j1: no step evaluated yet (VanishingGradient)"


def test_status_fail_on_issues(stack: None, capsys) -> None:
    from tornasole.evaluator.store.state_table import StateTable
    from tornasole.evaluator.store.transitions import Transitions, to_error

    assert _register("j1", "s3://trials/j1", "VanishingGradient", "DeadRelu") == 0
    assert main(["jobs", "status", "j1", "--fail-on-issues"]) == 0  # nothing found yet
    assert main(["jobs", "status", "j1"]) == 0
    Transitions(StateTable()).apply("j1", lambda s: to_error(s, "DeadRelu", "tensors unreadable"), 1)
    capsys.readouterr()
    assert main(["jobs", "status", "j1"]) == 0  # not asked: exit 0
    assert main(["jobs", "status", "j1", "--fail-on-issues"]) == 1
    assert "tensors unreadable" in capsys.readouterr().out
    assert main(["jobs", "status", "j1", "--json", "--fail-on-issues"]) == 1


def test_status_of_an_unknown_job_is_not_found(stack: None, capsys) -> None:
    assert main(["jobs", "status", "nope"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("tornasole: error: no training job named 'nope' is registered in table")
    assert len(err.strip().splitlines()) == 1


def test_watch_with_nothing_arriving_says_what_it_waits_for_and_gives_up(stack: None, capsys) -> None:
    assert _register("j1", "s3://trials/j1", "VanishingGradient") == 0
    capsys.readouterr()
    started = time.monotonic()
    rc = main(["jobs", "status", "j1", "--watch", "--interval", "0.1", "--timeout", "0.5"])
    elapsed = time.monotonic() - started
    captured = capsys.readouterr()
    assert rc == 3
    assert elapsed < 10
    assert "watching job j1: waiting for the steps the hook writes under s3://trials/j1" in captured.err
    assert "tornasole: error: job j1: nothing changed for 0.5 s (0 steps evaluated, still InProgress)" in (
        captured.err
    )
    assert "job j1: InProgress" in captured.out


def test_watch_on_a_missing_bucket_stops_at_once(stack: None, capsys) -> None:
    from tornasole.aws.clients import client

    client("s3").create_bucket(Bucket="gone")
    assert _register("j1", "s3://gone/j1", "VanishingGradient") == 0
    client("s3").delete_bucket(Bucket="gone")
    capsys.readouterr()
    started = time.monotonic()
    assert main(["jobs", "status", "j1", "--watch", "--timeout", "60"]) == 3
    assert time.monotonic() - started < 10
    assert "tornasole: error: bucket 'gone' of job 'j1' does not exist" in capsys.readouterr().err


def test_register_with_a_rule_in_error_exits_2_with_the_whole_reason(stack: None, capsys) -> None:
    assert _register("j1", "s3://trials/j1", "VanishingGradiant") == 2
    err = capsys.readouterr().err
    assert "VanishingGradiant" in err
    assert "…" not in err
    assert "WeightUpdateRatio" in err  # the last known rule: the list is not cut


@pytest.mark.parametrize(
    ("content", "code", "message"),
    [
        (None, 3, "No such file or directory"),
        (
            "{not json",
            2,
            "not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        ("[1, 2]", 2, "expected a JSON object (a CreateTrainingJob request), got list"),
    ],
)
def test_register_from_request_file_errors(
    stack: None, tmp_path: Path, capsys, content, code, message
) -> None:
    path = tmp_path / "request.json"
    if content is not None:
        path.write_text(content)
    assert main(["jobs", "register", "--from-request", str(path)]) == code
    err = capsys.readouterr().err
    assert err.startswith("tornasole: error: ")
    assert str(path) in err
    assert message in err


def test_register_from_request_excludes_the_other_options(stack: None, tmp_path: Path, capsys) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"TrainingJobName": "j"}))
    with pytest.raises(SystemExit) as exc:
        main(["jobs", "register", "--from-request", str(path), "--name", "j"])
    assert exc.value.code == 2
    assert "--from-request takes name, output and rules from the file; drop --name" in capsys.readouterr().err


def test_register_needs_a_name_and_an_output(stack: None, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["jobs", "register", "--rule", "DeadRelu"])
    assert exc.value.code == 2
    assert "give --name and --s3-output (or --from-request FILE)" in capsys.readouterr().err


def test_update_with_another_output_moves_the_job(stack: None, capsys) -> None:
    assert _register("j1", "s3://trials/old", "DeadRelu") == 0
    capsys.readouterr()
    update = ["jobs", "register", "--name", "j1", "--rule", "ExplodingTensor", "--update"]
    assert main([*update, "--s3-output", "s3://trials/new"]) == 0
    out = capsys.readouterr().out
    assert "moved j1 from s3://trials/old to s3://trials/new" in out
    assert "registered j1 (InProgress) on s3://trials/new" in out
    assert main([*update, "--s3-output", "s3://trials/new"]) == 0
    out = capsys.readouterr().out
    assert "moved" not in out
    assert "registered j1 (InProgress) on s3://trials/new" in out


def test_list_with_no_jobs_says_so(stack: None, capsys) -> None:
    assert main(["jobs", "list"]) == 0
    assert capsys.readouterr().out.strip() == (
        "no jobs registered in table tornasole-state (tornasole jobs register adds one)"
    )


def test_register_from_request_hands_the_whole_request_to_the_library(
    stack: None, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's part only: read the file, pass the dict as it is, report what got registered.

    (The library's ``register_from_request`` is tested with the jobs API; here it is replaced by a
    recorder that registers through ``register_job`` so the CLI's reporting runs against moto.)
    """
    import tornasole.jobs

    seen: list[dict] = []

    def register_from_request(request: dict) -> dict:
        seen.append(request)
        hook = request["DebugHookConfig"]
        return tornasole.jobs.register_job(
            request["TrainingJobName"], hook["S3OutputPath"], request["DebugRuleConfigurations"]
        )

    monkeypatch.setattr(tornasole.jobs, "register_from_request", register_from_request, raising=False)
    request = {
        "TrainingJobName": "req-job",
        "DebugHookConfig": {"S3OutputPath": "s3://trials/req-job"},
        "DebugRuleConfigurations": [
            {"RuleConfigurationName": "DeadRelu", "RuleParameters": {"rule_to_invoke": "DeadRelu"}}
        ],
    }
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    assert main(["jobs", "register", "--from-request", str(path)]) == 0
    assert seen == [request]
    out = capsys.readouterr().out
    assert out.startswith("registered req-job (InProgress) on s3://trials/req-job\n")
    assert "DeadRelu  InProgress" in out
