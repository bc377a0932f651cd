"""The CLI mistakes a new user made, driven as that user would: subprocesses, exit codes, messages, time.

Each test runs the installed ``tornasole`` command (or ``python -m tornasole.rules.rule_invoker``)
in a subprocess with a time limit, and checks the exit code (0 ok, 1 issues found where asked,
2 usage, 3 not found), the one-line message on stderr and that it ended in bounded time. The jobs
commands talk to the local mode (moto) started in this process, through the standard AWS variables
it sets. The registration mistakes are in ``test_cli_registration_mistakes.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

BIN = Path(sys.executable).parent
TORNASOLE = str(BIN / "tornasole")
RULE_INVOKER = [sys.executable, "-m", "tornasole.rules.rule_invoker"]


def run(argv: list[str], limit: float, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``argv``; fail the test if it runs past ``limit`` seconds. Returns the process and its time."""
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=limit, cwd=cwd)
    return proc, time.monotonic() - started


def assert_one_error_line(proc: subprocess.CompletedProcess, code: int, *fragments: str) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    return errors[0]


@pytest.fixture(scope="module")
def trial(tmp_path_factory: pytest.TempPathFactory) -> str:
    """50 steps saving every 10th (5 saved steps); gradients vanish from step 30."""
    from tornasole import Hook, SaveConfig

    path = tmp_path_factory.mktemp("mistakes") / "run"
    hook = Hook(out_dir=str(path), save_config=SaveConfig(save_interval=10))
    for step in range(50):
        hook.save_tensor("gradients/w", np.full(4, 1e-9 if step >= 30 else 1e-2, np.float32), "gradients")
        hook.next_step()
    hook.close()
    return str(path)


@pytest.fixture(scope="module")
def local_mode() -> Iterator[object]:
    from tornasole.local import LocalMode, LocalSettings

    with LocalMode(LocalSettings(port=0, schedule_seconds=2)) as mode:
        yield mode


@pytest.fixture
def local(local_mode, monkeypatch: pytest.MonkeyPatch) -> object:
    """The local mode's environment for this test (the suite's autouse fixture resets AWS variables)."""
    from tornasole.aws.clients import clear_client_cache

    for key, value in local_mode.environment().items():
        monkeypatch.setenv(key, value)
    clear_client_cache()
    return local_mode


# -- waiting ---------------------------------------------------------------------------------------


def test_rule_invoker_on_a_path_with_no_trial_ends_with_a_clear_error(tmp_path: Path) -> None:
    proc, took = run(
        [*RULE_INVOKER, "--trial-dir", "runs/nope", "--rule-name", "VanishingGradient"], 60, tmp_path
    )
    assert_one_error_line(
        proc,
        3,
        "ERROR TrialNotFoundError: no trial at runs/nope: waited 10 s for collections file, index file",
    )
    assert "waiting up to 10 s for a trial at runs/nope" in proc.stderr  # said what it waits for, at once
    assert took < 30


def test_rule_invoker_timeout_is_the_users_to_choose(tmp_path: Path) -> None:
    argv = [*RULE_INVOKER, "--trial-dir", "runs/nope", "--rule-name", "VanishingGradient", "--timeout", "1"]
    proc, took = run(argv, 30, tmp_path)
    assert_one_error_line(proc, 3, "no trial at runs/nope: waited 1 s")
    assert took < 15


def test_invoke_on_a_path_with_no_trial(tmp_path: Path) -> None:
    proc, took = run([TORNASOLE, "invoke", "runs/nope", "--rule", "DeadRelu", "--timeout", "1"], 30, tmp_path)
    assert_one_error_line(proc, 3, "tornasole: error: no trial at runs/nope")
    assert took < 15


def test_watch_with_nothing_arriving_says_what_it_waits_for_and_gives_up(local) -> None:
    proc, _ = run(
        [
            TORNASOLE,
            "jobs",
            "register",
            "--name",
            "idle",
            "--s3-output",
            f"{local.trial_root}idle",
            "--rule",
            "VanishingGradient",
        ],
        60,
    )
    assert proc.returncode == 0, proc.stderr
    proc, took = run(
        [TORNASOLE, "jobs", "status", "idle", "--watch", "--interval", "0.2", "--timeout", "2"], 60
    )
    assert_one_error_line(
        proc,
        3,
        "job idle: nothing changed for 2 s (0 steps evaluated, still InProgress)",
        f"is the training writing to {local.trial_root}idle?",
    )
    assert (
        f"watching job idle: waiting for the steps the hook writes under {local.trial_root}idle"
        in proc.stderr
    )
    assert "job idle: InProgress" in proc.stdout
    assert took < 30


