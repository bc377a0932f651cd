"""Exit codes and one-line messages shared by every ``tornasole`` command."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from tornasole.cli.errors import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    NotFoundError,
    did_you_mean,
    exit_code_for,
    hint,
    one_line,
)
from tornasole.cli.invoke_report import StepWaitTimeoutError, TrialNotFoundError, UnknownRuleError
from tornasole.exceptions import ConfigurationError, RuleParameterError, TensorUnavailable
from tornasole.jobs import JobNotFoundError


def _client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}}, "Op")


@pytest.mark.parametrize(
    "exc",
    [
        NotFoundError("x"),
        JobNotFoundError("no job"),
        TrialNotFoundError("no trial"),
        FileNotFoundError("f"),
        TensorUnavailable("t"),
        StepWaitTimeoutError("idle"),
        _client_error("NoSuchBucket"),
        _client_error("ResourceNotFoundException"),
    ],
)
def test_not_found_is_3(exc: BaseException) -> None:
    assert exit_code_for(exc) == EXIT_NOT_FOUND


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("v"),
        ConfigurationError("c"),
        RuleParameterError("R", "p", "bad"),
        UnknownRuleError("no rule"),  # a misspelt built-in is a typo: 2, as `jobs register` says it
        _client_error("AccessDenied"),
        RuntimeError("r"),
    ],
)
def test_invalid_input_is_2(exc: BaseException) -> None:
    assert exit_code_for(exc) == EXIT_USAGE


def test_one_line_keeps_the_whole_message() -> None:
    long = "valid parameters: " + ", ".join(f"p{i}" for i in range(100))
    assert one_line(ValueError(f"first\n  {long}\n")) == f"first {long}"
    assert one_line(JobNotFoundError("no training job named 'x'")) == "no training job named 'x'"
    assert one_line(ValueError()) == "ValueError"


def test_did_you_mean() -> None:
    assert did_you_mean("DeadRelus", ["DeadRelu", "AllZero"]) == " (did you mean 'DeadRelu'?)"
    assert did_you_mean("deadrelu", ["DeadRelu"]) == " (did you mean 'DeadRelu'?)"
    assert did_you_mean("zzz", ["DeadRelu"]) == ""


def test_hints_for_aws_errors_that_do_not_say_what_to_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
    monkeypatch.setenv("TORNASOLE_STATE_TABLE", "my-table")
    assert "is `tornasole local up` running at http://127.0.0.1:5000?" in hint(
        EndpointConnectionError(endpoint_url="http://127.0.0.1:5000")
    )
    assert "state table 'my-table'" in hint(_client_error("ResourceNotFoundException"))
    assert hint(ValueError("x")) == ""
