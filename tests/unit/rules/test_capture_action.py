"""The ``capture`` action in a rule's ``action_json``: checked at registration like the other actions."""

from __future__ import annotations

import json

import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.rules.actions import parse_actions


def test_capture_parses_with_bounds_and_round_trips_through_to_dict() -> None:
    (action,) = parse_actions("R", '{"name": "Capture", "steps": "20", "collections": "gradients,weights"}')
    assert (action.name, action.steps, action.collections) == ("capture", 20, ("gradients", "weights"))
    assert action.destination is None
    again = parse_actions("R", json.dumps([action.to_dict()]))
    assert again == (action,)
    (default,) = parse_actions("R", '[{"name": "capture"}]')
    assert (default.steps, default.collections) == (10, ("gradients", "weights"))


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ({"name": "capture", "steps": "100000"}, "steps '100000' must be a whole number from 1 to 100"),
        ({"name": "capture", "collections": "weights,all"}, "unknown collection 'all'"),
        ({"name": "capture", "steps": "twenty"}, "steps 'twenty'"),
    ],
)
def test_a_bad_capture_action_names_the_rule_the_parameter_and_the_field(item, why) -> None:
    with pytest.raises(RuleParameterError, match=why) as info:
        parse_actions("LossSpike", json.dumps([{"name": "email", "endpoint": "a@b.c"}, item]))
    assert str(info.value).startswith("LossSpike: parameter 'action_json' action #1 (capture): ")


def test_the_sdk_builder_and_the_cli_write_an_action_registration_accepts() -> None:

    from tornasole.cli.jobs_register import _action_json
    from tornasole.exceptions import ConfigurationError
    from tornasole.jobs.rule_configs import ActionList, Capture, StopTraining

    sdk = ActionList(StopTraining(), Capture(20, ["weights", "gradients"])).serialize()
    cli = _action_json(["stoptraining", "capture:20:weights,gradients"])
    assert parse_actions("R", sdk) == parse_actions("R", cli)
    (_, capture) = parse_actions("R", cli)
    assert (capture.steps, capture.collections) == (20, ("gradients", "weights"))
    assert parse_actions("R", _action_json(["capture"]))[0].steps == 10
    with pytest.raises(ConfigurationError, match="steps '500'"):
        Capture(500)
    with pytest.raises(RuleParameterError, match="unknown collection 'all'"):
        parse_actions("R", _action_json(["capture:5:all"]))