def test_watch_follows_a_job_until_it_ends(local) -> None:
    from tornasole import Hook, SaveConfig

    output = f"{local.trial_root}watched"
    proc, _ = run(
        [
            TORNASOLE,
            "jobs",
            "register",
            "--name",
            "watched",
            "--s3-output",
            output,
            "--rule",
            "ExplodingTensor",
        ],
        60,
    )
    assert proc.returncode == 0, proc.stderr
    hook = Hook(out_dir=output, save_config=SaveConfig(save_interval=1))
    for _ in range(4):
        hook.save_tensor("gradients/w", np.ones(4, np.float32), "gradients")
        hook.next_step()
    hook.close()
    proc, took = run(
        [TORNASOLE, "jobs", "status", "watched", "--watch", "--interval", "0.5", "--timeout", "60"], 120
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert proc.stdout.rstrip().splitlines()[0].startswith("job watched: ")
    assert "job watched: Completed" in proc.stdout
    assert "ExplodingTensor  NoIssuesFound" in proc.stdout
    assert took < 90


def test_watch_on_a_job_whose_bucket_does_not_exist(local) -> None:
    from tornasole.aws.clients import client

    s3 = client("s3")
    s3.create_bucket(Bucket="soon-gone")
    proc, _ = run(
        [
            TORNASOLE,
            "jobs",
            "register",
            "--name",
            "nobucket",
            "--s3-output",
            "s3://soon-gone/run",
            "--rule",
            "VanishingGradient",
        ],
        60,
    )
    assert proc.returncode == 0, proc.stderr
    s3.delete_bucket(Bucket="soon-gone")
    proc, took = run([TORNASOLE, "jobs", "status", "nobucket", "--watch"], 60)
    assert_one_error_line(proc, 3, "bucket 'soon-gone' of job 'nobucket' does not exist")
    assert took < 30


def test_update_with_a_new_output_moves_the_job_instead_of_keeping_the_old_one(local) -> None:
    old, new = f"{local.trial_root}upd-old", f"{local.trial_root}upd-new"
    base = [TORNASOLE, "jobs", "register", "--name", "upd", "--rule", "DeadRelu"]
    assert run([*base, "--s3-output", old], 60)[0].returncode == 0
    proc, _ = run([*base, "--s3-output", new, "--update"], 60)
    assert proc.returncode == 0, proc.stderr
    assert f"moved upd from {old} to {new}" in proc.stdout
    assert f"registered upd (InProgress) on {new}" in proc.stdout
    described = json.loads(run([TORNASOLE, "jobs", "status", "upd", "--json"], 60)[0].stdout)
    assert described["DebugHookConfig"]["S3OutputPath"] == new


# -- not found, did you mean -----------------------------------------------------------------------


def test_logs_for_a_misspelt_rule(local) -> None:
    proc, _ = run(
        [
            TORNASOLE,
            "jobs",
            "register",
            "--name",
            "logs-typo",
            "--s3-output",
            f"{local.trial_root}logs-typo",
            "--rule",
            "ExplodingTensor",
            "--rule",
            "DeadRelu",
        ],
        60,
    )
    assert proc.returncode == 0, proc.stderr
    proc, _ = run([TORNASOLE, "jobs", "logs", "logs-typo", "--rule", "ExplodingTensr"], 60)
    assert_one_error_line(
        proc,
        3,
        "job 'logs-typo' has no rule 'ExplodingTensr' (did you mean 'ExplodingTensor'?)",
        "its rules: ExplodingTensor, DeadRelu",
    )
    assert proc.stdout == ""  # no empty table


def test_status_of_a_job_that_is_not_registered(local) -> None:
    proc, _ = run([TORNASOLE, "jobs", "status", "never-registered"], 60)
    assert_one_error_line(proc, 3, "no training job named 'never-registered'")


def test_alert_text_names_a_command_that_exists_and_works(local) -> None:
    from tornasole.alerts.render import text_message
    from tornasole.evaluator.details import firing_alert
    from tornasole.evaluator.store.state_table import StateTable

    proc, _ = run(
        [
            TORNASOLE,
            "jobs",
            "register",
            "--name",
            "alerted",
            "--s3-output",
            f"{local.trial_root}alerted",
            "--rule",
            "ExplodingTensor",
        ],
        60,
    )
    assert proc.returncode == 0, proc.stderr
    state = StateTable().load_job("alerted")
    alert = firing_alert(
        state, "ExplodingTensor", 3, "TRAIN", 3, "NaN in loss", {}, {"TrialPath": state.trial_path}, "e-1"
    )
    _, body = text_message(alert)  # the e-mail's text, as the outbox renders it
    command = re.search(r"tornasole [a-z ]+ alerted", body)
    assert command, body
    proc, _ = run([TORNASOLE, *command.group(0).split()[1:]], 60)
    assert proc.returncode == 0, proc.stderr
    assert "job alerted: InProgress" in proc.stdout


# -- full text, one RESULT format, honest counts ---------------------------------------------------


def test_rules_list_name_and_piped_output_are_never_cut() -> None:
    from tornasole.rules import get_rule

    proc, _ = run([TORNASOLE, "rules", "list", "--name", "ClassImbalance"], 60)
    assert proc.returncode == 0
    for p in get_rule("ClassImbalance").PARAMETERS:
        assert f"{p.name} ({p.kind}, default {p.default})" in proc.stdout
    proc, _ = run([TORNASOLE, "rules", "list"], 60)  # stdout is a pipe here
    assert proc.returncode == 0
    assert "…" not in proc.stdout
    assert ", ".join(f"{p.name}={p.default}" for p in get_rule("ClassImbalance").PARAMETERS) in proc.stdout


@pytest.mark.parametrize("argv", [["rules", "list"], ["rules", "list", "--json"], ["--help"]])
def test_a_reader_that_goes_away_is_no_error(argv: list[str]) -> None:
    """``tornasole rules list | head``: the reader closes the pipe before anything is written."""
    proc = subprocess.Popen([TORNASOLE, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0
    assert err == ""  # no "Broken pipe", no traceback


def test_head_in_a_shell_pipeline_is_quiet() -> None:
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"'{TORNASOLE}' rules list --json | head -n 2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.splitlines()[0] == "["


def test_invoke_and_rule_invoker_print_one_result_format_with_honest_counts(trial: str) -> None:
    invoke, _ = run([TORNASOLE, "invoke", trial, "--rule", "VanishingGradient"], 60)
    invoker, _ = run([*RULE_INVOKER, "--trial-dir", trial, "--rule-name", "VanishingGradient"], 60)
    expected = (
        "RESULT rule=VanishingGradient status=IssuesFound first_step=30 fired_steps=30,40 "
        "steps_evaluated=5 steps_skipped=0"
    )
    assert invoke.returncode == invoker.returncode == 1  # issues found
    assert invoke.stdout.splitlines()[-1] == invoker.stdout.splitlines()[-1] == expected
    for proc in (invoke, invoker):
        assert proc.stderr.splitlines()[-1].endswith("5/5 steps, fired 2 times")
        assert "fired at" not in proc.stderr


def test_no_fire_reads_none_in_both(trial: str) -> None:
    invoke, _ = run([TORNASOLE, "invoke", trial, "--rule", "ExplodingTensor"], 60)
    invoker, _ = run([*RULE_INVOKER, "--trial-dir", trial, "--rule-name", "ExplodingTensor"], 60)
    assert invoke.returncode == invoker.returncode == 0
    assert (
        invoke.stdout
        == invoker.stdout
        == (
            "RESULT rule=ExplodingTensor status=NoIssuesFound first_step=none fired_steps=none "
            "steps_evaluated=5 steps_skipped=0\n"
        )
    )


def test_usage_errors_exit_2() -> None:
    proc, _ = run([TORNASOLE, "describe", "x"], 60)  # the command an old alert named
    assert proc.returncode == 2
    assert "invalid choice: 'describe'" in proc.stderr
    proc, _ = run([TORNASOLE, "invoke", "runs/x", "--rule", "DeadRelu:threshold_layer"], 60)
    assert_one_error_line(proc, 2, "parameter 'threshold_layer' is not key=value")


# -- the traps a new user met (issue #28, part 3) ----------------------------------------------------


def test_a_list_parameter_can_be_given_on_the_command_line(trial: str) -> None:
    """``collection_names`` is a list: SageMaker writes it comma-separated, and so can a user here."""
    for argv in (
        ["--rule", "AllZero:collection_names=gradients,weights,threshold=100"],
        ["--rule", "AllZero", "--param", "collection_names=gradients,weights"],
        ["--rule", 'AllZero:collection_names=["gradients", "weights"]'],
    ):
        proc, _ = run([TORNASOLE, "invoke", trial, *argv], 60)
        assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)
        assert "steps_evaluated=5" in proc.stdout, (argv, proc.stdout)


def test_a_list_parameter_with_the_wrong_separator_is_refused(trial: str) -> None:
    """``weights;gradients`` used to name one collection that does not exist, and found nothing."""
    proc, _ = run([TORNASOLE, "invoke", trial, "--rule", "AllZero:collection_names=weights;gradients"], 60)
    assert_one_error_line(proc, 2, "collection_names", "'weights,gradients'")
    proc, _ = run([TORNASOLE, "invoke", trial, "--rule", "VanishingGradient:threshold=1,foo"], 60)
    assert_one_error_line(proc, 2, "'foo' is not key=value", "VanishingGradient has no list parameter")


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["invoke", "{trial}", "--rule", "VanishingGradient", "--timeout", "-5"], "--timeout"),
        (["invoke", "{trial}", "--rule", "VanishingGradient", "--idle-timeout", "0"], "--idle-timeout"),
        (["invoke", "{trial}", "--rule", "VanishingGradient", "--start-step", "-1"], "--start-step"),
        (["jobs", "status", "j", "--watch", "--timeout", "-5"], "--timeout"),
        (["jobs", "status", "j", "--watch", "--interval", "0"], "--interval"),
        (
            ["jobs", "register", "--name", "j", "--s3-output", "s3://b/j", "--num-workers", "0"],
            "--num-workers",
        ),
        (["trial", "summary", "{trial}", "--timeout", "nan"], "--timeout"),
        (["plot", "{trial}", "--tensor", "x", "--timeout", "-1"], "--timeout"),
    ],
)
def test_a_number_out_of_range_is_a_usage_error(trial: str, argv: list[str], option: str) -> None:
    proc, elapsed = run([TORNASOLE, *(a.format(trial=trial) for a in argv)], 60)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"argument {option}:" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert elapsed < 30


