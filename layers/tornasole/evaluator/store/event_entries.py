"""EventBridge entries within EventBridge's size limit: fitted when written, checked when sent.

Why: a state-change event embeds every rule's configuration and the hook
configuration (SageMaker's DescribeTrainingJob shape). Ninety rules make a
detail over EventBridge's 256 KiB entry limit, which moto does not enforce and
AWS does: the entry is refused, for good. ``fit_event`` therefore trims a
detail that does not fit *before* it is stored in the outbox, in steps that
keep what a subscriber acts on (names, statuses, the event id) and drop what
``tornasole jobs status NAME`` can show in full (rule parameters, the hook's
collections, long status details), and says so in ``TornasoleDetailTrimmed``.
``check_entry`` refuses, with a clear error, an entry that still would not fit.

The outbox (``outbox``) stores fitted entries and its publisher checks them before sending.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tornasole.evaluator.details import clip
from tornasole.evaluator.store.item_limits import EVENTBRIDGE_ENTRY_BYTES
from tornasole.exceptions import TornasoleError
from tornasole.stack_spec import DEFAULT_SPEC

__all__ = [
    "EVENT_BUDGET_BYTES",
    "PublishError",
    "TRIMMED_FIELD",
    "check_entry",
    "entry_bytes",
    "fit_event",
]


class PublishError(TornasoleError):
    """An outbox item could not be delivered (it stays unpublished and is retried)."""


#: What a fitted event may use: the limit less room for the envelope (source, time, bus name).
EVENT_BUDGET_BYTES = EVENTBRIDGE_ENTRY_BYTES - 4 * 1024
TRIMMED_FIELD = "TornasoleDetailTrimmed"


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def entry_bytes(detail_type: str, detail_json: str, resources: list[str], source: str = "") -> int:
    """EventBridge's size of an entry: source, detail type, detail JSON and resources (plus its time)."""
    source = source or DEFAULT_SPEC.bus.source
    return 14 + _utf8(source) + _utf8(detail_type) + _utf8(detail_json) + sum(_utf8(r) for r in resources)


def _size(payload: dict[str, Any]) -> int:
    detail = json.dumps(payload["detail"], sort_keys=True)
    return entry_bytes(payload["detail_type"], detail, payload.get("resources", []))


def _trim_steps() -> list[Any]:
    """Trimming steps, mildest first; each keeps the detail in SageMaker's shape (every field present)."""

    def rule_parameters(d: dict[str, Any]) -> None:
        for r in d.get("DebugRuleConfigurations", []) or []:
            r["RuleParameters"] = {}

    def hook_config(d: dict[str, Any]) -> None:
        hook = d.get("DebugHookConfig")
        if isinstance(hook, dict):
            d["DebugHookConfig"] = {"S3OutputPath": hook.get("S3OutputPath"), "CollectionConfigurations": []}

    def status_details(d: dict[str, Any]) -> None:
        for st in d.get("DebugRuleEvaluationStatuses", []) or []:
            st["StatusDetails"] = clip(st.get("StatusDetails", ""), 128)
        for key in ("StatusDetails", "FailureReason", "TornasoleJobError"):
            if isinstance(d.get(key), str):
                d[key] = clip(d[key], 256)
        loc = d.get("S3Location")
        if isinstance(loc, dict):
            for key in ("IndexFiles", "EventFiles"):
                if isinstance(loc.get(key), list) and len(loc[key]) > 4:
                    loc[key] = loc[key][:4]

    def no_status_details(d: dict[str, Any]) -> None:
        for st in d.get("DebugRuleEvaluationStatuses", []) or []:
            st["StatusDetails"] = ""

    def fewer_rules(d: dict[str, Any]) -> None:
        # the rules that changed status lately come first: those are what the event is about
        statuses = sorted(
            d.get("DebugRuleEvaluationStatuses", []) or [],
            key=lambda st: str(st.get("LastModifiedTime") or ""),
            reverse=True,
        )[:16]
        names = {st.get("RuleConfigurationName") for st in statuses}
        d["DebugRuleEvaluationStatuses"] = statuses
        d["DebugRuleConfigurations"] = [
            r for r in d.get("DebugRuleConfigurations", []) or [] if r.get("RuleConfigurationName") in names
        ]

    return [rule_parameters, hook_config, status_details, no_status_details, fewer_rules]


def fit_event(payload: dict[str, Any], job: str, budget: int = EVENT_BUDGET_BYTES) -> dict[str, Any]:
    """``payload`` (``detail_type`` / ``detail`` / ``resources``) as is when it fits ``budget``, else a
    copy with its detail trimmed step by step until it does, marked with ``TornasoleDetailTrimmed``."""
    if _size(payload) <= budget:
        return payload
    fitted = copy.deepcopy(payload)
    detail = fitted["detail"]
    detail[TRIMMED_FIELD] = (
        f"detail trimmed to fit EventBridge's {EVENTBRIDGE_ENTRY_BYTES // 1024} KiB entry limit; "
        f"the full state: tornasole jobs status {clip(job, 256)}"
    )
    for step in _trim_steps():
        step(detail)
        if _size(fitted) <= budget:
            break
    return fitted


def check_entry(entry: dict[str, Any]) -> None:
    """Refuse (``PublishError``) a PutEvents entry over EventBridge's limit: AWS would, moto does not."""
    size = entry_bytes(entry["DetailType"], entry["Detail"], entry.get("Resources", []), entry["Source"])
    if size > EVENTBRIDGE_ENTRY_BYTES:
        what = f"event {entry['DetailType']!r} of {size} bytes"
        raise PublishError(f"{what} exceeds EventBridge's {EVENTBRIDGE_ENTRY_BYTES}-byte limit")
