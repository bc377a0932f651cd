"""Deployment settings: ``cdk.json`` context (or ``--context key=value``), validated once.

Every value has a default from :mod:`tornasole.stack_spec` or below, so ``cdk synth`` works with
no context at all. A bad value stops synthesis with a :class:`ConfigError` that names the
``--context`` key and says what is accepted.

Examples
--------
>>> cfg = StackConfig.from_mapping({"alert_emails": "ops@example.com,ml@example.com"})
>>> cfg.alert_emails
('ops@example.com', 'ml@example.com')
>>> cfg.layer_path.as_posix()
'build/layer/x86_64'
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.alert_config import PARSERS as ALERT_DESTINATION_PARSERS
from infra.alert_config import AlertConfigError, SlackChannel, TeamsChannel, Webhook
from tornasole.stack_spec import DEFAULT_SPEC, prefixes_overlap

if TYPE_CHECKING:
    from constructs import Node

__all__ = ["ConfigError", "StackConfig", "RETENTION_DAYS"]

# Retention values CloudWatch Logs accepts (days), with the name of aws_logs.RetentionDays for each.
# fmt: off
RETENTION_DAYS = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1096: "THREE_YEARS",
    1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS", 3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}
# fmt: on
ARCHITECTURES = ("x86_64", "arm64")
REMOVAL_POLICIES = ("retain", "destroy")
_EMAIL = re.compile(
    r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$"
)
# DNS-safe S3 bucket names: 3-63 chars, lower case, digits, dots, hyphens; no IP addresses, no "..".
_BUCKET = re.compile(r"^(?!\d+\.\d+\.\d+\.\d+$)(?!.*\.\.)(?!.*\.-)(?!.*-\.)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_PREFIX = re.compile(r"^[A-Za-z0-9!_.*'()/-]*$")
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,256}$")
_STACK = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,127}$")
_LAMBDA_ARN = re.compile(
    r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]+(:[A-Za-z0-9$_-]+)?$"
)


class ConfigError(ValueError):
    """An invalid context value; the message names the ``--context`` key."""


def _fail(key: str, value: Any, expected: str) -> ConfigError:
    return ConfigError(f"invalid --context {key}={value!r}: expected {expected}")


def _int(key: str, value: Any, lo: int, hi: int) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise _fail(key, value, f"an integer between {lo} and {hi}") from None
    if not lo <= n <= hi:
        raise _fail(key, value, f"an integer between {lo} and {hi}")
    return n


def _optional_str(value: Any) -> str | None:
    text = "" if value is None else str(value).strip()
    return text or None


def _prefix(key: str, value: Any) -> str:
    text = str(value or "").strip().lstrip("/")
    if not _PREFIX.match(text):
        raise _fail(key, value, "an S3 key prefix of letters, digits and !_.*'()/- (e.g. 'trials/')")
    return text if not text or text.endswith("/") else text + "/"


def _emails(key: str, value: Any) -> tuple[str, ...]:
    if value in (None, ""):
        return ()
    if isinstance(value, str):
        text = value.strip()
        items = json.loads(text) if text.startswith("[") else text.split(",")
    else:
        items = list(value)
    out = tuple(str(i).strip() for i in items if str(i).strip())
    for addr in out:
        if not _EMAIL.match(addr):
            raise _fail(key, addr, "comma-separated e-mail addresses like 'ops@example.com'")
    return out


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise _fail(key, value, "true or false")


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text == "aarch64":
        text = "arm64"
    if text not in choices:
        raise _fail(key, value, " or ".join(choices))
    return text


def _match(key: str, value: Any, pattern: re.Pattern[str], expected: str) -> str | None:
    text = _optional_str(value)
    if text is not None and not pattern.match(text):
        raise _fail(key, value, expected)
    return text


@dataclass(frozen=True)
class StackConfig:
    """What one deployment of the Tornasole stack is configured with (context key = field name)."""

    stack_name: str = "Tornasole"
    bucket_name: str | None = None  # name for the bucket the stack creates (default: generated)
    existing_bucket_name: str | None = None  # import this bucket instead of creating one
    trial_prefix: str = "trials/"
    event_bus_name: str = DEFAULT_SPEC.bus.name
    event_source: str = DEFAULT_SPEC.bus.source
    state_table_name: str = DEFAULT_SPEC.table.name
    alert_emails: tuple[str, ...] = ()
    alert_lambda_arn: str | None = None  # optional user Lambda for IssuesFound/Error transitions
    # webhook/slack/teams destinations jobs may name (infra/alert_config.py, docs/ALERTS.md)
    alert_webhooks: tuple[Webhook, ...] = ()
    alert_slack_channels: tuple[SlackChannel, ...] = ()
    alert_teams_channels: tuple[TeamsChannel, ...] = ()
    lambda_memory_mb: int = DEFAULT_SPEC.on_object_created.memory_mb
    lambda_architecture: str = "x86_64"
    reserved_concurrency: int | None = None  # bounds concurrent step evaluations
    custom_rules_prefix: str = "custom-rules/"  # 'prefix/' in the trial bucket, or 's3://bucket/prefix/'
    log_retention_days: int = 30
    removal_policy: str = "retain"
    trial_expiration_days: int = 0  # 0: keep trials forever
    alarms: bool = True
    # the rule sandbox VPC's log of rejected flows (what attempted exfiltration leaves); off only where
    # the target cannot create AWS::EC2::FlowLog (MiniStack, in the deploy test)
    sandbox_flow_log: bool = True
    layer_dir: str | None = None  # default build/layer/<architecture> (``make layer``)

    @property
    def layer_path(self) -> Path:
        return Path(self.layer_dir or f"build/layer/{self.lambda_architecture}")

    @property
    def alert_destinations(self) -> tuple[str, ...]:
        """Every ``kind:name`` a job's action may name (``TORNASOLE_ALERT_DESTINATIONS``)."""
        return (
            *(f"webhook:{w.name}" for w in self.alert_webhooks),
            *(f"slack:{c.name}" for c in self.alert_slack_channels),
            *(f"teams:{c.name}" for c in self.alert_teams_channels),
        )

    @property
    def custom_rules_location(self) -> tuple[str | None, str]:
        """(bucket or None for the trial bucket, key prefix) of custom rule sources."""
        if self.custom_rules_prefix.startswith("s3://"):
            bucket, _, key = self.custom_rules_prefix[5:].partition("/")
            return bucket, key
        return None, self.custom_rules_prefix

    @classmethod
    def from_context(cls, node: Node) -> StackConfig:
        """Read every field from the CDK context of ``node`` (``cdk.json`` or ``--context``)."""
        return cls.from_mapping({f.name: node.try_get_context(f.name) for f in fields(cls)})

    @classmethod
    def from_mapping(cls, ctx: Mapping[str, Any]) -> StackConfig:
        """Validate raw context values (strings from ``--context`` or JSON values from ``cdk.json``)."""
        parsers: dict[str, Callable[[str, Any], Any]] = {
            "stack_name": lambda k, v: _match(k, v, _STACK, "a CloudFormation stack name"),
            "bucket_name": lambda k, v: _match(k, v, _BUCKET, "a DNS-safe bucket name (3-63 of a-z 0-9 . -)"),
            "existing_bucket_name": lambda k, v: _match(k, v, _BUCKET, "a DNS-safe bucket name"),
            "trial_prefix": _prefix,
            "event_bus_name": lambda k, v: _match(k, v, _NAME, "an event bus name ([A-Za-z0-9._-])"),
            "event_source": lambda k, v: _source(k, v),
            "state_table_name": lambda k, v: _match(k, v, _NAME, "a DynamoDB table name"),
            "alert_emails": _emails,
            "alert_lambda_arn": lambda k, v: _match(k, v, _LAMBDA_ARN, "a Lambda function ARN"),
            "lambda_memory_mb": lambda k, v: _int(k, v, 128, 10240),
            "lambda_architecture": lambda k, v: _choice(k, v, ARCHITECTURES),
            "reserved_concurrency": lambda k, v: _int(k, v, 1, 1000),
            "custom_rules_prefix": _rules_prefix,
            "log_retention_days": _retention,
            "removal_policy": lambda k, v: _choice(k, v, REMOVAL_POLICIES),
            "trial_expiration_days": lambda k, v: _int(k, v, 0, 36500),
            "alarms": _bool,
            "sandbox_flow_log": _bool,
            "layer_dir": lambda k, v: _optional_str(v),
            **{k: _alert_parser(p) for k, p in ALERT_DESTINATION_PARSERS.items()},
        }
        values = {k: parse(k, ctx[k]) for k, parse in parsers.items() if ctx.get(k) not in (None, "")}
        cfg = cls(**{k: v for k, v in values.items() if v is not None})
        if cfg.bucket_name and cfg.existing_bucket_name:
            raise ConfigError(
                "--context bucket_name and existing_bucket_name are exclusive: set bucket_name to "
                "name the bucket the stack creates, or existing_bucket_name to use yours"
            )
        overlap = cfg.rules_prefix_overlap()
        if overlap:
            raise ConfigError(overlap)
        return cfg

    def rules_prefix_overlap(self) -> str | None:
        """Why ``custom_rules_prefix`` and ``trial_prefix`` overlap (in the trial bucket), or None.

        Why refused: whoever can write training data could then write rule code, which the
        evaluator runs; a deployed stack keeps rule code where only the registrant writes.
        """
        bucket, key = self.custom_rules_location
        trial_bucket = self.existing_bucket_name or self.bucket_name
        if bucket is not None and (trial_bucket is None or bucket != trial_bucket):
            return None  # another bucket (a generated trial bucket name is never a user's bucket)
        trials = self.trial_prefix
        if prefixes_overlap(key, trials):
            return (
                f"--context custom_rules_prefix={self.custom_rules_prefix!r} overlaps trial_prefix="
                f"{trials!r} in the trial bucket: whoever writes training data could write rule code. "
                "Give each its own prefix (e.g. trial_prefix 'trials/', custom_rules_prefix 'custom-rules/')"
            )
        return None


