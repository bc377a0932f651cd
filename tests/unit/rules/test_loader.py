"""Custom rules from files: smdebug imports mapped for that file only; every bad input is a clear error."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from tornasole.exceptions import RuleLoadError, RuleParameterError
from tornasole.rules import Rule, invoke_rule
from tornasole.rules.loader import create_custom_rule, load_rule_class, map_module_name

SMDEBUG_RULE_FILE = textwrap.dedent(
    """
    from smdebug.rules import Rule
    from smdebug.trials import create_trial
    from smdebug.exceptions import *
    from smdebug import modes
    import smdebug.rules.rule as rule_module


    class CustomGradientRule(Rule):
        def __init__(self, base_trial, threshold=10.0):
            super().__init__(base_trial)
            self.threshold = float(threshold)

        def invoke_at_step(self, step):
            assert modes.TRAIN.name == "TRAIN" and rule_module.Rule is Rule
            for tname in self.base_trial.tensor_names(collection="gradients"):
                t = self.base_trial.tensor(tname)
                abs_mean = t.reduction_value(step, "mean", abs=True)
                if abs_mean > self.threshold:
                    return True
            return False


    class CheckTrialLoads(Rule):
        def __init__(self, base_trial, path="", action_str=""):
            super().__init__(base_trial, action_str=action_str)
            self.other = create_trial(path)

        def invoke_at_step(self, step):
            try:
                self.other.tensor("nope")
            except TensorUnavailable:
                return True
            return False


    class NotARule:
        pass
    """
)


@pytest.fixture
def rule_file(tmp_path):
    def write(text: str, name: str = "my_rules.py") -> str:
        p = tmp_path / name
        p.write_text(text)
        return str(p)

    return write


def _trial(trial_factory):
    return trial_factory({s: {"gradients/w": np.full(3, v, np.float32)} for s, v in enumerate([1, 20, 1])})


def test_smdebug_rule_file_loads_unchanged_and_runs(trial_factory, rule_file):
    path = rule_file(SMDEBUG_RULE_FILE)
    trial = _trial(trial_factory)
    rule = create_custom_rule(
        path, "CustomGradientRule", trial, threshold="10", rule_to_invoke="CustomGradientRule"
    )
    assert isinstance(rule, Rule)
    assert invoke_rule(rule).fired_steps == [1]
    other = create_custom_rule(path, "CheckTrialLoads", trial, path=trial.path)
    assert other.evaluate(0).fired  # smdebug's exception names came in through the star import


def test_no_global_smdebug_module_is_installed(trial_factory, rule_file):
    before = {m for m in sys.modules if m == "smdebug" or m.startswith("smdebug.")}
    load_rule_class(rule_file(SMDEBUG_RULE_FILE), "CustomGradientRule")
    after = {m for m in sys.modules if m == "smdebug" or m.startswith("smdebug.")}
    assert after == before
    assert map_module_name("smdebug_rulesconfig") is None


def test_action_json_is_attached_to_a_rule_that_does_not_take_it(trial_factory, rule_file):
    rule = create_custom_rule(
        rule_file(SMDEBUG_RULE_FILE),
        "CustomGradientRule",
        _trial(trial_factory),
        action_json='[{"name": "sms", "endpoint": "+15551234567"}]',
    )
    assert rule.actions[0].name == "sms"


def test_syntax_error_names_file_and_line(rule_file):
    path = rule_file("from smdebug.rules import Rule\n\nclass R(Rule)\n    pass\n", "broken.py")
    with pytest.raises(RuleLoadError, match=rf"{path}, line 3: syntax error"):
        load_rule_class(path, "R")


def test_missing_class_lists_what_the_file_defines(rule_file):
    path = rule_file(SMDEBUG_RULE_FILE)
    with pytest.raises(
        RuleLoadError, match=r"no class 'Nope' in the rule file; classes defined: \['CheckTrialLoads'"
    ):
        load_rule_class(path, "Nope")


def test_class_that_is_not_a_rule(rule_file):
    with pytest.raises(RuleLoadError, match="'NotARule' is not a subclass of tornasole.rules.Rule"):
        load_rule_class(rule_file(SMDEBUG_RULE_FILE), "NotARule")


def test_missing_file_and_failing_file(rule_file, tmp_path):
    with pytest.raises(RuleLoadError, match="rule file not found"):
        load_rule_class(str(tmp_path / "absent.py"), "R")
    path = rule_file("x = 1\nraise RuntimeError('boom')\n", "fails.py")
    with pytest.raises(
        RuleLoadError, match=rf"{path}, line 2: loading the rule file raised RuntimeError: boom"
    ):
        load_rule_class(path, "R")


def test_smdebug_module_tornasole_lacks_is_named(rule_file):
    # smdebug.profiler's readers are Tornasole's now (tests/unit/profiler); its PandasFrameAnalysis is not
    path = rule_file("from smdebug.profiler.analysis.utils.pandas_data_analysis import Resource\n", "prof.py")
    missing = r"smdebug.profiler.analysis.utils.pandas_data_analysis \(mapped to tornasole.profiler.analysis"
    with pytest.raises(RuleLoadError, match=rf"line 1: .*{missing}"):
        load_rule_class(path, "R")


def test_unknown_parameter_of_a_custom_rule(trial_factory, rule_file):
    with pytest.raises(
        RuleParameterError, match="CustomGradientRule: parameter 'treshold' is not a parameter"
    ):
        create_custom_rule(
            rule_file(SMDEBUG_RULE_FILE), "CustomGradientRule", _trial(trial_factory), treshold="1"
        )


def test_parameter_that_does_not_parse_in_a_custom_rule(trial_factory, rule_file):
    with pytest.raises(
        RuleParameterError, match="CustomGradientRule: constructing the rule failed: could not convert"
    ):
        create_custom_rule(
            rule_file(SMDEBUG_RULE_FILE), "CustomGradientRule", _trial(trial_factory), threshold="abc"
        )


def test_load_rule_takes_parameters_as_one_dict(trial_factory, rule_file):
    from tornasole.rules.loader import load_rule

    rule = load_rule(
        rule_file(SMDEBUG_RULE_FILE), "CustomGradientRule", _trial(trial_factory), params={"threshold": "5"}
    )
    assert rule.threshold == 5.0
