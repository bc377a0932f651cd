"""Issue #34: the CLI reads bounded files (N11) and uploads rule code under the rule prefix (N7)."""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

from tornasole.cli.main import main
from tornasole.local.resources import create_resources

RULE = (
    "from smdebug.rules import Rule\n\nclass Always(Rule):\n"
    "    def __init__(self, base_trial):\n        super().__init__(base_trial)\n"
    "    def invoke_at_step(self, step):\n        return True\n"
)


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TORNASOLE_STATE_TABLE", "tornasole-state")
    monkeypatch.delenv("TORNASOLE_CUSTOM_RULES_PREFIX", raising=False)
    with mock_aws():
        create_resources("trials")
        yield


def test_from_request_dev_zero_is_refused_without_reading_it_whole(stack: None, capsys) -> None:
    """N11: ``--from-request /dev/zero`` reached 13 GB in 8 s."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    assert main(["jobs", "register", "--from-request", "/dev/zero"]) == 2
    assert time.monotonic() - started < 5
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 64 * 1024  # a few MB at most: the cap (1 MiB) plus one byte is all that is read
    err = capsys.readouterr().err
    assert "/dev/zero: a CreateTrainingJob request is at most 1048576 bytes; this one is larger" in err


def test_from_request_bytes_that_are_not_text_name_the_file(stack: None, tmp_path: Path, capsys) -> None:
    path = tmp_path / "request.json"
    path.write_bytes(b"\xff\xfe{}")
    assert main(["jobs", "register", "--from-request", str(path)]) == 2
    assert f"{path}: not UTF-8 text" in capsys.readouterr().err


def _register_rule_file(tmp_path: Path, *extra: str) -> int:
    rule = tmp_path / "my_rule.py"
    rule.write_text(RULE)
    return main(
        ["jobs", "register", "--name", "j4", "--s3-output", "s3://trials/trials/j4"]
        + ["--rule-file", str(rule), "--rule-class", "Always", *extra]
    )


def test_a_rule_file_is_uploaded_under_the_rule_prefix(stack: None, tmp_path: Path, capsys) -> None:
    """N7: the CLI uploaded rule code into the trial folder, which a deployed stack refuses."""
    from tornasole.aws.clients import s3_client

    assert _register_rule_file(tmp_path, "--rules-prefix", "s3://trials/custom-rules/") == 0, (
        capsys.readouterr()
    )
    body = s3_client().get_object(Bucket="trials", Key="custom-rules/j4/my_rule.py")["Body"].read()
    assert body == RULE.encode()
    listed = s3_client().list_objects_v2(Bucket="trials", Prefix="trials/")
    assert not [o["Key"] for o in listed.get("Contents", []) if o["Key"].endswith(".py")]


def test_the_rule_prefix_comes_from_the_environment(
    stack: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from tornasole.aws.clients import s3_client

    monkeypatch.setenv("TORNASOLE_CUSTOM_RULES_PREFIX", "s3://trials/custom-rules/")
    assert _register_rule_file(tmp_path) == 0, capsys.readouterr()
    assert s3_client().head_object(Bucket="trials", Key="custom-rules/j4/my_rule.py")["ContentLength"] > 0
