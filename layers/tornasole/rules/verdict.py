"""One verdict logic for a rule over a run: the evaluator and the offline ``invoke`` both call it.

Why one module: the same trial must get the same verdict from ``tornasole invoke`` and from the
evaluator. Before, the evaluator counted a step where the rule opened no tensor as skipped (its
tensors matched nothing) and ended such a rule ``Error: NothingEvaluated``, while ``invoke`` counted
the same steps as evaluated and answered ``NoIssuesFound``.

The verdicts:

* ``IssuesFound``: the rule fired at some step.
* ``NoIssuesFound``: it looked at its tensors at one step or more and never fired.
* ``NothingEvaluated``: it never looked at a tensor (none was saved, or its regex or collection
  matched nothing). It has not found the run healthy, and it has not failed either: it had nothing
  to read. Its details say what it reads and how to save it (:func:`nothing_evaluated_details`).

Where SageMaker's ``RuleEvaluationStatus`` is written (``describe``, the state-change event),
``NothingEvaluated`` is ``NoIssuesFound`` with StatusDetails starting ``NothingEvaluated:``
(:func:`rule_evaluation_status`; docs/EVENTS.md gives the reasoning). Tornasole's own surfaces (the
``RESULT`` line, ``jobs status``) show the verdict itself (:func:`verdict_of_status`).

A step counts as evaluated when the rule opened at least one tensor of the trial there
(:class:`TensorTouches`), or fired.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ISSUES_FOUND",
    "NOTHING_EVALUATED",
    "NO_ISSUES_FOUND",
    "TensorTouches",
    "nothing_evaluated_details",
    "rule_evaluation_status",
    "verdict",
    "verdict_of_status",
]

ISSUES_FOUND = "IssuesFound"
NO_ISSUES_FOUND = "NoIssuesFound"
#: The verdict of a rule that evaluated no step, and the prefix of its StatusDetails.
NOTHING_EVALUATED = "NothingEvaluated"


def verdict(fired: bool, steps_evaluated: int) -> str:
    """``IssuesFound``, ``NoIssuesFound`` or ``NothingEvaluated`` for a rule over a finished run.

    Examples
    --------
    >>> verdict(False, 0), verdict(False, 3), verdict(True, 1)
    ('NothingEvaluated', 'NoIssuesFound', 'IssuesFound')
    """
    if fired:
        return ISSUES_FOUND
    return NO_ISSUES_FOUND if steps_evaluated > 0 else NOTHING_EVALUATED


def rule_evaluation_status(rule_verdict: str) -> str:
    """The verdict as SageMaker's ``RuleEvaluationStatus`` (one of its six values)."""
    return NO_ISSUES_FOUND if rule_verdict == NOTHING_EVALUATED else rule_verdict


def verdict_of_status(status: str, details: str | None) -> str:
    """The verdict a stored ``RuleEvaluationStatus`` and its StatusDetails stand for.

    Examples
    --------
    >>> verdict_of_status("NoIssuesFound", "NothingEvaluated: A evaluated 0 of 3 steps: ...")
    'NothingEvaluated'
    >>> verdict_of_status("NoIssuesFound", "A: no issues found in 3 evaluated steps")
    'NoIssuesFound'
    """
    if status == NO_ISSUES_FOUND and (details or "").startswith(f"{NOTHING_EVALUATED}:"):
        return NOTHING_EVALUATED
    return status


def _steps(n: int) -> str:
    return f"{n} step{'s' * (n != 1)}"


def _as_param(value: Any) -> str:
    """A parsed parameter (a compiled regex, a list) as the string a configuration carries."""
    if isinstance(value, (list, tuple)):
        return ",".join(_as_param(v) for v in value)
    return str(getattr(value, "pattern", value))


def nothing_evaluated_details(
    name: str, rule_to_invoke: str, parameters: Mapping[str, Any] | None, steps_seen: int
) -> str:
    """StatusDetails of a rule that evaluated none of ``steps_seen`` steps: what it needed and how to
    save it (``tornasole.rules.inputs``), or, for a rule not described there, what can cause it."""
    from tornasole.rules.inputs import rule_needs

    given = {k: _as_param(v) for k, v in (parameters or {}).items() if v is not None}
    needs = rule_needs(rule_to_invoke, given)
    why = (
        needs.text()
        if needs is not None
        else "none of its tensors were found (they matched nothing, or every step was skipped, unreadable, "
        "incomplete or outside its start/end steps)"
    )
    return f"{NOTHING_EVALUATED}: {name} evaluated 0 of {_steps(steps_seen)}: {why}"


class TensorTouches:
    """Counts the tensors a rule opens on a trial (``trial.tensor(name)``) while it runs.

    Why: a rule whose regex or collection matches nothing iterates over no tensor and returns
    "no issue"; counted as evaluated, it would end as NoIssuesFound having looked at nothing.
    The method is shadowed on the trial instance and restored on exit.
    """

    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self.count = 0

    def __enter__(self) -> TensorTouches:
        if self.trial is not None:
            original = type(self.trial).tensor

            def tensor(name: str) -> Any:
                t = original(self.trial, name)
                self.count += 1
                return t

            self.trial.tensor = tensor
        return self

    def __exit__(self, *exc: object) -> None:
        if self.trial is not None:
            self.trial.__dict__.pop("tensor", None)
