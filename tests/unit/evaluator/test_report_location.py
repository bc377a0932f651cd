"""Where a job's report is: on the ended job's detail (null when none was written), and on alerts."""

from __future__ import annotations

from tornasole.evaluator.details import REPORT_LOCATION_FIELD, describe, firing_alert
from tornasole.evaluator.models import JobState, JobStatus, RuleConfig, RuleState, RuleStatus, job_arn

REPORT = "s3://b/run/tornasole-report.html"


def _state(status: JobStatus, report: str | None = None) -> JobState:
    return JobState(
        name="job-1",
        arn=job_arn("job-1", account="123456789012"),
        trial_path="s3://b/run",
        status=status,
        seq=1,
        rules_rev=1,
        rules=(RuleState(RuleConfig("VG", "VanishingGradient"), RuleStatus.ISSUES_FOUND),),
        report_location=report,
    )


def test_an_ended_job_says_where_its_report_is_or_null() -> None:
    assert describe(_state(JobStatus.COMPLETED, REPORT))[REPORT_LOCATION_FIELD] == REPORT
    for status in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.STOPPED):
        detail = describe(_state(status))
        assert REPORT_LOCATION_FIELD in detail
        assert detail[REPORT_LOCATION_FIELD] is None
    assert REPORT_LOCATION_FIELD not in describe(_state(JobStatus.IN_PROGRESS))


def test_an_alert_points_at_the_job_s_report_unless_the_rule_recorded_its_own() -> None:
    files = {"TrialPath": "s3://b/run", "IndexFiles": [], "EventFiles": []}

    def alert(state: JobState, values: dict) -> dict:
        return firing_alert(state, "VG", 3, None, None, "VG: fired", values, files, "e1")

    assert alert(_state(JobStatus.COMPLETED, REPORT), {})["ReportLocation"] == REPORT
    assert alert(_state(JobStatus.IN_PROGRESS), {})["ReportLocation"] is None
    own = {"report": "s3://b/run/rule-output/VG.json"}
    assert alert(_state(JobStatus.COMPLETED, REPORT), own)["ReportLocation"] == own["report"]
