"""SimilarAcrossRuns: the same tensors differ between this run and another one.

Choices: the other trial is the first of ``other_trials`` (configurations send
its path as ``other_trials``/``other_trial_0``; ``create_rule`` opens it). At a
step, every selected tensor (``collection_names`` and/or ``tensor_regex``; all
tensors when neither is given) that both trials saved at that step is compared
with ``numpy.allclose(rtol=1e-05, atol=1e-08, equal_nan=True)``; the rule fires
at the first tensor that differs (or whose shapes differ). Tensors only one
trial has are not compared: runs may save different things.

When the other run has ended before the evaluated step (it trained for fewer
steps), or never saved that step, there is nothing to compare: the step is not
an issue, and neither is it an error, so the verdict the rule reached on the
steps both runs have stands (an ``IssuesFound`` stays visible). In the
serverless evaluator the other trial does not list (it is given the evaluated
step's index files only), so a step it lacks answers ``StepNotYetAvailable``:
also nothing to compare.
"""

from __future__ import annotations

import numpy as np

from tornasole.exceptions import NoMoreData, StepNotYetAvailable, StepUnavailable, TensorUnavailableForStep
from tornasole.rules.builtin.base import COLLECTION_NAMES, TENSOR_REGEX, BuiltinRule

__all__ = ["SimilarAcrossRuns"]


class SimilarAcrossRuns(BuiltinRule):
    """Fires when a tensor at a step differs from the same tensor at the same step of ``other_trials[0]``.

    Examples
    --------
    >>> # invoke_rule(SimilarAcrossRuns(trial, other_trials=[create_trial("s3://b/other")]))
    """

    LIKELY_CAUSE = (
        "the tensor differs between runs that should match (nondeterminism or a changed configuration)"
    )
    SUGGESTED_FIX = "compare the two runs' configurations, seeds and data order"

    READS_EARLIER_STEPS = False
    PARAMETERS = (COLLECTION_NAMES, TENSOR_REGEX)

    def check_params(self) -> None:
        if not self.other_trials:
            raise self.param_error("other_trials", "is required: the trial (path) to compare with")

    def invoke_at_step(self, step: int) -> bool:
        other = self.other_trials[0]
        try:
            other.wait_for_steps([step])
        except (StepUnavailable, TensorUnavailableForStep, NoMoreData):
            return False
        except StepNotYetAvailable:
            # the evaluator's other trial holds only this step's index files (no listing): a step it
            # lacks is one the other run never wrote, or has not written yet; either way nothing to
            # compare, and no reason for an Error that would hide the verdict reached so far
            if getattr(other, "listing", True) is False or other.training_ended():
                return False
            raise
        if self.collection_names or self.tensor_regex is not None:
            names = self.selected(step)
        else:
            names = self.base_trial.tensor_names(step=step)
        theirs = set(other.tensor_names(step=step))
        for name in names:
            if name not in theirs:
                continue
            a, b = self.value(name, step), self.value(name, step, trial=other)
            if a is None or b is None:
                continue
            if a.shape != b.shape or not np.allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=True):
                diff = float(np.max(np.abs(a - b))) if a.shape == b.shape else float("nan")
                self.report_issue(
                    f"{name} at step {step} differs from trial {getattr(other, 'name', other)!s} "
                    f"(max |diff|={self.fmt(diff)}; numpy.allclose rtol 1e-05, atol 1e-08)",
                    tensor=name,
                    value=diff,
                )
                return True
        return False
