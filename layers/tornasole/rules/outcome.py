"""What a rule found at one step: the outcome the evaluator turns into StatusDetails.

A rule records *why* it fired with :meth:`tornasole.rules.Rule.report_issue`
(a message plus named numbers); :class:`RuleOutcome` carries that together with
where it happened (global step, mode, mode step), so the evaluator can write
``RuleEvaluationStatus``/``StatusDetails`` (EVENTS.md) without parsing text.

``details`` follows EVENTS.md's wording and is capped at 1024 characters
(SageMaker's limit for StatusDetails); ``values`` keeps the numbers as plain
Python floats/ints/strings so they serialise to JSON as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tornasole.rules.actions import Action

__all__ = [
    "RuleOutcome",
    "MAX_DETAILS",
    "ADVICE_PREFIX",
    "format_advice",
    "split_advice",
    "format_number",
    "plain_value",
]

#: SageMaker's limit for ``StatusDetails``.
MAX_DETAILS = 1024

#: Where a firing's advice starts in ``details`` (what ``split_advice`` looks for).
ADVICE_PREFIX = "Likely cause: "

ISSUES_FOUND = "IssuesFound"
NO_ISSUES_FOUND = "NoIssuesFound"
SKIPPED = "Skipped"


def format_number(x: Any) -> str:
    """Short, exact-enough text for a number: ``3.1e-09``, ``0.25``, ``12``.

    Examples
    --------
    >>> format_number(3.1e-09), format_number(0.25), format_number(12)
    ('3.1e-09', '0.25', '12')
    """
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(f) or math.isinf(f):
        return str(f)
    if f == int(f) and abs(f) < 1e15:
        return str(int(f))
    return f"{f:.4g}"


def plain_value(x: Any) -> Any:
    """Turn numpy scalars/arrays into JSON-friendly Python values (NaN/Inf as strings)."""
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    if isinstance(x, (list, tuple)):
        return [plain_value(v) for v in x]
    if isinstance(x, dict):
        return {str(k): plain_value(v) for k, v in x.items()}
    return x


def format_advice(cause: str, fix: str) -> str:
    """One line: what most likely went wrong and what to try (DeepDiagnosis's and UMLAUT's messages).

    Examples
    --------
    >>> format_advice("learning rate too high for Adam", "try 10x lower or add warmup")
    'Likely cause: learning rate too high for Adam. Suggested fix: try 10x lower or add warmup.'
    """
    return f"{ADVICE_PREFIX}{cause.rstrip('.')}. Suggested fix: {fix.rstrip('.')}."


def split_advice(details: str) -> tuple[str, str]:
    """``(finding, advice)`` of a ``details`` text (advice ``""`` when it carries none).

    Examples
    --------
    >>> split_advice("R: condition met at step 3: x < 1. Likely cause: a. Suggested fix: b.")
    ('R: condition met at step 3: x < 1', 'Likely cause: a. Suggested fix: b.')
    """
    at = (details or "").rfind(". " + ADVICE_PREFIX)
    if at < 0:
        return details or "", ""
    return details[:at], details[at + 2 :]


def _truncate(text: str, limit: int = MAX_DETAILS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class RuleOutcome:
    """The result of evaluating one rule at one global step.

    Attributes
    ----------
    rule_name : str
        Class name of the rule (``"VanishingGradient"``).
    step : int
        Global step evaluated.
    fired : bool
        True when the rule's condition held ("IssuesFound").
    mode, mode_step :
        Mode name (``"TRAIN"``) and step within that mode, where the trial knows them.
    details : str
        One line (<= 1024 characters) in EVENTS.md's wording.
    values : dict
        The numbers behind ``details`` (e.g. ``{"tensor": "gradients/fc1.weight", "value": 3.1e-09,
        "threshold": 1e-07}``).
    skipped : bool
        The step could not be evaluated because its tensors were never saved.
    actions : tuple of Action
        Parsed ``action_json``; the evaluator runs them when ``fired``.

    Examples
    --------
    >>> o = RuleOutcome("VanishingGradient", 3, True, "TRAIN", 3, details="VanishingGradient: ...")
    >>> o.status
    'IssuesFound'
    """

    rule_name: str
    step: int
    fired: bool
    mode: str | None = None
    mode_step: int | None = None
    details: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False
    actions: tuple[Action, ...] = ()
    #: A fired outcome's likely cause and suggested fix (:func:`format_advice`); also the end of ``details``.
    advice: str = ""

    @property
    def status(self) -> str:
        """``IssuesFound``, ``NoIssuesFound`` or ``Skipped``."""
        if self.skipped:
            return SKIPPED
        return ISSUES_FOUND if self.fired else NO_ISSUES_FOUND

    @classmethod
    def build(
        cls,
        rule_name: str,
        step: int,
        fired: bool,
        mode: str | None,
        mode_step: int | None,
        messages: list[str],
        values: dict[str, Any],
        *,
        skipped_reason: str | None = None,
        actions: tuple[Action, ...] = (),
        advice: str = "",
    ) -> RuleOutcome:
        """Compose ``details`` from the rule's recorded messages (used by :class:`Rule`).

        A fired outcome's ``advice`` ends ``details``, kept whole when the findings are cut to the limit.
        """
        where = f"step {step}"
        if mode is not None and mode_step is not None:
            where += f" ({mode} {mode_step})"
        if skipped_reason is not None:
            text = f"{rule_name}: skipped {where}: {skipped_reason}"
        elif fired:
            text = f"{rule_name}: condition met at {where}"
            if messages:
                text += ": " + "; ".join(messages)
        else:
            text = f"{rule_name}: no issue at {where}"
        advice = advice if fired and skipped_reason is None else ""
        if advice:
            text = _truncate(text, MAX_DETAILS - len(advice) - 2) + ". " + advice
        return cls(
            rule_name=rule_name,
            step=step,
            fired=fired,
            mode=mode,
            mode_step=mode_step,
            details=_truncate(text),
            values={k: plain_value(v) for k, v in values.items()},
            skipped=skipped_reason is not None,
            actions=actions,
            advice=advice,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (what the evaluator stores per fired step)."""
        return {
            "RuleName": self.rule_name,
            "Step": self.step,
            "Mode": self.mode,
            "ModeStep": self.mode_step,
            "Status": self.status,
            "StatusDetails": self.details,
            "Values": self.values,
        }
