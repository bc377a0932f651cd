"""One custom rule at one step in the process that runs it: its reply to the evaluator.

The rule sandbox function (``lambda_support.handlers.custom_rule``) and the local mode's forked
child (``tornasole.local.rule_child``) both run ``rule_reply``: the rule on a trial of its own,
through a step runner on the storage the rule may read, with the history windows it was sent
(``wire.rule_windows``), answered as one reply (``wire.reply_of``), a transient failure included.
One function, so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tornasole.evaluator.failures import TransientError
from tornasole.evaluator.models import RuleConfig, StepFiles
from tornasole.evaluator.sandbox.rule_runners import InProcessCustomRuleRunner, RunsRules
from tornasole.evaluator.sandbox.wire import Window, history_from_windows, reply_of

__all__ = ["rule_reply"]


def rule_reply(
    step_runner: RunsRules,
    job_name: str,
    trial_path: str,
    files: StepFiles,
    config: RuleConfig,
    recent: Window,
    first: Window,
    remaining_s: Callable[[], float] | None = None,
) -> dict[str, Any]:
    """``config`` at ``files.step`` through ``step_runner``: the reply (``transient`` when the rule
    met a transient error, so the evaluator retries the step)."""
    try:
        outcome = InProcessCustomRuleRunner(step_runner).evaluate(
            job_name, trial_path, files, config, history_from_windows(recent, first), remaining_s
        )
    except TransientError as exc:
        return {"kind": "transient", "reason": str(exc)[:1024]}
    return reply_of(outcome)
