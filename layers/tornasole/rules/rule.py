"""The ``Rule`` base class: what a user subclasses to check a trial step by step.

Surface and flow follow smdebug's ``Rule`` so custom rules port by changing the
import root: ``invoke(step)`` waits for the step, turns refresh off for the
duration of the step (so ``set_required_tensors`` and ``invoke_at_step`` see the
same steps), lets the rule declare its required tensors, bulk-fetches them
(:mod:`tornasole.rules.req_tensors`) and raises
:class:`~tornasole.exceptions.RuleEvaluationConditionMet` when
``invoke_at_step`` returns True.

Additions:

* :meth:`Rule.evaluate` does the same without raising and returns a
  :class:`~tornasole.rules.outcome.RuleOutcome` (the evaluator's entry point).
* :meth:`Rule.report_issue` lets a rule say *why* it fired; the text becomes the
  outcome's ``details`` (EVENTS.md's StatusDetails) and the numbers its
  ``values``. (smdebug's ``self.report`` dict is kept as it was, for rules that
  write to it.)
* Constructor: ``Rule(base_trial, other_trials=None, action_str=None)``. The
  original Tornasole signature was ``(base_trial, other_trials=None)``, smdebug
  1.0's is ``(base_trial, action_str, other_trials=None)``; a string in the
  second position is therefore taken as ``action_str`` so both call styles work.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from tornasole.exceptions import (
    RuleEvaluationConditionMet,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from tornasole.rules.actions import parse_actions
from tornasole.rules.outcome import RuleOutcome, format_advice, format_number
from tornasole.rules.req_tensors import RequiredTensors

__all__ = ["Rule", "SKIPPABLE"]

#: Errors meaning "this step cannot be evaluated, and never will be": the step is skipped.
SKIPPABLE = (TensorUnavailableForStep, StepUnavailable, TensorUnavailable)


class Rule(ABC):
    """Base class of every rule (built-in or custom).

    Parameters
    ----------
    base_trial : Trial
        The trial the rule watches.
    other_trials : list of Trial, optional
        Further trials to compare with (e.g. SimilarAcrossRuns).
    action_str : str, optional
        ``action_json`` (RULES.md "Actions"): run by the evaluator when the rule fires.

    Examples
    --------
    The original documentation's custom rule, as written (only the import root changed):

    >>> from tornasole.rules import Rule
    >>> class CustomGradientRule(Rule):
    ...     def __init__(self, base_trial, threshold=10.0):
    ...         super().__init__(base_trial)
    ...         self.threshold = float(threshold)
    ...
    ...     def invoke_at_step(self, step):
    ...         for tname in self.base_trial.tensor_names(collection="gradients"):
    ...             t = self.base_trial.tensor(tname)
    ...             abs_mean = t.reduction_value(step, "mean", abs=True)
    ...             if abs_mean > self.threshold:
    ...                 return True
    ...         return False
    """

    #: Called with the step once the rule has declared what it requires there, before that is
    #: fetched: ``invoke_rule``'s look-ahead on S3 reads the step and the next ones in one batch.
    _before_fetch: Callable[[int], None] | None = None

    def __init__(
        self, base_trial: Any, other_trials: Any = None, action_str: Any = None, **kwargs: Any
    ) -> None:
        if isinstance(other_trials, str):  # smdebug 1.0 order: (base_trial, action_str, other_trials)
            other_trials, action_str = action_str, other_trials
        action = kwargs.pop("action_json", None) or action_str
        if kwargs:
            raise TypeError(f"{type(self).__name__}.__init__ got unexpected arguments: {sorted(kwargs)}")
        self.base_trial = base_trial
        self.other_trials = list(other_trials) if other_trials is not None else None
        self.trials = [base_trial, *(self.other_trials or [])]
        self.req_tensors = RequiredTensors(base_trial, self.other_trials)
        self.rule_name = type(self).__name__
        self.logger = logging.getLogger(f"tornasole.rules.{self.rule_name}")
        self.actions = parse_actions(self.rule_name, action)
        self.report: dict[str, Any] = {
            "RuleTriggered": 0,
            "Violations": 0,
            "Details": {},
            "Datapoints": 0,
            "RuleParameters": "",
        }
        #: Outcome of the last :meth:`evaluate`, or of the last :meth:`invoke` that fired.
        self.last_outcome: RuleOutcome | None = None
        self._messages: list[str] = []
        self._values: dict[str, Any] = {}

    # -- what a rule overrides -------------------------------------------------------------
    def set_required_tensors(self, step: int) -> None:  # noqa: B027 - optional hook
        """Declare the tensors needed at ``step`` with ``self.req_tensors.add(...)`` (optional)."""

    def required_tensors(self, step: int) -> None:
        """Original Tornasole name of :meth:`set_required_tensors`; override either one."""
        return self.set_required_tensors(step)

    @abstractmethod
    def invoke_at_step(self, step: int) -> bool:
        """Return True when the rule's condition holds at global ``step``."""

    # -- reporting ---------------------------------------------------------------------------
    def report_issue(self, message: str, **values: Any) -> None:
        """Record why the rule fires at the current step (becomes the outcome's details/values).

        Examples
        --------
        >>> # inside invoke_at_step
        >>> # self.report_issue(f"mean(|{name}|)={m:.2g} < threshold {t:g}", tensor=name, value=m)
        """
        self._messages.append(message)
        for k, v in values.items():
            if k in self._values and not isinstance(self._values[k], list):
                continue  # the first finding of a step wins for scalar values
            self._values[k] = v

    def prefetch_like(self, step: int, steps: list[int]) -> int:
        """Speculatively bulk-read, for each of ``steps``, what this rule required at ``step``.

        ``invoke_rule``'s look-ahead: after evaluating ``step`` it assumes the rule will want the
        same tensors at the same relative steps (``step - 1`` becomes ``s - 1``) and hands all of
        a window's (tensor, step) pairs to one ``trial.prefetch`` call per trial, so their reads
        are concurrent and batched. A wrong guess costs only reads: each step still fetches what
        it really requires. Returns the number of (tensor, step) pairs requested.
        """
        count = 0
        for trial, names in self.req_tensors.plan():
            prefetch = getattr(trial, "prefetch", None)
            if prefetch is None:
                continue
            groups: dict[tuple[int, ...], list[str]] = {}
            pairs: set[tuple[str, int]] = set()
            for name, own_steps in names.items():
                offsets = {s - step for s in own_steps}
                wanted = tuple(sorted({w + o for w in steps for o in offsets if w + o >= 0}))
                groups.setdefault(wanted, []).append(name)
                pairs.update((name, w) for w in wanted)
            for wanted, group in groups.items():
                prefetch(group, list(wanted))
            self.req_tensors.set_prefetched(trial, pairs)
            count += len(pairs)
        return count

    def advice(self) -> tuple[str, str] | None:
        """``(likely cause, suggested fix)`` of the current step's firing, or None (no advice).

        Called after ``invoke_at_step`` returned True; the numbers it recorded with :meth:`report_issue` are
        in ``self._values``. The built-in rules answer from their ``LIKELY_CAUSE``/``SUGGESTED_FIX``.
        """
        return None

    def _advice_text(self) -> str:
        """:meth:`advice` as one line; a rule whose advice fails still reports its finding."""
        try:
            found = self.advice()
        except Exception:  # noqa: BLE001 - advice is decoration; never fail a rule for it
            logging.getLogger(__name__).debug("advice of %s failed", self.rule_name, exc_info=True)
            return ""
        return format_advice(*found) if found else ""

    @staticmethod
    def fmt(x: Any) -> str:
        """Format a number the way details do (``3.1e-09``)."""
        return format_number(x)

    # -- running -----------------------------------------------------------------------------
    def _call_required(self, step: int) -> None:
        cls = type(self)
        if cls.set_required_tensors is not Rule.set_required_tensors:
            self.set_required_tensors(step)
        elif cls.required_tensors is not Rule.required_tensors:
            self.required_tensors(step)

    def _run(self, step: int, available: bool = False) -> bool:
        from tornasole.analysis.utils import no_refresh

        self._messages = []
        self._values = {}
        if not available:
            self.base_trial.wait_for_steps([step])
        with no_refresh(self.trials):
            self.req_tensors.clear()
            self.req_tensors.mark_available(self.base_trial, [step])
            self._call_required(step)
            if self._before_fetch is not None:
                self._before_fetch(step)
            self.req_tensors.fetch()
            try:
                return bool(self.invoke_at_step(step))
            except RuleEvaluationConditionMet:
                return True  # some smdebug rules raise instead of returning True

    def _where(self, step: int) -> tuple[str | None, int | None]:
        try:
            both = getattr(self.base_trial, "mode_modestep", None)
            mode, mode_step = (
                both(step) if both else (self.base_trial.mode(step), self.base_trial.mode_step(step))
            )
            return getattr(mode, "name", str(mode)), int(mode_step)
        except Exception:  # noqa: BLE001 - mode is decoration; never fail a rule for it
            return None, None

    def evaluate(self, step: int) -> RuleOutcome:
        """Evaluate the rule at global ``step`` without raising when it fires.

        Returns a :class:`RuleOutcome`; a step whose tensors were never saved gives a ``skipped``
        outcome. ``StepNotYetAvailable``/``NoMoreData`` and errors raised by the rule propagate.

        Examples
        --------
        >>> # outcome = rule.evaluate(1200); outcome.fired, outcome.details
        """
        try:
            fired = self._run(step)
        except SKIPPABLE as exc:
            mode, mode_step = self._where(step)
            outcome = RuleOutcome.build(
                self.rule_name,
                step,
                False,
                mode,
                mode_step,
                [],
                {},
                skipped_reason=str(exc),
                actions=self.actions,
            )
        else:
            mode, mode_step = self._where(step)
            if fired:
                self.report["RuleTriggered"] += 1
                self.report["Violations"] += 1
            self.report["Datapoints"] += 1
            outcome = RuleOutcome.build(
                self.rule_name,
                step,
                fired,
                mode,
                mode_step,
                self._messages,
                self._values,
                actions=self.actions,
                advice=self._advice_text() if fired else "",
            )
        self.last_outcome = outcome
        return outcome

    def invoke(self, step: int) -> None:
        """smdebug's entry point: evaluate ``step`` and raise ``RuleEvaluationConditionMet`` if it fires.

        Raises ``TensorUnavailableForStep``/``StepUnavailable``/``TensorUnavailable`` for a step that
        cannot be evaluated (``invoke_rule`` skips those).
        """
        self._invoke(step, available=False)

    def _invoke(self, step: int, available: bool) -> None:
        """``invoke``; ``available=True`` when the caller knows the step is complete (no wait)."""
        if not self._run(step, available):
            self.last_outcome = None  # built only when needed: invoke_rule reads it for fired steps
            return
        mode, mode_step = self._where(step)
        self.last_outcome = RuleOutcome.build(
            self.rule_name,
            step,
            True,
            mode,
            mode_step,
            self._messages,
            self._values,
            actions=self.actions,
            advice=self._advice_text(),
        )
        raise RuleEvaluationConditionMet(self.rule_name, step)
