"""``invoke_rule``: run a rule over a range of global steps, as smdebug's ``invoke_rule`` does.

Semantics (the documented ones, plus what smdebug leaves implicit):

* Steps go from ``start_step`` (``None`` means 0) up to ``end_step``
  **exclusive**; ``end_step=None`` means "until training ends".
* A live trial is waited for: ``Rule.invoke`` blocks in ``wait_for_steps``
  until the step lands. If the trial answers
  :class:`~tornasole.exceptions.StepNotYetAvailable` instead of blocking,
  ``invoke_rule`` polls every ``poll_interval`` seconds (a trial built with
  ``listing=False`` cannot see new steps: the error is raised).
* A step that cannot be evaluated because it, or one of its tensors, was never
  saved (``TensorUnavailableForStep``, ``StepUnavailable``, ``TensorUnavailable``)
  is skipped with one INFO log line. After ``StepUnavailable``, the steps up to
  the next saved step of the base trial are skipped in one go (they cannot
  exist either: a later step is complete), which smdebug does one step at a time.
  ``steps_skipped`` counts only saved steps the rule could not evaluate (a
  tensor missing there): a step number the hook never saved is not a step of
  the trial (a run saving every 10th of 50 steps has 5 steps, not 50).
* A step where the rule opened no tensor of the trial and did not fire (its
  regex or collection matched nothing there, or it judges other steps only)
  counts as skipped, as the evaluator counts it (:mod:`tornasole.rules.verdict`,
  shared with it): a run where every step was skipped is ``NothingEvaluated``,
  never ``NoIssuesFound``.
* :class:`~tornasole.exceptions.NoMoreData` (training ended, nothing after this
  step) ends the loop normally.
* A fire is logged and evaluation goes on (the rule stays "IssuesFound" and
  every fired step is recorded); with ``raise_eval_cond=True`` the
  :class:`~tornasole.exceptions.RuleEvaluationConditionMet` is raised instead.
* Any other exception raised while evaluating a step is re-raised as
  :class:`RuleInvocationError` naming the rule and the step, ``from`` the
  original exception so its traceback is kept.

Unlike smdebug (which returns None), the function returns an
:class:`InvokeSummary`, which is what ``rule_invoker`` prints.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tornasole.exceptions import (
    NoMoreData,
    RuleEvaluationConditionMet,
    StepNotYetAvailable,
    StepUnavailable,
    TornasoleError,
)
from tornasole.rules.outcome import RuleOutcome
from tornasole.rules.req_tensors import is_remote
from tornasole.rules.rule import SKIPPABLE, Rule
from tornasole.rules.verdict import TensorTouches, nothing_evaluated_details, verdict

__all__ = ["invoke_rule", "InvokeSummary", "RuleInvocationError"]

logger = logging.getLogger(__name__)


class RuleInvocationError(TornasoleError):
    """A rule raised while evaluating a step; ``__cause__`` is the original exception.

    Attributes
    ----------
    rule_name : str
    step : int
    """

    def __init__(self, rule_name: str, step: int, cause: BaseException) -> None:
        self.rule_name = rule_name
        self.step = step
        super().__init__(f"rule {rule_name} failed at step {step}: {type(cause).__name__}: {cause}")


@dataclass
class InvokeSummary:
    """What happened in one :func:`invoke_rule` run.

    Attributes
    ----------
    rule_name : str
    start_step : int
    next_step : int
        The first step not evaluated (``end_step`` when the range was exhausted).
    steps_evaluated : int
        Steps where the rule ran to an answer having opened at least one tensor (or fired).
    steps_skipped : int
        Saved steps skipped because tensors the rule needs were not saved there, or where it
        opened none.
    fired : list of RuleOutcome
        One outcome per step where the rule fired, in step order.
    """

    rule_name: str
    start_step: int
    next_step: int = 0
    steps_evaluated: int = 0
    steps_skipped: int = 0
    fired: list[RuleOutcome] = field(default_factory=list)

    @property
    def fired_steps(self) -> list[int]:
        return [o.step for o in self.fired]

    @property
    def first_step(self) -> int | None:
        """First step where the rule fired, or None."""
        return self.fired[0].step if self.fired else None

    #: The rule's ``rule_to_invoke`` and parameters, when known: what :meth:`nothing_evaluated_reason`
    #: says the rule reads.
    rule_to_invoke: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str:
        """``IssuesFound``, ``NoIssuesFound`` or ``NothingEvaluated``: the evaluator's verdict logic
        (:func:`tornasole.rules.verdict.verdict`)."""
        return verdict(bool(self.fired), self.steps_evaluated)

    def nothing_evaluated_reason(self) -> str:
        """What the rule needed and how to save it (the evaluator's StatusDetails for the same verdict)."""
        seen = self.steps_evaluated + self.steps_skipped
        return nothing_evaluated_details(
            self.rule_name, self.rule_to_invoke or self.rule_name, self.parameters, seen
        )


class _LookAhead:
    """Evaluate steps the trial already holds without waiting, and bulk-prefetch a window ahead.

    Only for :class:`~tornasole.rules.Rule` objects that keep the base ``invoke``; anything
    else is called through its own ``invoke(step)``. A step listed by ``base_trial.steps()``
    is complete, so waiting for it again would only cost a step-state lookup. On S3, at a
    step past the window prefetched so far, once the rule has declared what it requires
    there and before that is fetched, the same tensors are prefetched for that step and the
    next ``WINDOW`` saved steps in one batch (:meth:`Rule.prefetch_like`): one round of
    concurrent reads per window, the first step's included. Locally reads are cheap and
    nothing is read ahead (see :mod:`tornasole.rules.req_tensors`).
    """

    WINDOW = 64

    def __init__(self, rule_obj: Any, end_step: int | None) -> None:
        self.rule = rule_obj
        self.end_step = end_step
        self.fast = isinstance(rule_obj, Rule) and type(rule_obj).invoke is Rule.invoke
        self.remote = self.fast and is_remote(rule_obj.base_trial)
        self.known: set[int] = set()
        self.sorted: list[int] = []
        self.prefetched_until = -1
        # the trial had loaded every step when ``sorted`` was listed: the list is final (training ended and
        # the last refresh is done), so a step it lacks was never saved and listing again tells nothing new
        self.final = False

    def _refresh_known(self) -> None:
        trial = self.rule.base_trial
        try:
            self.sorted = list(trial.steps())
            self.final = bool(getattr(trial, "loaded_all_steps", False))
        except Exception:  # noqa: BLE001 - optimisation only
            self.sorted, self.final = [], False
        self.known = set(self.sorted)

    def next_saved_step(self, step: int) -> int | None:
        """The first saved step after ``step`` from the final list; None while the list may still grow."""
        if not self.final:
            return None
        i = bisect.bisect_right(self.sorted, step)
        return self.sorted[i] if i < len(self.sorted) else None

    def invoke(self, step: int) -> None:
        if not self.fast:
            self.rule.invoke(step)
            return
        if step not in self.known and not self.final:
            self._refresh_known()
        if step not in self.known:
            self.rule.invoke(step)  # waits (live trial) or raises StepUnavailable / NoMoreData
            return
        if not self.remote:
            self.rule._invoke(step, available=True)
            return
        self.rule._before_fetch = self._prefetch_from
        try:
            self.rule._invoke(step, available=True)
        finally:
            self.rule._before_fetch = None

    def _prefetch_from(self, step: int) -> None:
        """Prefetch what the rule requires at ``step`` for it and the next saved steps, past the window."""
        if step <= self.prefetched_until:
            return
        i = bisect.bisect_right(self.sorted, step)
        ahead = [s for s in self.sorted[i : i + self.WINDOW] if self.end_step is None or s < self.end_step]
        window = [step, *ahead]
        self.prefetched_until = window[-1]
        try:
            self.rule.prefetch_like(step, window)
        except Exception as exc:  # noqa: BLE001 - a failed guess must not hide the step's own outcome
            logger.debug("%s: prefetch from step %d failed: %s", self.rule.rule_name, step, exc)


def _next_saved_step(rule_obj: Any, step: int) -> int | None:
    try:
        steps = rule_obj.base_trial.steps()
    except Exception:  # noqa: BLE001 - an optimisation only; fall back to step + 1
        return None
    i = bisect.bisect_right(steps, step)
    return steps[i] if i < len(steps) else None


def _declared_tensors(rule_obj: Any) -> bool:
    """Whether the rule declared required tensors at the step just run. Why: ``req_tensors`` keeps the
    tensors it opened at an earlier step, so a rule object reused over the run (here, unlike the
    evaluator, which builds it per step) reads them without opening them again."""
    req = getattr(rule_obj, "req_tensors", None)
    try:
        return req is not None and any(names for _, names in req.plan())
    except Exception:  # noqa: BLE001 - a custom req_tensors: count the step by its tensors opened only
        return False


def _outcome_of(rule_obj: Any, step: int) -> RuleOutcome:
    last = getattr(rule_obj, "last_outcome", None)
    if isinstance(last, RuleOutcome) and last.step == step:
        return last
    name = getattr(rule_obj, "rule_name", type(rule_obj).__name__)
    return RuleOutcome.build(name, step, True, None, None, [], {})


def invoke_rule(
    rule_obj: Any,
    start_step: int | None = 0,
    end_step: int | None = None,
    raise_eval_cond: bool = False,
    *,
    poll_interval: float = 1.0,
    on_step: Callable[[InvokeSummary], None] | None = None,
) -> InvokeSummary:
    """Evaluate ``rule_obj`` at every global step in ``[start_step, end_step)``.

    Parameters
    ----------
    rule_obj : Rule
        Built-in or custom rule instance.
    start_step : int, optional
        First step (default 0).
    end_step : int, optional
        Stop before this step; None runs until the trial reports ``NoMoreData``.
    raise_eval_cond : bool
        Raise ``RuleEvaluationConditionMet`` at the first fire instead of going on.
    poll_interval : float
        Seconds between polls of a trial that answers ``StepNotYetAvailable``.
    on_step : callable, optional
        Called with the summary so far after each saved step (evaluated, fired or
        skipped): progress display.

    Returns
    -------
    InvokeSummary

    Raises
    ------
    RuleInvocationError
        The rule raised at a step (``__cause__`` holds the original exception).

    Examples
    --------
    >>> # from tornasole.trials import create_trial
    >>> # trial = create_trial("s3://bucket/prefix")
    >>> # rule_obj = VanishingGradientRule(trial, threshold=0.0001)
    >>> # invoke_rule(rule_obj, start_step=0, end_step=None)
    """
    name = getattr(rule_obj, "rule_name", type(rule_obj).__name__)
    step = 0 if start_step is None else int(start_step)
    summary = InvokeSummary(
        rule_name=name,
        start_step=step,
        rule_to_invoke=type(rule_obj).__name__,
        parameters=dict(getattr(rule_obj, "params", None) or {}),
    )
    logger.info("Started execution of rule %s at step %d", name, step)
    trial = getattr(rule_obj, "base_trial", None)
    with TensorTouches(trial) as touched:
        _loop(rule_obj, summary, step, end_step, raise_eval_cond, poll_interval, on_step, touched)
    logger.info(
        "Ended execution of rule %s at step %d: %s (%d evaluated, %d skipped)",
        name,
        summary.next_step - 1,
        summary.status,
        summary.steps_evaluated,
        summary.steps_skipped,
    )
    return summary


def _loop(
    rule_obj: Any,
    summary: InvokeSummary,
    step: int,
    end_step: int | None,
    raise_eval_cond: bool,
    poll_interval: float,
    on_step: Callable[[InvokeSummary], None] | None,
    touched: TensorTouches,
) -> None:
    """``invoke_rule``'s loop; sets ``summary.next_step`` however it ends."""
    name = summary.rule_name
    ahead = _LookAhead(rule_obj, end_step)
    counts = touched.trial is not None  # a rule object without a trial: every answer counts
    while end_step is None or step < end_step:
        before = touched.count
        try:
            ahead.invoke(step)
            if counts and touched.count == before and not _declared_tensors(rule_obj):
                summary.steps_skipped += 1  # it opened no tensor: nothing was evaluated here
                logger.info("%s: step %d: no tensor of the rule's was there", name, step)
            else:
                summary.steps_evaluated += 1
            if on_step is not None:
                on_step(summary)
        except RuleEvaluationConditionMet as exc:
            summary.steps_evaluated += 1
            outcome = _outcome_of(rule_obj, step)
            summary.fired.append(outcome)
            logger.info("%s", outcome.details)
            if on_step is not None:
                on_step(summary)
            if raise_eval_cond:
                summary.next_step = step + 1
                raise
            if getattr(exc, "end_of_rule", False):
                step += 1
                break
        except SKIPPABLE as exc:
            if not isinstance(exc, StepUnavailable):  # a saved step, its tensors missing
                summary.steps_skipped += 1
                if on_step is not None:
                    on_step(summary)
            nxt = None
            if isinstance(exc, StepUnavailable):
                nxt = ahead.next_saved_step(step) if ahead.final else _next_saved_step(rule_obj, step)
            if nxt is not None and nxt > step + 1:
                nxt = nxt if end_step is None else min(nxt, end_step)
                logger.info("%s: skipping steps %d..%d: %s", name, step, nxt - 1, exc)
                step = nxt
            else:
                logger.info("%s: skipping step %d: %s", name, step, exc)
                step += 1
            continue
        except NoMoreData:
            logger.info("%s: no more data after step %d", name, step - 1)
            break
        except StepNotYetAvailable:
            if getattr(getattr(rule_obj, "base_trial", None), "listing", True) is False:
                summary.next_step = step
                raise  # a trial that cannot list will never see the step arrive
            time.sleep(poll_interval)
            continue
        except Exception as exc:
            summary.next_step = step
            raise RuleInvocationError(name, step, exc) from exc
        step += 1
    summary.next_step = step