def _alert_parser(parse: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    def run(key: str, value: Any) -> Any:
        try:
            return parse(key, value)
        except AlertConfigError as exc:
            raise ConfigError(str(exc)) from None

    return run


def _source(key: str, value: Any) -> str | None:
    text = _match(key, value, re.compile(r"^[A-Za-z0-9._/-]{1,256}$"), "an event source like 'tornasole'")
    if text is not None and text.startswith("aws."):
        raise _fail(key, value, "a source that does not start with 'aws.' (EventBridge reserves those)")
    return text


def _retention(key: str, value: Any) -> int:
    n = _int(key, value, 1, 3653)
    if n not in RETENTION_DAYS:
        raise _fail(key, value, "one of " + ", ".join(map(str, RETENTION_DAYS)))
    return n


def _rules_prefix(key: str, value: Any) -> str:
    text = str(value).strip()
    if text.startswith("s3://"):
        bucket, _, rest = text[5:].partition("/")
        if not _BUCKET.match(bucket):
            raise _fail(
                key, value, "'prefix/' in the trial bucket or 's3://bucket/prefix/' with a DNS-safe bucket"
            )
        return f"s3://{bucket}/{_prefix(key, rest)}"
    prefix = _prefix(key, text)
    if not prefix:
        raise _fail(key, value, "a non-empty prefix: custom rule code is only loaded from under it")
    return prefix
