"""Typed values the evaluator passes around: statuses, rule configs, jobs, outcomes.

Why typed: the same facts travel through DynamoDB items, EventBridge details,
the job-configuration file and the SageMaker-shaped API. Keeping one model with
explicit ``to_item`` / ``from_item`` conversions means each of those shapes is
produced in exactly one place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tornasole.format import paths
from tornasole.rules.actions import Action

__all__ = [
    "debug_rule_configuration",
    "JobStatus",
    "RuleStatus",
    "SECONDARY_STATUS",
    "EVALUATING",
    "TERMINAL_JOB",
    "RuleConfig",
    "JobSpec",
    "RuleState",
    "JobState",
    "StepOutcome",
    "ObjectKind",
    "ObjectAction",
    "ObjectResult",
    "job_arn",
    "rule_job_arn",
    "rule_source_problem",
]


class JobStatus(StrEnum):
    """SageMaker's TrainingJobStatus values (the subset Tornasole reaches)."""

    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPING = "Stopping"
    STOPPED = "Stopped"


class RuleStatus(StrEnum):
    """SageMaker's six RuleEvaluationStatus values."""

    IN_PROGRESS = "InProgress"
    NO_ISSUES_FOUND = "NoIssuesFound"
    ISSUES_FOUND = "IssuesFound"
    ERROR = "Error"
    STOPPING = "Stopping"
    STOPPED = "Stopped"


# SecondaryStatus SageMaker shows next to each TrainingJobStatus.
SECONDARY_STATUS = {
    JobStatus.IN_PROGRESS: "Training",
    JobStatus.COMPLETED: "Completed",
    JobStatus.FAILED: "Failed",
    JobStatus.STOPPING: "Stopping",
    JobStatus.STOPPED: "Stopped",
}
# Rules in these statuses are still evaluated at new steps (IssuesFound is sticky, evaluation goes on).
EVALUATING = frozenset({RuleStatus.IN_PROGRESS, RuleStatus.ISSUES_FOUND})
TERMINAL_JOB = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.STOPPED})


def job_arn(
    name: str, region: str = "us-east-1", account: str = "000000000000", partition: str = "aws"
) -> str:
    """``arn:<partition>:tornasole:<region>:<account>:training-job/<name>`` (EVENTS.md)."""
    return f"arn:{partition}:tornasole:{region}:{account}:training-job/{name}"


def rule_job_arn(job_arn_: str, rule_name: str) -> str:
    """The RuleEvaluationJobArn of one rule of a job (a sub-resource of the job's ARN)."""
    return f"{job_arn_}/rule/{rule_name}"


def debug_rule_configuration(
    name: str,
    image: str,
    parameters: dict[str, str],
    instance_type: str | None = None,
    volume_size_in_gb: int | None = None,
) -> dict[str, Any]:
    """One ``DebugRuleConfigurations`` entry as SageMaker's API spells it (resources only when given)."""
    out: dict[str, Any] = {
        "RuleConfigurationName": name,
        "RuleEvaluatorImage": image,
        "RuleParameters": dict(parameters),
    }
    if instance_type is not None:
        out["InstanceType"] = instance_type
    if volume_size_in_gb is not None:
        out["VolumeSizeInGB"] = volume_size_in_gb
    return out


@dataclass(frozen=True)
class RuleConfig:
    """One rule of a job, normalised from either configuration shape.

    ``parameters`` holds only the rule's own constructor parameters (strings);
    the reserved keys of ``RuleParameters`` are parsed into fields.
    ``rule_parameters`` is the SageMaker-shaped map echoed back by ``describe``.
    """

    name: str
    rule_to_invoke: str
    parameters: dict[str, str] = field(default_factory=dict)
    source_s3_uri: str | None = None
    other_trials: tuple[str, ...] = ()
    start_step: int | None = None
    end_step: int | None = None
    actions: tuple[Action, ...] = ()
    logging_level: str | None = None
    evaluator_image: str = "tornasole"
    rule_parameters: dict[str, str] = field(default_factory=dict)
    instance_type: str | None = None  # kept for describe (SageMaker's per-rule resources)
    volume_size_in_gb: int | None = None
    #: A profiler rule (``ProfilerRuleConfigurations``): evaluated per profiler file, not per step.
    profiler: bool = False

    def active_at(self, step: int) -> bool:
        """Whether ``step`` lies in ``[start_step, end_step)`` (smdebug's invoke_rule range)."""
        if self.start_step is not None and step < self.start_step:
            return False
        return not (self.end_step is not None and step >= self.end_step)

    def to_sagemaker(self) -> dict[str, Any]:
        """The ``DebugRuleConfigurations`` entry."""
        return debug_rule_configuration(
            self.name, self.evaluator_image, self.rule_parameters, self.instance_type, self.volume_size_in_gb
        )

    def to_json(self) -> str:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["actions"] = [a.to_dict() for a in self.actions]
        d["other_trials"] = list(self.other_trials)
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RuleConfig:
        d = json.loads(text)
        d["actions"] = tuple(Action(**a) for a in d.get("actions", ()))
        d["other_trials"] = tuple(d.get("other_trials", ()))
        return cls(**d)


