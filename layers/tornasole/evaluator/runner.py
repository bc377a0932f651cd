"""Run a job's rules at one step, on a trial built from exactly the index files needed.

Why not ``create_trial(path)``: a listing trial reads every index file of the
run, so the cost of a step would grow with the run's length. Here the trial is
built with ``listing=False`` and given the step's index files (one per worker)
plus those of a bounded window of earlier steps (``history``), found with one
bounded DynamoDB query, so rules that compare with earlier steps can read them.

All rules of the step share that one trial: its values are prefetched in one
concurrent batch of ranged reads, and every rule reads from the shared cache.
A rule that cannot be built or raises gives an ``error`` outcome for that rule
only; the others are unaffected.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tornasole.evaluator.models import RuleConfig, StepOutcome
from tornasole.format import paths

__all__ = [
    "PREFETCH_LIMIT",
    "RuleFactory",
    "StepFiles",
    "StepRunner",
    "default_rule_factory",
    "reads_earlier_steps",
]

log = logging.getLogger(__name__)

# Prefetch every tensor of the step when there are at most this many; beyond, rules read lazily.
PREFETCH_LIMIT = 2000

RuleFactory = Callable[[RuleConfig, Any, int], Any]


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


def _other_trials(config: RuleConfig, step: int) -> list[Any] | None:
    """Other trials hold only the same step's index files (found by a one-step prefix listing)."""
    if not config.other_trials:
        return None
    from tornasole.storage import get_storage, join
    from tornasole.trials import create_trial

    trials = []
    for i, path in enumerate(config.other_trials):
        trial = create_trial(path, name=f"other_trial_{i}", listing=False)
        prefix = join(path, paths.index_prefix_for_step(step) + paths.step_str(step) + "_")
        keys = [k for k in get_storage(path).list(prefix) if paths.parse_index_file_name(k)]
        trial.load_index_files(keys)
        trials.append(trial)
    return trials


def default_rule_factory(config: RuleConfig, trial: Any, step: int = 0) -> Any:
    """Build the rule object: a built-in by name, or a custom rule loaded from ``source_s3_uri``."""
    others = _other_trials(config, step)
    if config.source_s3_uri:
        from tornasole.rules.loader import create_custom_rule

        return create_custom_rule(
            config.source_s3_uri, config.rule_to_invoke, trial, others, **config.parameters
        )
    from tornasole.rules import create_rule

    return create_rule(config.rule_to_invoke, trial, other_trials=others, **config.parameters)


# Built-in rules that read only the evaluated step (RULES.md): no earlier index files are loaded for them.
# A rule class can say so itself with ``READS_EARLIER_STEPS = False``; custom rules get the history.
STEP_LOCAL_RULES = frozenset(
    {
        "VanishingGradient",
        "ExplodingTensor",
        "DeadRelu",
        "SaturatedActivation",
        "TensorVariance",
        "AllZero",
        "SimilarAcrossRuns",
        "NLPSequenceRatio",
        "FeatureImportanceOverweight",
        "TreeDepth",
    }
)


def reads_earlier_steps(config: RuleConfig) -> bool:
    """Whether the rule may look at steps before the evaluated one (then the history window is loaded)."""
    if config.source_s3_uri:
        return True
    try:
        from tornasole.rules.registry import get_rule

        declared = getattr(get_rule(config.rule_to_invoke), "READS_EARLIER_STEPS", None)
    except (ValueError, ImportError, AttributeError):
        declared = None
    if declared is not None:
        return bool(declared)
    return config.rule_to_invoke not in STEP_LOCAL_RULES


class StepRunner:
    """Evaluates rules at one step; knows nothing about DynamoDB or events."""

    def __init__(self, rule_factory: RuleFactory | None = None, history_steps: int = 10) -> None:
        self.rule_factory = rule_factory or default_rule_factory
        self.history_steps = history_steps

    def build_trial(self, job_name: str, trial_path: str, files: StepFiles) -> Any:
        from tornasole.trials import create_trial

        trial = create_trial(trial_path, name=job_name, listing=False)
        trial.load_index_files(files.index_keys())
        return trial

    def run(
        self, job_name: str, trial_path: str, files: StepFiles, rules: Sequence[RuleConfig]
    ) -> list[StepOutcome]:
        """One outcome per rule (fired / not / error) at ``files.step``."""
        step = files.step
        try:
            trial = self.build_trial(job_name, trial_path, files)
            bad = {k: v for k, v in trial.bad_steps.items() if k[0] == step}
            if bad:
                (s, worker), exc = next(iter(bad.items()))
                raise RuntimeError(f"step {s} of worker {worker} is unreadable: {exc}")
            self._prefetch(trial, step)
        except Exception as exc:  # a corrupt or missing step file: every rule of the step records why
            reason = f"cannot read step {step} of {trial_path}: {exc}"
            log.warning(reason, extra={"job": job_name, "step": step})
            return [StepOutcome(r.name, step, error=reason[:1024]) for r in rules]
        return [self._run_rule(job_name, trial, r, step) for r in rules]

    @staticmethod
    def _prefetch(trial: Any, step: int) -> None:
        names = trial.tensor_names(step=step)
        if 0 < len(names) <= PREFETCH_LIMIT:
            trial.prefetch(names, [step])

    def _run_rule(self, job_name: str, trial: Any, config: RuleConfig, step: int) -> StepOutcome:
        rule_log = logging.getLogger(f"tornasole.rules.{config.rule_to_invoke}")
        # the rule's logging-level (2019 RuntimeConfigurations); unset: inherit (warm Lambdas reuse loggers)
        rule_log.setLevel(config.logging_level.upper() if config.logging_level else logging.NOTSET)
        keys = {"job": job_name, "rule": config.name, "step": step}
        start = time.perf_counter()
        try:
            rule = self.rule_factory(config, trial, step)
            outcome = rule.evaluate(step)
        except Exception as exc:
            ms = (time.perf_counter() - start) * 1000
            reason = f"{config.name}: {type(exc).__name__}: {exc}"
            rule_log.warning("rule raised at step %d: %s", step, reason, extra=keys)
            return StepOutcome(config.name, step, error=reason[:1024], latency_ms=ms)
        ms = (time.perf_counter() - start) * 1000
        skipped = getattr(outcome, "skipped", False)
        rule_log.info(
            "evaluated: %s",
            "fired" if outcome.fired else "skipped" if skipped else "no issue",
            extra={**keys, "latency_ms": round(ms, 2)},
        )
        return StepOutcome(
            rule_name=config.name,
            step=step,
            fired=bool(outcome.fired),
            mode=outcome.mode,
            mode_step=outcome.mode_step,
            details=outcome.details
            or (f"{config.name}: condition met at step {step}" if outcome.fired else ""),
            values={**dict(outcome.values or {}), **({"skipped": True} if skipped else {})},
            latency_ms=ms,
        )
