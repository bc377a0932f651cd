"""Trust model: where a deployed evaluator may load custom rule code from (``HandlerEnv``)."""

from __future__ import annotations

import pytest

from tornasole.lambda_support.env import ENV_RULES_FROM_TRIALS, HandlerEnv
from tornasole.stack_spec import ENV_CUSTOM_RULES_PREFIX, ENV_TRIAL_PREFIX

BASE = {
    "TORNASOLE_STATE_TABLE": "t",
    "TORNASOLE_EVENT_BUS": "b",
    "TORNASOLE_TRIAL_BUCKET": "trials-bucket",
    ENV_TRIAL_PREFIX: "trials/",
}


def test_a_configured_rule_prefix_is_the_only_source_of_rule_code() -> None:
    env = HandlerEnv.from_environ({**BASE, ENV_CUSTOM_RULES_PREFIX: "s3://rules-bucket/custom-rules/"})
    assert env.allowed_rule_prefixes == ("s3://rules-bucket/custom-rules/",)


@pytest.mark.parametrize("value", ["true", "1", "YES"])
def test_the_trial_prefix_is_added_only_by_the_explicit_opt_in(value: str) -> None:
    env = HandlerEnv.from_environ(
        {**BASE, ENV_CUSTOM_RULES_PREFIX: "s3://rules-bucket/custom-rules/", ENV_RULES_FROM_TRIALS: value}
    )
    assert env.allowed_rule_prefixes == ("s3://rules-bucket/custom-rules/", "s3://trials-bucket/trials/")


@pytest.mark.parametrize("value", ["", "false", "0", "no", "maybe"])
def test_anything_but_a_yes_leaves_the_trial_prefix_out(value: str) -> None:
    env = HandlerEnv.from_environ(
        {**BASE, ENV_CUSTOM_RULES_PREFIX: "s3://rules-bucket/custom-rules/", ENV_RULES_FROM_TRIALS: value}
    )
    assert env.allowed_rule_prefixes == ("s3://rules-bucket/custom-rules/",)


def test_without_a_rule_prefix_local_mode_uses_the_trial_location() -> None:
    assert HandlerEnv.from_environ(BASE).allowed_rule_prefixes == ("s3://trials-bucket/trials/",)
    no_bucket = {k: v for k, v in BASE.items() if k != "TORNASOLE_TRIAL_BUCKET"}
    assert HandlerEnv.from_environ(no_bucket).allowed_rule_prefixes == ()