def rule_source_problem(rule: RuleConfig, allowed_prefixes: tuple[str, ...] | None) -> str | None:
    """Why a custom rule's source may not be loaded (not s3://, outside the allowed prefixes), or None."""
    uri = rule.source_s3_uri
    if not uri:
        return None
    if not uri.startswith("s3://"):
        return f"{rule.name}: custom rule source {uri!r} is not an s3:// URI"
    if any(not c.isprintable() for c in uri) or "/../" in uri or uri.endswith("/.."):
        return f"{rule.name}: custom rule source {uri!r} has control characters or '..' segments"
    # a prefix is a folder: s3://b/rules allows s3://b/rules/x.py, never s3://b/rules-evil/x.py
    folders = tuple(p if p.endswith("/") else p + "/" for p in allowed_prefixes or ())
    if allowed_prefixes is not None and not uri.startswith(folders):
        return (
            f"{rule.name}: custom rule source {uri} is outside the allowed prefixes {list(allowed_prefixes)}"
        )
    return None


@dataclass(frozen=True)
class JobSpec:
    """What registering a job stores: name, trial location, rules and hook config."""

    name: str
    s3_output_path: str
    rules: tuple[RuleConfig, ...] = ()
    hook_config: dict[str, Any] | None = None
    num_workers: int | None = None
    # request fields kept only to be shown by describe (e.g. ResourceConfig)
    describe_fields: dict[str, Any] | None = None
    # seconds without new data after which the scheduled check ends the job (None: the default,
    # ``evaluator.lifecycle.DEFAULT_IDLE_TIMEOUT_S``)
    idle_timeout_s: float | None = None

    @property
    def trial_path(self) -> str:
        return self.s3_output_path.rstrip("/")


@dataclass(frozen=True)
class RuleState:
    """A rule's current status as stored."""

    config: RuleConfig
    status: RuleStatus
    details: str = ""
    last_modified_ms: int = 0
    issue_step: int | None = None


@dataclass(frozen=True)
class JobState:
    """A consistent read of a job and its rules (one query of the job's meta items)."""

    name: str
    arn: str
    trial_path: str
    status: JobStatus
    seq: int
    rules_rev: int
    rules: tuple[RuleState, ...]
    hook_config: dict[str, Any] | None = None
    num_workers: int | None = None
    creation_ms: int = 0
    start_ms: int = 0
    end_ms: int | None = None
    last_modified_ms: int = 0
    failure_reason: str | None = None
    job_error: str | None = None
    end_marker_seen: bool = False
    expected_steps: int | None = None
    steps_evaluated: int = 0
    last_activity_s: float = 0.0
    describe_fields: dict[str, Any] | None = None
    end_marker_s: float = 0.0
    # the life cycle beyond the end marker (``evaluator.lifecycle``)
    idle_timeout_s: float | None = None
    training_end_status: str | None = None  # SageMaker's terminal TrainingJobStatus, from its event
    training_end_reason: str | None = None  # SageMaker's FailureReason
    rewritten_at_ms: int | None = None  # the trial was written again (after the job ended, or a resume)
    last_rewrite_ms: int | None = None  # the latest such write seen
    rewrite_key: str | None = None
    rewrites: int = 0
    report_location: str | None = None  # the job's HTML report, written when it ended (``completion``)

    def rule(self, name: str) -> RuleState | None:
        return next((r for r in self.rules if r.config.name == name), None)


