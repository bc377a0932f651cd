"""Parameter parsing: strings as configurations deliver them and typed Python values."""

from __future__ import annotations

import re

import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.modes import TRAIN
from tornasole.rules.actions import parse_actions
from tornasole.rules.params import Param, parse_params, parse_value

PARAMS = (
    Param("threshold", "float", "0.5", "a float"),
    Param("num_steps", "int", "10", "an int"),
    Param("flag", "bool", "False", "a bool"),
    Param("tensor_regex", "regex", None, "a regex"),
    Param("ids", "int_list", "0", "ints"),
    Param("names", "str_list", None, "names"),
    Param("mode", "mode", None, "a mode"),
    Param("needed", "str", None, "must be given", required=True),
)


def parse(**raw):
    return parse_params("MyRule", {"needed": "x", **raw}, PARAMS)


def test_defaults_are_parsed_from_their_strings():
    p = parse()
    assert p == {
        "threshold": 0.5,
        "num_steps": 10,
        "flag": False,
        "tensor_regex": None,
        "ids": [0],
        "names": None,
        "mode": None,
        "needed": "x",
    }


def test_strings_and_typed_values_give_the_same_result():
    as_strings = parse(threshold="1e-7", num_steps="3", flag="true", ids="1, 2", names="a,b", mode="TRAIN")
    typed = parse(threshold=1e-7, num_steps=3, flag=True, ids=[1, 2], names=["a", "b"], mode=TRAIN)
    assert as_strings == typed
    assert as_strings["mode"] is TRAIN


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("True", True),
        ("true", True),
        ("1", True),
        ("yes", True),
        ("False", False),
        ("0", False),
        ("off", False),
    ],
)
def test_bool_spellings(raw, expected):
    assert parse(flag=raw)["flag"] is expected


def test_lists_accept_json_and_empty():
    assert parse(ids='["3", 4]')["ids"] == [3, 4]
    assert parse(ids="")["ids"] == []
    assert parse(names="None")["names"] is None


def test_int_accepts_integral_float_strings_only():
    assert parse(num_steps="10.0")["num_steps"] == 10
    with pytest.raises(
        RuleParameterError, match=r"MyRule: parameter 'num_steps' value '2.5' is not an integer"
    ):
        parse(num_steps="2.5")


def test_bad_float_names_rule_and_parameter():
    with pytest.raises(RuleParameterError) as err:
        parse(threshold="abc")
    assert str(err.value) == "MyRule: parameter 'threshold' value 'abc' is not a float"
    assert err.value.rule_name == "MyRule"
    assert err.value.parameter == "threshold"


def test_regex_is_compiled_once_with_a_clear_error():
    assert parse(tensor_regex=".*relu")["tensor_regex"] == re.compile(".*relu")
    with pytest.raises(
        RuleParameterError, match=r"'tensor_regex' value '\(' is not a valid regular expression"
    ):
        parse(tensor_regex="(")


def test_unknown_key_lists_valid_ones_and_meta_keys_pass():
    with pytest.raises(
        RuleParameterError,
        match="parameter 'treshold' is not a parameter of this rule; valid "
        "parameters: flag, ids, mode, names, needed, num_steps, tensor_regex, threshold",
    ):
        parse(treshold="1")
    assert "rule_to_invoke" not in parse(rule_to_invoke="MyRule")
    assert parse(action_json="[]")["action_json"] == "[]"


def test_missing_required_parameter():
    with pytest.raises(RuleParameterError, match="MyRule: parameter 'needed' is required but missing"):
        parse_params("MyRule", {}, PARAMS)


def test_bad_bool_and_mode():
    with pytest.raises(RuleParameterError, match="is not a boolean"):
        parse(flag="maybe")
    with pytest.raises(RuleParameterError, match="is not a mode"):
        parse(mode="TRAINING")


def test_unknown_kind_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown kind"):
        Param("x", "complex")


def test_parse_value_keeps_compiled_patterns():
    pat = re.compile("a")
    assert parse_value("R", Param("r", "regex"), pat) is pat


def test_actions_parse_validate_and_accept_a_single_object():
    acts = parse_actions(
        "R",
        '[{"name": "StopTraining", "training_job_prefix": "job-"}, {"name": "email", "endpoint": "a@b.c"},'
        ' {"name": "sms", "endpoint": "+15551234567"}]',
    )
    assert [a.name for a in acts] == ["stoptraining", "email", "sms"]
    assert acts[0].training_job_prefix == "job-"
    assert parse_actions("R", '{"name": "email", "endpoint": "x@y.z"}')[0].endpoint == "x@y.z"
    assert parse_actions("R", "") == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "is not valid JSON"),
        ('[{"name": "pager"}]', "unknown action 'pager'; allowed: stoptraining, email, sms"),
        ('[{"name": "email"}]', "needs an 'endpoint'"),
        ("[1]", "must be an object with a 'name'"),
        ('"x"', "must be a JSON list"),
    ],
)
def test_bad_actions_name_rule_and_parameter(text, message):
    with pytest.raises(
        RuleParameterError, match=re.escape("R: parameter 'action_json' ") + ".*" + re.escape(message)
    ):
        parse_actions("R", text)
