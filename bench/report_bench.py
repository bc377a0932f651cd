"""``tornasole report`` on a 10,000-step job: seconds and bytes (issue #31's target: < 10 s, < 5 MB).

Writes a trial of STEPS steps (a TRAIN loss every step, EVAL every 10th, two weights and two gradients
every step, system metrics every 0.5 s and a trace event per step and phase, two slow steps) with
``tests/unit/reports/report_trials.py``, then times:

* ``job``: the report of a registered job (its verdicts given: what the stack renders at the end);
* ``trial``: ``tornasole report TRIAL``: the recommended set evaluated over every step, then rendered.

Usage: PYTHONPATH=layers python bench/report_bench.py [STEPS] [--skip-trial]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "unit" / "reports"))

from report_trials import write_report_trial  # noqa: E402

from tornasole.reports import job_report_html, trial_report_html  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "steps", nargs="?", type=int, default=10_000, help="steps of the trial (default 10000)"
    )
    parser.add_argument("--skip-trial", action="store_true", help="time the job's report alone")
    args = parser.parse_args()
    steps = args.steps
    with tempfile.TemporaryDirectory() as tmp:
        trial = os.path.join(tmp, "run")
        t = time.perf_counter()
        write_report_trial(trial, steps, slow_steps=[steps // 3, 2 * steps // 3])
        print(f"wrote a {steps}-step trial in {time.perf_counter() - t:.1f} s")
        detail = {
            "TrainingJobName": "bench",
            "TrainingJobStatus": "Completed",
            "DebugHookConfig": {"S3OutputPath": trial},
            "DebugRuleConfigurations": [
                {
                    "RuleConfigurationName": "VanishingGradient",
                    "RuleParameters": {"rule_to_invoke": "VanishingGradient"},
                }
            ],
            "DebugRuleEvaluationStatuses": [
                {
                    "RuleConfigurationName": "VanishingGradient",
                    "RuleEvaluationStatus": "IssuesFound",
                    "StatusDetails": "VanishingGradient: condition met",
                }
            ],
        }
        t = time.perf_counter()
        html = job_report_html(detail, {"VanishingGradient": list(range(0, steps, 7))})
        print(f"job:   {time.perf_counter() - t:.2f} s, {len(html.encode()) / 1e6:.2f} MB")
        if not args.skip_trial:
            t = time.perf_counter()
            html = trial_report_html(trial)
            print(f"trial: {time.perf_counter() - t:.2f} s, {len(html.encode()) / 1e6:.2f} MB")
        print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