@dataclass(frozen=True)
class StepOutcome:
    """The verdict of one rule at one step, as recorded in its evaluation record.

    ``error``: the rule itself is broken (cannot be built, raised, ran past its budget): the rule
    goes to ``Error``. ``step_error``: this step could not be evaluated (corrupt or unreadable file,
    incomplete step, too many attempts): recorded against the step, the rule goes on with later
    steps. ``skipped``: the rule found none of its tensors at this step.
    """

    rule_name: str
    step: int
    fired: bool = False
    mode: str | None = None
    mode_step: int | None = None
    details: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    latency_ms: float = 0.0
    step_error: str | None = None
    skipped: bool = False
    #: S3's write time (ms) of the rewritten index file this outcome judged; None: the step's first write
    rewrite: int | None = None

    @property
    def evaluated(self) -> bool:
        """The rule really looked at this step's tensors (no error, not skipped)."""
        return not (self.error or self.step_error or self.skipped)

    @property
    def verdict(self) -> str:
        if self.error:
            return "Error"
        if self.step_error:
            return "StepError"
        return "fired" if self.fired else "skipped" if self.skipped else "ok"


class ObjectKind(StrEnum):
    """What an S3 object is to the evaluator."""

    INDEX = "index"
    COLLECTIONS = "collections"
    END_MARKER = "end_marker"
    JOB_CONFIG = "job_config"
    STOP_SIGNAL = "stop_signal"
    PROFILER = "profiler"  # a system-metrics or framework-events file under <trial>/profiler-output/
    IGNORED = "ignored"


class ObjectAction(StrEnum):
    """What handling an object did."""

    EVALUATED = "evaluated"  # the step's rules ran
    INCOMPLETE = "incomplete"  # not every worker's index file is there yet
    DUPLICATE = "duplicate"  # the step was already evaluated
    WAITING = "waiting"  # no collections file yet (num_workers unknown)
    ORPHAN = "orphan"  # no job registered for the trial yet: kept
    ADOPTED = "adopted"  # the job registered meanwhile: the orphan was adopted at once
    GAVE_UP = "gave_up"  # too many failed attempts: recorded as an error for the step
    INVALID = "invalid"  # unusable (non-canonical key, unreadable file)
    IGNORED = "ignored"
    NUM_WORKERS = "num_workers"
    END_SEEN = "end_seen"
    COMPLETED = "completed"
    REGISTERED = "registered"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class ObjectResult:
    """What handling one S3 object did (the handler returns these, metrics count them)."""

    key: str
    kind: ObjectKind
    action: ObjectAction
    job: str | None = None
    step: int | None = None
    reason: str = ""
    outcomes: tuple[StepOutcome, ...] = ()

    @property
    def issues_found(self) -> int:
        return sum(1 for o in self.outcomes if o.fired)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": str(self.kind),
            "action": str(self.action),
            "job": self.job,
            "step": self.step,
            "reason": self.reason,
            "rules": {o.rule_name: o.verdict for o in self.outcomes},
        }


# Earlier saved steps a step's trial holds at most: Overtraining's defaults need 22, and with the index
# cache a warm evaluator reads about one new earlier index file per step whatever the window.
MAX_HISTORY_STEPS = 64

# ``(depth, lead) -> [(step, workers)]``: up to ``depth`` complete steps before the evaluated one (newest
# first), plus up to ``lead`` of the run's first complete steps before it (rules comparing with the start).
History = Callable[[int, int], Sequence[tuple[int, tuple[str, ...]]]]


@dataclass(frozen=True)
class StepFiles:
    """The index files the step's trial is built from: the step's own and earlier steps'."""

    step: int
    workers: tuple[str, ...]
    history: tuple[tuple[int, tuple[str, ...]], ...] = ()

    def index_keys(self) -> list[str]:
        keys = [paths.index_file_name(self.step, w) for w in self.workers]
        for step, workers in self.history:
            keys.extend(paths.index_file_name(step, w) for w in workers)
        return keys

    def history_keys(self) -> list[str]:
        return self.index_keys()[len(self.workers) :]
