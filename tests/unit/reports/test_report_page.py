"""The report page: what it shows, that it is self-contained and bounded, and that names cannot inject.

Trials are written by ``report_trials`` (our format writer and ``tornasole.profiler.format``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from report_trials import write_report_trial

from tornasole.reports import job_report_html, trial_report_html
from tornasole.reports.charts import MAX_POINTS, downsample
from tornasole.reports.profiler_data import load_profiler_data
from tornasole.reports.verdicts import Verdict

HOSTILE = "<script>alert('x')</script>\"><img src=x onerror=alert(1)>"


def _ids(html: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', html))


def _detail(trial: str, name: str = "my-job", rule: str = "VanishingGradient", details: str = "") -> dict:
    return {
        "TrainingJobName": name,
        "TrainingJobStatus": "Completed",
        "DebugHookConfig": {"S3OutputPath": trial},
        "DebugRuleConfigurations": [
            {"RuleConfigurationName": rule, "RuleParameters": {"rule_to_invoke": "VanishingGradient"}},
        ],
        "DebugRuleEvaluationStatuses": [
            {"RuleConfigurationName": rule, "RuleEvaluationStatus": "IssuesFound", "StatusDetails": details},
        ],
        # profiler rules in their own lists, as describe and SageMaker's events carry them
        "ProfilerRuleConfigurations": [
            {
                "RuleConfigurationName": "LowGPUUtilization",
                "RuleParameters": {"rule_to_invoke": "LowGPUUtilization"},
            },
        ],
        "ProfilerRuleEvaluationStatuses": [
            {
                "RuleConfigurationName": "LowGPUUtilization",
                "RuleEvaluationStatus": "IssuesFound",
                "StatusDetails": "LowGPUUtilization: p95 utilisation 12% < 70%. Likely cause: the data "
                "loader starves the GPU. Suggested fix: raise num_workers.",
            },
        ],
        "CreationTime": "1700000000000",
        "TrainingStartTime": "1700000000000",
        "TrainingEndTime": "1700000360000",
    }


def test_a_trial_report_has_every_section_and_the_recommended_verdicts(tmp_path: Path) -> None:
    trial = write_report_trial(str(tmp_path / "run"), 300, slow_steps=[100, 250])
    html = trial_report_html(trial)
    assert {
        "job-summary",
        "rule-verdicts",
        "loss-chart",
        "layer-stats",
        "norms-weights",
        "norms-gradients",
        "profiler",
        "utilisation-chart",
        "step-time-histogram",
        "step-outliers",
        "phase-breakdown",
        "profiler-rules",
    } <= _ids(html)
    assert html.count('<tr class="verdict"') >= 10  # the recommended set, evaluated here
    assert "loss (train)" in html
    assert "loss (eval)" in html
    outliers = html[html.index('id="step-outliers"') :].split("</table>")[0]
    assert re.findall(r"<tr><td class=num>(\d+)</td>", outliers) == ["100", "250"]
    for phase in ("data loader", "forward", "backward", "optimizer"):
        assert f"{phase}: " in html


def test_the_page_needs_no_network_and_runs_no_script(tmp_path: Path) -> None:
    html = trial_report_html(write_report_trial(str(tmp_path / "run"), 50))
    assert "<script" not in html.lower()
    assert not re.search(r"\b(src|href)\s*=", html, re.IGNORECASE)
    urls = set(re.findall(r"https?://[^\"' )]+", html))
    assert urls == {"http://www.w3.org/2000/svg"}  # the SVG namespace, never fetched
    assert "default-src 'none'" in html


def test_hostile_names_are_escaped_everywhere(tmp_path: Path) -> None:
    trial = write_report_trial(
        str(tmp_path / "run"), 20, names={"weights/fc1": f"weights/{HOSTILE}", "loss": f"loss{HOSTILE}"}
    )
    detail = _detail(
        trial,
        name=HOSTILE,
        rule=HOSTILE,
        details=f"{HOSTILE}: fired. Likely cause: {HOSTILE}. Suggested fix: {HOSTILE}.",
    )
    html = job_report_html(detail, {HOSTILE: [3, 7]})
    assert HOSTILE not in html
    assert "<script>" not in html
    assert "<img" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&quot;&gt;&lt;img" in html
    assert html.count("&lt;script&gt;") >= 6  # title, job, rule, finding, cause, fix, tensor names


def test_a_job_report_splits_tensor_and_profiler_rules_and_lists_firing_steps(tmp_path: Path) -> None:
    trial = write_report_trial(str(tmp_path / "run"), 30)
    details = "VanishingGradient: condition met. Likely cause: vanished. Suggested fix: use ReLU."
    html = job_report_html(_detail(trial, details=details), {"VanishingGradient": [4, 9, 9]})
    debugger = html[html.index('id="rule-verdicts"') : html.index('id="loss-chart"')]
    profiler = html[html.index('id="profiler-rules"') :]
    assert "VanishingGradient" in debugger
    assert "LowGPUUtilization" not in debugger
    assert "<td>2: 4, 9</td>" in debugger
    assert "<b>Likely cause:</b> vanished" in debugger
    assert "<b>Suggested fix:</b> use ReLU" in debugger
    assert "<b>Suggested fix:</b> raise num_workers" in profiler
    assert "duration" in html  # start and end times known: the job's timing


def test_no_profiler_output_no_profiler_section(tmp_path: Path) -> None:
    trial = write_report_trial(str(tmp_path / "run"), 10, profiler=False)
    html = trial_report_html(trial)
    assert 'id="profiler"' not in html
    assert load_profiler_data(trial) is None


def test_a_broken_profiler_file_is_named_and_the_rest_is_drawn(tmp_path: Path) -> None:
    trial = write_report_trial(str(tmp_path / "run"), 40)
    bad = next((tmp_path / "run" / "profiler-output" / "system").rglob("*.json"))
    bad.write_text('{"Type": "cpu", "Dimension": "CPUUtilization", "Value": "lots", "Timestamp": 1}\n{}\n')
    data = load_profiler_data(trial)
    assert data is not None
    assert data.steps  # the trace files are still read
    assert len(data.problems) == 1
    assert bad.name in data.problems[0]
    html = trial_report_html(trial)
    assert 'id="profiler-problems"' in html
    assert bad.name in html


def test_a_trial_that_is_not_there_is_an_error_naming_it(tmp_path: Path) -> None:
    from tornasole.cli.invoke_report import TrialNotFoundError, wait_for_trial

    with pytest.raises(TrialNotFoundError, match="nothing-here"):
        trial_report_html(str(tmp_path / "nothing-here"), open_trial=lambda p: wait_for_trial(p, 0))


def test_downsampling_bounds_points_and_keeps_spikes() -> None:
    xs = list(range(100_000))
    ys = [1.0] * len(xs)
    ys[54_321] = 1e6
    dx, dy = downsample(xs, ys)
    assert len(dx) <= MAX_POINTS
    assert 54_321 in dx
    assert max(dy) == 1e6
    assert dx == sorted(dx)


def test_verdict_advice_split() -> None:
    v = Verdict("R", "R", "IssuesFound", "IssuesFound", "R: x. Likely cause: a. Suggested fix: b.")
    assert (v.finding, v.cause_and_fix) == ("R: x", ("a", "b"))
    assert not v.is_profiler
    assert Verdict("mine", "StepOutlier", "InProgress", "InProgress", "").is_profiler
