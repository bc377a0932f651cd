"""The handlers' configuration, read once per cold start from the environment.

It lives in the evaluator because the evaluator's ``from_env`` constructors take it; the Lambda
handlers (one floor up, :mod:`tornasole.lambda_support`) read it and pass it down.

Why a frozen dataclass: a handler reads its settings in exactly one place and
fails at once, naming the missing variable, instead of failing later inside a
boto3 call with an unhelpful ``ParamValidationError``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from tornasole import config
from tornasole.exceptions import ConfigurationError
from tornasole.stack_spec import (
    DEFAULT_SPEC,
    ENV_CUSTOM_RULE_FUNCTION,
    ENV_CUSTOM_RULE_READER_ROLE,
    ENV_CUSTOM_RULES_PREFIX,
    ENV_TRIAL_PREFIX,
)

__all__ = ["ENV_RULES_FROM_TRIALS", "HandlerEnv"]

#: Explicit opt-in: also load custom rule code from the trials prefix when a rule prefix is configured.
ENV_RULES_FROM_TRIALS = "TORNASOLE_ALLOW_RULES_FROM_TRIALS"


@dataclass(frozen=True)
class HandlerEnv:
    """Settings every evaluator function receives (names from ``tornasole.config``).

    Examples
    --------
    >>> env = HandlerEnv.from_environ({"TORNASOLE_STATE_TABLE": "t", "TORNASOLE_EVENT_BUS": "b"})
    >>> env.event_source
    'tornasole'
    """

    state_table: str
    event_bus: str
    event_source: str = DEFAULT_SPEC.bus.source
    alert_topic_arn: str | None = None
    trial_bucket: str | None = None
    trial_prefix: str = ""
    custom_rules_prefix: str | None = None
    rules_from_trials: bool = False
    #: The rule sandbox (both set: custom rules run there; neither: in this process).
    custom_rule_function: str | None = None
    custom_rule_reader_role: str | None = None

    @property
    def allowed_rule_prefixes(self) -> tuple[str, ...]:
        """Where custom rule code may be loaded from (an empty tuple: nowhere).

        Trust model: whoever can write training data must not be able to run code in the evaluator.
        A deployed stack always configures the rule prefix (``TORNASOLE_CUSTOM_RULES_PREFIX``) and then
        rule code comes from there only; the trials prefix is added only by the explicit opt-in
        ``TORNASOLE_ALLOW_RULES_FROM_TRIALS=true``. With no rule prefix configured (local mode, where
        the one user writes data and rules alike) the trials prefix is the rule prefix.
        """
        trials = f"s3://{self.trial_bucket}/{self.trial_prefix}" if self.trial_bucket else None
        if self.custom_rules_prefix:
            extra = (trials,) if trials and self.rules_from_trials else ()
            return (self.custom_rules_prefix, *extra)
        return (trials,) if trials else ()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> HandlerEnv:
        env = os.environ if environ is None else environ

        def required(name: str) -> str:
            value = env.get(name, "").strip()
            if not value:
                raise ConfigurationError(f"{name} is not set")
            return value

        sandbox = {
            n: env.get(n, "").strip() or None for n in (ENV_CUSTOM_RULE_FUNCTION, ENV_CUSTOM_RULE_READER_ROLE)
        }
        if any(sandbox.values()) and not all(sandbox.values()):
            missing = next(n for n, v in sandbox.items() if not v)
            raise ConfigurationError(f"{missing} is not set (the rule sandbox needs both of {list(sandbox)})")
        return cls(
            state_table=required(config.STATE_TABLE),
            event_bus=required(config.EVENT_BUS),
            event_source=env.get(config.EVENT_SOURCE, "").strip() or DEFAULT_SPEC.bus.source,
            alert_topic_arn=env.get(config.ALERT_TOPIC_ARN, "").strip() or None,
            trial_bucket=env.get(config.TRIAL_BUCKET, "").strip() or None,
            trial_prefix=env.get(ENV_TRIAL_PREFIX, "").strip(),
            custom_rules_prefix=env.get(ENV_CUSTOM_RULES_PREFIX, "").strip() or None,
            rules_from_trials=env.get(ENV_RULES_FROM_TRIALS, "").strip().lower() in ("1", "true", "yes"),
            custom_rule_function=sandbox[ENV_CUSTOM_RULE_FUNCTION],
            custom_rule_reader_role=sandbox[ENV_CUSTOM_RULE_READER_ROLE],
        )
