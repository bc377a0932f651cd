"""The demo is what a user's own code could be: it uses the library's public API, never the CLI's modules."""

from __future__ import annotations

import ast
from pathlib import Path

import tornasole.demo
from tornasole.jobs import format_event, format_job

DEMO = Path(tornasole.demo.__file__).resolve().parent


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_demo_never_imports_the_cli() -> None:
    files = sorted(DEMO.glob("*.py"))
    assert len(files) >= 2
    for path in files:
        assert not any(
            m == "tornasole.cli" or m.startswith("tornasole.cli.") for m in _imported_modules(path)
        ), path


def test_format_job_lists_every_rule_with_its_details() -> None:
    text = format_job(
        {
            "TrainingJobName": "j",
            "TrainingJobStatus": "Completed",
            "DebugRuleEvaluationStatuses": [
                {
                    "RuleConfigurationName": "DeadRelu",
                    "RuleEvaluationStatus": "IssuesFound",
                    "StatusDetails": "x",
                },
                {"RuleConfigurationName": "VanishingGradient", "RuleEvaluationStatus": "NoIssuesFound"},
            ],
        }
    )
    assert text.splitlines() == [
        "job j: Completed",
        "  DeadRelu            IssuesFound    x",
        "  VanishingGradient   NoIssuesFound",
    ]


def test_format_event_for_a_fire_and_for_a_job_change() -> None:
    fire = {
        "detail-type": "Tornasole Rule Issue Found",
        "detail": {
            "TrainingJobName": "j",
            "RuleConfigurationName": "DeadRelu",
            "Step": 5,
            "StatusDetails": "d",
        },
    }
    assert format_event(fire) == "[Tornasole Rule Issue Found] j / DeadRelu at step 5: d"
    change = {
        "detail-type": "SageMaker Training Job State Change",
        "detail": {
            "TrainingJobName": "j",
            "TrainingJobStatus": "Completed",
            "DebugRuleEvaluationStatuses": [
                {"RuleConfigurationName": "A", "RuleEvaluationStatus": "NoIssuesFound"}
            ],
        },
    }
    assert format_event(change) == "[SageMaker Training Job State Change] j: Completed (A=NoIssuesFound)"
