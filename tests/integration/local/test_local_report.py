"""The local mode writes a finished job's report as the deployed stack does, and its event says where."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_local_mode import Events, job_status, register, write_run

from tornasole.aws.clients import client
from tornasole.local import LocalMode, LocalSettings
from tornasole.stack_spec import REPORT_FILE


@pytest.fixture
def local() -> Iterator[LocalMode]:
    with LocalMode(LocalSettings(port=0)) as mode:
        yield mode


def test_a_completed_local_job_has_its_report_in_the_trial(local: LocalMode) -> None:
    events = Events(local)
    trial = register(local, "reported")
    write_run(trial, [1.0, 0.5, float("nan"), 0.2])
    done = events.wait_for(job_status("reported", "Completed"), timeout=60)["detail"]
    key = f"reported/{REPORT_FILE}"
    assert done["TornasoleReportLocation"] == f"s3://{local.settings.bucket}/{key}"
    html = client("s3").get_object(Bucket=local.settings.bucket, Key=key)["Body"].read().decode()
    assert 'data-status="IssuesFound"' in html  # ExplodingTensor fired at the NaN
    assert "<td>1: 2</td>" in html
    assert local.dispatcher is not None
    assert local.dispatcher.errors == []
