"""The Rule API as the original documentation uses it, and invoke_rule's documented semantics."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from rules_helpers import write_trial

from tornasole.exceptions import RuleEvaluationConditionMet, TensorUnavailable
from tornasole.rules import Rule, RuleInvocationError, invoke_rule
from tornasole.trials import create_trial


# -- the documentation's examples, as written (import root changed) ------------------------------
class CustomGradientRule(Rule):
    def __init__(self, base_trial, threshold=10.0):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        for tname in self.base_trial.tensor_names(collection="gradients"):
            t = self.base_trial.tensor(tname)
            abs_mean = t.reduction_value(step, "mean", abs=True)
            if abs_mean > self.threshold:
                return True
        return False


class VanishingGradientRule(Rule):
    def __init__(self, base_trial, threshold=0.0000001):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def set_required_tensors(self, step):
        for tname in self.base_trial.tensor_names(collection="gradients"):
            self.req_tensors.add(tname, steps=[step])

    def invoke_at_step(self, step):
        for tensor in self.req_tensors.get():
            abs_mean = tensor.reduction_value(step, "mean", abs=True)
            if abs_mean < self.threshold:
                return True
        return False


def _grad_steps(values):
    return {
        s: {"gradients/w": np.full(4, v, np.float32), "loss": np.float32(1.0)} for s, v in enumerate(values)
    }


def test_documentation_custom_gradient_rule_runs_as_written(trial_factory):
    trial = trial_factory(_grad_steps([1, 1, 20, 1]))
    rule_obj = CustomGradientRule(trial, threshold="10")
    summary = invoke_rule(rule_obj, start_step=0, end_step=None)
    assert summary.fired_steps == [2]
    assert summary.fired[0].details == "CustomGradientRule: condition met at step 2 (GLOBAL 2)"


def test_documentation_vanishing_gradient_rule_with_required_tensors(trial_factory):
    trial = trial_factory(_grad_steps([1e-3, 1e-9, 1e-3]))
    rule_obj = VanishingGradientRule(trial, threshold=0.0001)
    assert invoke_rule(rule_obj, start_step=0, end_step=None).first_step == 1
    assert list(rule_obj.req_tensors.get_names()) == ["gradients/w"]
    assert rule_obj.req_tensors.get_tensor_steps("gradients/w") == [2]


def test_invoke_raises_condition_met_with_rule_name_and_step(trial_factory):
    trial = trial_factory(_grad_steps([1e-3, 1e-9]))
    rule = VanishingGradientRule(trial, threshold=0.0001)
    rule.invoke(0)
    with pytest.raises(RuleEvaluationConditionMet) as err:
        rule.invoke(1)
    assert (err.value.rule_name, err.value.step) == ("VanishingGradientRule", 1)
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(rule, raise_eval_cond=True)


class OldStyleRule(Rule):
    """Original Tornasole names: required_tensors, should_match_regex, (base_trial, other_trials)."""

    def __init__(self, base_trial, other_trials=None):
        super().__init__(base_trial, other_trials)

    def required_tensors(self, step):
        self.req_tensors.add("gradients/.*", steps=[step], should_match_regex=True)
        for t in self.other_trials or ():
            self.req_tensors.add("gradients/w", steps=[step], trial=t)

    def invoke_at_step(self, step):
        mine = [t.value(step) for t in self.req_tensors.get()]
        theirs = [t.value(step) for o in self.other_trials for t in self.req_tensors.get(o)]
        return not np.array_equal(mine[0], theirs[0])


def test_required_tensors_alias_regex_and_other_trials(trial_factory):
    a = trial_factory(_grad_steps([1, 2, 3]))
    b = trial_factory(_grad_steps([1, 2, 4]))
    assert invoke_rule(OldStyleRule(a, [b])).fired_steps == [2]


class SmdebugStyleRule(Rule):
    def __init__(self, base_trial, action_str="", other_trials=None):
        super().__init__(base_trial, action_str, other_trials)

    def invoke_at_step(self, step):
        return step == 1


def test_smdebug_constructor_order_is_understood(trial_factory):
    trial = trial_factory(_grad_steps([1, 1]))
    rule = SmdebugStyleRule(trial, '[{"name": "email", "endpoint": "a@b.c"}]')
    assert rule.other_trials is None
    out = rule.evaluate(1)
    assert out.fired
    assert out.actions[0].endpoint == "a@b.c"


class MissingTensorRule(Rule):
    def set_required_tensors(self, step):
        self.req_tensors.add("nope", steps=[step])

    def invoke_at_step(self, step):
        return True


def test_missing_required_tensor_skips_steps(trial_factory):
    trial = trial_factory(_grad_steps([1, 1]))
    summary = invoke_rule(MissingTensorRule(trial))
    assert summary.fired == []
    assert summary.steps_skipped == 2
    with pytest.raises(TensorUnavailable):
        MissingTensorRule(trial).invoke(0)
    assert MissingTensorRule(trial).evaluate(0).status == "Skipped"


class CountingRule(Rule):
    def __init__(self, base_trial):
        super().__init__(base_trial)
        self.seen = []

    def invoke_at_step(self, step):
        self.seen.append(step)
        return False


def test_end_step_is_exclusive_and_start_step_honoured(trial_factory):
    trial = trial_factory(_grad_steps([1] * 6))
    rule = CountingRule(trial)
    summary = invoke_rule(rule, start_step=2, end_step=5)
    assert rule.seen == [2, 3, 4]
    assert summary.next_step == 5


class ReadingRule(CountingRule):
    def invoke_at_step(self, step):
        self.base_trial.tensor("x").value(step)
        return super().invoke_at_step(step)


def test_unsaved_steps_are_skipped_in_one_go_and_no_more_data_ends(trial_factory):
    trial = trial_factory({0: {"x": np.ones(1)}, 500: {"x": np.ones(1)}, 1000: {"x": np.ones(1)}})
    rule = ReadingRule(trial)
    summary = invoke_rule(rule)
    assert rule.seen == [0, 500, 1000]
    assert (summary.steps_evaluated, summary.steps_skipped) == (3, 0)  # unsaved step numbers are not steps
    assert summary.next_step == 1001  # stopped by NoMoreData after the last step
    assert summary.status == "NoIssuesFound"


def test_a_rule_that_opens_no_tensor_evaluated_nothing_as_the_evaluator_counts_it(trial_factory):
    """The same steps the evaluator records as skipped (it looked at no tensor) are skipped offline."""
    trial = trial_factory({0: {"x": np.ones(1)}, 500: {"x": np.ones(1)}, 1000: {"x": np.ones(1)}})
    rule = CountingRule(trial)
    summary = invoke_rule(rule)
    assert rule.seen == [0, 500, 1000]
    assert (summary.steps_evaluated, summary.steps_skipped) == (0, 3)
    assert summary.status == "NothingEvaluated"
    assert "tensor" not in trial.__dict__  # the counting shadow is gone after the run


class BrokenRule(Rule):
    def invoke_at_step(self, step):
        if step == 2:
            return 1 / 0
        return False


def test_a_rule_that_raises_reports_the_step_and_keeps_the_traceback(trial_factory):
    trial = trial_factory(_grad_steps([1, 1, 1, 1]))
    with pytest.raises(RuleInvocationError) as err:
        invoke_rule(BrokenRule(trial))
    assert str(err.value) == "rule BrokenRule failed at step 2: ZeroDivisionError: division by zero"
    assert err.value.step == 2
    assert isinstance(err.value.__cause__, ZeroDivisionError)
    assert err.value.__cause__.__traceback__ is not None


def test_invoke_rule_waits_for_steps_of_a_live_trial(tmp_path):
    # GIVEN a trial whose later steps are written while the rule is already running
    path = str(tmp_path / "live")
    write_trial(path, _grad_steps([1e-3, 1e-3]), end=False)
    trial = create_trial(path, collections_timeout=0.1, poll_interval=0.01)

    def finish():
        time.sleep(0.3)
        from tornasole.format.writer import TrialWriter

        tw = TrialWriter(path)
        sw = tw.step_writer(2)
        sw.add_tensor("gradients/w", np.zeros(4, np.float32))
        tw.write_step(sw)
        tw.write_end_marker()

    writer = threading.Thread(target=finish)
    writer.start()
    summary = invoke_rule(VanishingGradientRule(trial, threshold=1e-4))
    writer.join()
    assert summary.fired_steps == [2]
    assert summary.steps_evaluated == 3