def test_a_bad_regex_is_a_usage_error(trial: str, tmp_path: Path) -> None:
    proc, _ = run([TORNASOLE, "plot", trial, "--regex", "([", "-o", str(tmp_path / "p.png")], 60)
    assert_one_error_line(proc, 2, "--regex '([' is not a valid regular expression")


def test_a_misspelt_rule_exits_2_in_every_command(trial: str) -> None:
    """``invoke`` said 3 (not found) where ``jobs register`` said 2 (invalid input) for the same typo."""
    proc, _ = run([TORNASOLE, "invoke", trial, "--rule", "VanishingGradiant"], 60)
    assert_one_error_line(
        proc, 2, "unknown built-in rule 'VanishingGradiant' (did you mean 'VanishingGradient'?)"
    )
    proc, _ = run([TORNASOLE, "rules", "list", "--name", "VanishingGradiant"], 60)
    assert_one_error_line(proc, 2, "(did you mean 'VanishingGradient'?)")
    proc, _ = run([*RULE_INVOKER, "--trial-dir", trial, "--rule-name", "VanishingGradiant"], 60)
    assert_one_error_line(proc, 2, "(did you mean 'VanishingGradient'?)")


def test_a_shell_without_a_region_is_told_what_to_set(tmp_path: Path) -> None:
    """botocore's "You must specify a region." said as the variable to set and where to get it."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("AWS_DEFAULT_REGION", "AWS_REGION")}
    env["AWS_CONFIG_FILE"] = str(tmp_path / "no-config")  # no region from ~/.aws/config either
    proc = subprocess.run([TORNASOLE, "jobs", "list"], capture_output=True, text=True, timeout=60, env=env)
    line = assert_one_error_line(proc, 2, "AWS_DEFAULT_REGION", "tornasole local up")
    assert "You must specify a region" not in line


def test_a_shell_without_credentials_is_told_what_to_set(tmp_path: Path) -> None:
    """botocore's "Unable to locate credentials" gets what to set, and the local mode's exports."""
    import os

    drop = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(
        AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE=str(tmp_path / "no-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
        AWS_EC2_METADATA_DISABLED="true",  # no instance-metadata lookup: bounded time off EC2
    )
    proc = subprocess.run([TORNASOLE, "jobs", "list"], capture_output=True, text=True, timeout=60, env=env)
    assert_one_error_line(proc, 2, "Unable to locate credentials", "AWS_PROFILE", "tornasole local up")
