"""What goes to the rule sandbox function and what comes back, validated both ways.

Why both ways: the request carries credentials and a user's rule configuration, so the sandbox
checks its shape before acting on it; the reply is written by a process in which a user's code ran,
so the evaluator treats it as hostile: bounded in size, a known outcome kind, typed fields, details
clipped and values capped with the same limits as an in-process rule's (``details.clip``,
``limits.cap_values``), never more than the one rule's verdict at the one step it asked for.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from tornasole.evaluator.details import clip
from tornasole.evaluator.models import MAX_HISTORY_STEPS, History, RuleConfig, StepOutcome
from tornasole.evaluator.store.item_limits import cap_values

__all__ = [
    "MAX_REPLY_BYTES",
    "MAX_REQUEST_BYTES",
    "OUTCOME_KINDS",
    "SandboxReplyError",
    "SandboxRequest",
    "Window",
    "history_from_windows",
    "outcome_from_reply",
    "reply_of",
    "rule_windows",
]

#: A request: the rule's configuration (bounded at registration), two history windows, credentials.
MAX_REQUEST_BYTES = 256 * 1024
#: A reply: one verdict, its details (1 KiB clipped) and values (16 KiB capped), with room for JSON.
MAX_REPLY_BYTES = 64 * 1024
#: Outcome kinds a reply may carry; ``transient`` asks for the step to be retried.
OUTCOME_KINDS = ("fired", "no_issue", "skipped", "error", "step_error", "transient")
_CREDENTIAL_KEYS = ("AccessKeyId", "SecretAccessKey", "SessionToken")
_MAX_HISTORY = 256
_MAX_WORKERS = 1024

Window = tuple[tuple[int, tuple[str, ...]], ...]


class SandboxReplyError(ValueError):
    """The sandbox's reply is not a well-formed, bounded verdict."""


def _str(value: Any, what: str, limit: int = 2048) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise ValueError(f"{what} must be a string of at most {limit} characters")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10**12:
        raise ValueError(f"{what} must be a step number (an integer in [0, 10^12))")
    return value


