"""Issue #34 N7: rule code never under the trial prefix by configuration (refused before synthesis)."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, StackConfig


@pytest.mark.parametrize(
    "context",
    [
        {"trial_prefix": "trials/", "custom_rules_prefix": "trials/rules/"},
        {"trial_prefix": "trials/rules/", "custom_rules_prefix": "trials/"},
        {"trial_prefix": "/", "custom_rules_prefix": "custom-rules/"},  # trials: the whole bucket
        {"trial_prefix": "data", "custom_rules_prefix": "data"},
        {
            "existing_bucket_name": "my-bucket",
            "trial_prefix": "debug/",
            "custom_rules_prefix": "s3://my-bucket/debug/rules/",
        },
    ],
)
def test_a_rules_prefix_inside_the_trials_is_refused(context: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="custom_rules_prefix=.* overlaps trial_prefix"):
        StackConfig.from_mapping(context)


@pytest.mark.parametrize(
    "context",
    [
        {},
        {"trial_prefix": "trials/", "custom_rules_prefix": "trials-rules/"},  # a sibling, not inside
        {"existing_bucket_name": "my-bucket", "trial_prefix": "", "custom_rules_prefix": "s3://rules-b/r/"},
    ],
)
def test_separate_prefixes_are_accepted(context: dict[str, str]) -> None:
    assert StackConfig.from_mapping(context).rules_prefix_overlap() is None
