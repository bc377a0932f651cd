"""The alert body's schema in docs/EVENTS.md is the code's, and the example in docs/ALERTS.md is valid."""

from __future__ import annotations

import json
import re
from pathlib import Path

from alert_checks import assert_valid_alert
from tornasole.alerts.body import ALERT_SCHEMA

DOCS = Path(__file__).resolve().parents[3] / "docs"


def _json_blocks(path: Path) -> list[object]:
    return [json.loads(b) for b in re.findall(r"```json\n(.*?)\n```", path.read_text(encoding="utf-8"), re.S)]


def test_events_md_prints_the_alert_schema() -> None:
    schemas = [b for b in _json_blocks(DOCS / "EVENTS.md") if isinstance(b, dict) and "$schema" in b]
    assert schemas == [ALERT_SCHEMA]


def test_the_example_in_alerts_md_is_a_valid_alert() -> None:
    bodies = [b for b in _json_blocks(DOCS / "ALERTS.md") if isinstance(b, dict) and "SchemaVersion" in b]
    assert len(bodies) == 1
    assert_valid_alert(bodies[0])


def test_the_context_examples_in_alerts_md_are_accepted() -> None:
    from infra.config import StackConfig

    blocks = [b for b in _json_blocks(DOCS / "ALERTS.md") if isinstance(b, dict) and "SchemaVersion" not in b]
    context = {k: json.dumps(v) for b in blocks for k, v in b.items()}
    config = StackConfig.from_mapping(context)
    assert set(config.alert_destinations) == {
        "webhook:oncall",
        "webhook:slack-hook",
        "slack:ml-team",
        "teams:ops",
    }