def _seconds(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
        raise ValueError("seconds must be null or a number of seconds in (0, 3600]")
    return float(value)


def _workers(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > _MAX_WORKERS:
        raise ValueError(f"{what} must be a list of at most {_MAX_WORKERS} worker names")
    return tuple(_str(w, f"{what} entry", 256) for w in value)


def _window(value: Any, what: str) -> Window:
    if not isinstance(value, list) or len(value) > _MAX_HISTORY:
        raise ValueError(f"{what} must be a list of at most {_MAX_HISTORY} [step, workers] pairs")
    out = []
    for entry in value:
        if not isinstance(entry, list) or len(entry) != 2:
            raise ValueError(f"{what} entries must be [step, workers] pairs")
        out.append((_int(entry[0], f"{what} step"), _workers(entry[1], f"{what} workers")))
    return tuple(out)


@dataclass(frozen=True)
class SandboxRequest:
    """One custom rule at one step of one job's trial, with the credentials to read it."""

    job: str
    trial: str
    step: int
    workers: tuple[str, ...]
    rule: RuleConfig
    credentials: dict[str, str]
    recent: Window = ()
    first: Window = ()
    #: Seconds the evaluator can still wait for the verdict (its invocation's remaining time less the
    #: invoke's overhead); the sandbox cuts the rule's deadline to it. None: no bound known.
    seconds: float | None = None

    def to_bytes(self) -> bytes:
        """The invocation payload; ``ValueError`` when it would exceed ``MAX_REQUEST_BYTES``."""
        body = {
            "version": 1,
            "job": self.job,
            "trial": self.trial,
            "step": self.step,
            "workers": list(self.workers),
            "recent": [[s, list(w)] for s, w in self.recent],
            "first": [[s, list(w)] for s, w in self.first],
            "seconds": self.seconds,
            "rule": {
                "name": self.rule.name,
                "class": self.rule.rule_to_invoke,
                "source": self.rule.source_s3_uri,
                "parameters": dict(self.rule.parameters),
                "other_trials": list(self.rule.other_trials),
                "logging_level": self.rule.logging_level,
            },
            "credentials": {k: self.credentials[k] for k in _CREDENTIAL_KEYS},
        }
        data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        if len(data) > MAX_REQUEST_BYTES:
            raise ValueError(f"the sandbox request is {len(data)} bytes; at most {MAX_REQUEST_BYTES}")
        return data

    @classmethod
    def from_event(cls, event: Any) -> SandboxRequest:
        """Parse and check an invocation payload (``ValueError`` naming the bad field)."""
        if not isinstance(event, dict) or event.get("version") != 1:
            raise ValueError("the request must be a version 1 object")
        rule = event.get("rule")
        creds = event.get("credentials")
        if not isinstance(rule, dict) or not isinstance(creds, dict):
            raise ValueError("the request must hold 'rule' and 'credentials' objects")
        params = rule.get("parameters")
        if not isinstance(params, dict) or len(params) > 256:
            raise ValueError("rule.parameters must be an object of at most 256 entries")
        others = rule.get("other_trials")
        if not isinstance(others, list) or len(others) > 16:
            raise ValueError("rule.other_trials must be a list of at most 16 trials")
        level = rule.get("logging_level")
        config = RuleConfig(
            name=_str(rule.get("name"), "rule.name", 256),
            rule_to_invoke=_str(rule.get("class"), "rule.class", 256),
            parameters={
                _str(k, "parameter name", 256): _str(v, f"parameter {k}", 64 * 1024)
                for k, v in params.items()
            },
            source_s3_uri=_str(rule.get("source"), "rule.source"),
            other_trials=tuple(_str(t, "rule.other_trials entry") for t in others),
            logging_level=None if level is None else _str(level, "rule.logging_level", 16),
        )
        return cls(
            job=_str(event.get("job"), "job", 512),
            trial=_str(event.get("trial"), "trial"),
            step=_int(event.get("step"), "step"),
            workers=_workers(event.get("workers"), "workers"),
            rule=config,
            credentials={k: _str(creds.get(k), f"credentials.{k}", 4096) for k in _CREDENTIAL_KEYS},
            recent=_window(event.get("recent"), "recent"),
            first=_window(event.get("first"), "first"),
            seconds=_seconds(event.get("seconds")),
        )


def reply_of(outcome: StepOutcome) -> dict[str, Any]:
    """The sandbox's reply for one rule outcome (what :func:`outcome_from_reply` reads back)."""
    if outcome.error or outcome.step_error:
        kind = "error" if outcome.error else "step_error"
        return {"kind": kind, "reason": clip(outcome.error or outcome.step_error or "")}
    kind = "fired" if outcome.fired else "skipped" if outcome.skipped else "no_issue"
    return {
        "kind": kind,
        "mode": outcome.mode,
        "mode_step": outcome.mode_step,
        "details": clip(outcome.details),
        "values": json.loads(cap_values(outcome.values)),
        "latency_ms": round(float(outcome.latency_ms), 3),
    }


def _reply_object(payload: bytes) -> dict[str, Any]:
    if len(payload) > MAX_REPLY_BYTES:
        raise SandboxReplyError(f"reply larger than {MAX_REPLY_BYTES} bytes")
    try:
        reply = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SandboxReplyError(f"reply is not JSON: {type(exc).__name__}") from None
    if not isinstance(reply, dict):
        raise SandboxReplyError(f"reply is a {type(reply).__name__}, not an object")
    return reply


def outcome_from_reply(payload: bytes, config: RuleConfig, step: int) -> tuple[str, StepOutcome]:
    """``(kind, outcome)`` for a reply to a request for ``config`` at ``step``.

    Raises ``SandboxReplyError`` for anything but a well-formed, bounded verdict.
    """
    reply = _reply_object(payload)
    kind = reply.get("kind")
    if kind not in OUTCOME_KINDS:
        raise SandboxReplyError(f"unknown outcome kind {str(kind)[:64]!r}")
    if kind in ("error", "step_error", "transient"):
        reason = reply.get("reason")
        if not isinstance(reason, str):
            raise SandboxReplyError(f"a {kind} reply needs a string 'reason'")
        text = clip(reason)
        if kind == "error":
            return kind, StepOutcome(config.name, step, error=text)
        return kind, StepOutcome(config.name, step, step_error=text)
    mode, mode_step, details = reply.get("mode"), reply.get("mode_step"), reply.get("details")
    values, latency = reply.get("values"), reply.get("latency_ms")
    if mode is not None and (not isinstance(mode, str) or len(mode) > 32):
        raise SandboxReplyError("'mode' must be a short string or null")
    if mode_step is not None and (isinstance(mode_step, bool) or not isinstance(mode_step, int)):
        raise SandboxReplyError("'mode_step' must be an integer or null")
    if mode_step is not None and not 0 <= mode_step < 10**12:
        raise SandboxReplyError("'mode_step' is out of range")
    if not isinstance(details, str) or not isinstance(values, dict):
        raise SandboxReplyError("'details' must be a string and 'values' an object")
    if isinstance(latency, bool) or not isinstance(latency, (int, float)) or not math.isfinite(latency):
        raise SandboxReplyError("'latency_ms' must be a finite number")
    return kind, StepOutcome(
        rule_name=config.name,
        step=step,
        fired=kind == "fired",
        mode=mode,
        mode_step=mode_step,
        details=clip(details),
        values=json.loads(cap_values(values)),
        latency_ms=max(0.0, float(latency)),
        skipped=kind == "skipped",
    )


def rule_windows(history: History | None) -> tuple[Window, Window]:
    """The windows a rule may read (it sizes its own within them), sent with its request: the newest
    complete steps before the evaluated one, and the run's first ones."""
    recent = tuple(history(MAX_HISTORY_STEPS, 0)) if history else ()
    first = tuple(history(0, MAX_HISTORY_STEPS)) if history else ()
    return recent, first


def history_from_windows(recent: Window, first: Window) -> History:
    """The evaluator's ``history(depth, lead)`` over the windows it sent (newest first, then first)."""

    def history(depth: int, lead: int) -> list[tuple[int, tuple[str, ...]]]:
        near = list(recent[:depth])
        seen = {s for s, _ in near}
        return near + [(s, w) for s, w in first[:lead] if s not in seen]

    return history
