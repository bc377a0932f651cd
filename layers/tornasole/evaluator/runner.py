"""Run a job's rules at one step, on a trial built from exactly the index files needed.

Why not ``create_trial(path)``: a listing trial reads every index file of the
run, so the cost of a step would grow with the run's length. Here the trial is
built with ``listing=False`` and given the step's index files (one per worker)
plus those of a bounded window of earlier steps, found with one bounded
DynamoDB query, so rules that compare with earlier steps can read them.

The window is sized from the rule instances (``history_steps()``: how many
saved steps before the evaluated one a rule reads; 0 for step-local rules,
None for rules accumulating over the whole run), the largest over the step's
rules, and never more than ``MAX_HISTORY_STEPS`` saved steps, so the cost of a
step stays bounded: a rule asking for more (or for everything) sees only the
last ``MAX_HISTORY_STEPS``. A custom rule that does not say gets
``DEFAULT_HISTORY_STEPS``. Earlier index files a warm process already read are
served from its ``IndexFileCache`` (index files never change once written), and
values decoded at earlier steps from its value cache (``EARLIER_VALUES_BYTES``;
event files never change once written either): a rule reading back over its
window (DeadRelu pools one-sample ReLU outputs over up to 32 steps) costs the
requests of the steps the process has not seen, not one per earlier step at
every step. A step a resumed run saved again into the same keys is the
exception: ``forget`` drops what the process kept of its files before the step
is evaluated again (docs/EVENTS.md, "Steps written again while the job runs").

All rules of the step share that one trial and its value cache. Nothing is
prefetched for the step as a whole: each rule prefetches what it declares
(``req_tensors``) and reads the rest lazily, so a 200 MB tensor no rule asks
for is never read. Index files are read with a size cap (``MAX_INDEX_BYTES``).

Every rule is built and run under ``isolation.guarded`` (its ``BaseException``
caught, a deadline from the invocation's remaining time, a memory budget), and
what went wrong is classified by ``failures``: a transient AWS error propagates
(``TransientError``: the step stays pending and is retried), a corrupt or
unreadable file is a ``step_error`` for that step only, anything else the rule
did is its ``error`` (the rule goes to ``Error``). One rule's outcome never
costs another rule theirs.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tornasole.evaluator.failures import TransientError, is_data_error, is_transient
from tornasole.evaluator.models import MAX_HISTORY_STEPS, History, RuleConfig, StepFiles, StepOutcome
from tornasole.evaluator.rule_factory import (
    DEFAULT_HISTORY_STEPS,
    default_rule_factory,
    history_window,
    leading_window,
)
from tornasole.evaluator.sandbox.isolation import Budget, RuleAborted, guarded
from tornasole.evaluator.store.index_cache import CachingStorage, IndexFileCache
from tornasole.rules.verdict import TensorTouches  # shared with the offline invoke_rule
from tornasole.trials.caches import ENTRY_OVERHEAD, ValueCache
from tornasole.trials.step_index import LOC_INDEX

if TYPE_CHECKING:
    from tornasole.evaluator.sandbox.rule_runners import CustomRuleRunner

__all__ = [
    "DEFAULT_HISTORY_STEPS",
    "MAX_HISTORY_STEPS",
    "RESULTS_RESERVE_S",
    "History",
    "RuleFactory",
    "StepFiles",
    "StepRunner",
    "default_rule_factory",
    "history_window",
    "CUSTOM_RULE_TRIES",
]

log = logging.getLogger(__name__)

#: Tries of a custom rule that meets a transient error (network, throttling, its sandbox's pipe) before
#: the step is given up for that rule alone: one rule's transient failure never discards the step's
#: outcomes of the other rules (#34 N5).
CUSTOM_RULE_TRIES = 3
CUSTOM_RULE_BACKOFF_S = 0.2
# Seconds of the invocation kept for writing the step's results after the last rule: a rule's deadline is
# at most the remaining time less this.
RESULTS_RESERVE_S = 15.0
RuleFactory = Callable[[RuleConfig, Any, int], Any]
#: Budget of the values a warm process keeps across steps (``StepRunner.value_cache``). Why 64 MiB: the
#: window of the most demanding built-in history reader, DeadRelu pooling 32 one-sample steps of 25 ReLU
#: outputs of 10k floats, is 32 MiB; the LRU drops the values no rule reads again (the gradients of
#: earlier steps) first. A sixteenth of the evaluator function's 1 GiB, beside each step's own value cache;
#: each entry counts ``ENTRY_OVERHEAD`` bytes more, so a long run of scalars is bounded in memory as well.
EARLIER_VALUES_BYTES = 64 * 1024 * 1024
#: Index files whose S3 write time a warm process remembers (``StepRunner.note_written``): about 150 bytes
#: each, so at most ~8 MiB; more than the index files the index cache can hold (~8,000 of 50 tensors).
KNOWN_WRITES = 50_000


class StepRunner:
    """Evaluates rules at one step; knows nothing about DynamoDB or events.

    ``custom_rules``: where custom rules (``source_s3_uri``) run; None (local mode, tests): here,
    on the step's shared trial with the built-ins; in AWS the rule sandbox
    (``sandbox.rule_runners.LambdaCustomRuleRunner``). ``storage``: what the step's trial reads through
    (default: the process-wide storage of the trial's scheme). ``index_cache`` and ``value_cache`` outlive
    the steps (default: this runner's own): index files and values read at earlier steps.
    """

    def __init__(
        self,
        rule_factory: RuleFactory | None = None,
        max_history_steps: int = MAX_HISTORY_STEPS,
        index_cache: IndexFileCache | None = None,
        budget: Budget | None = None,
        custom_rules: CustomRuleRunner | None = None,
        storage: Any = None,
        value_cache: ValueCache | None = None,
    ) -> None:
        self.rule_factory = rule_factory or default_rule_factory
        self.max_history_steps = max_history_steps
        self.index_cache = index_cache if index_cache is not None else IndexFileCache()
        self.value_cache = (
            value_cache if value_cache is not None else ValueCache(EARLIER_VALUES_BYTES, ENTRY_OVERHEAD)
        )
        self.budget = budget or Budget()
        self.custom_rules = custom_rules
        self.storage = storage
        self._written: OrderedDict[str, int] = OrderedDict()  # index file -> S3 write time (ms) last seen
        self._written_lock = threading.Lock()

    @classmethod
    def on_storage(cls, storage: Any, budget: Budget | None = None) -> StepRunner:
        """A runner whose every read (the step's trial, a rule's other trials) goes through ``storage``,
        with an index cache and a value cache of its own: what a custom rule's process runs, on the storage
        holding the credentials it was handed (nothing read for one job is served to another)."""
        return cls(
            rule_factory=functools.partial(default_rule_factory, storage=storage),
            index_cache=IndexFileCache(),
            value_cache=ValueCache(EARLIER_VALUES_BYTES, ENTRY_OVERHEAD),
            budget=budget,
            storage=storage,
        )

    def forget(self, trial_path: str, step: int, workers: Sequence[str]) -> None:
        """Drop what this runner keeps of ``step``'s files (its index files, the values they point to):
        they were written again (a resumed run re-saving the step), so the next reads are fresh."""
        from tornasole.format import paths
        from tornasole.storage import join

        index_paths = {join(trial_path, paths.index_file_name(step, w)) for w in workers}
        for path in index_paths:
            self.index_cache.discard(path)
        self.value_cache.discard_where(lambda loc: loc[LOC_INDEX] in index_paths)

    def note_written(self, trial_path: str, step: int, written: Mapping[str, int]) -> None:
        """``step``'s index files were written at ``written`` (worker -> S3 write time in ms, as the step
        record holds it): forget what this runner keeps of a file it saw written at another time.

        Why: a resumed run re-saves a step into the same keys, and only the warm process that handles the
        rewrite notification forgets its cached files (``forget``). Another warm process that cached the
        old step learns of the rewrite here, from the step record the history query returns, before a
        later step's rule reads the step again: it then reads the new bytes, not its cached old values.
        """
        from tornasole.format import paths
        from tornasole.storage import join

        stale = []
        with self._written_lock:
            for worker, ms in written.items():
                path = join(trial_path, paths.index_file_name(step, worker))
                known = self._written.pop(path, None)
                if known is not None and known != ms:
                    stale.append(worker)
                self._written[path] = ms
            while len(self._written) > KNOWN_WRITES:
                self._written.popitem(last=False)
        if stale:
            self.forget(trial_path, step, stale)

    def build_trial(self, job_name: str, trial_path: str, files: StepFiles) -> Any:
        """The step's trial holding ``files``' index files (earlier ones from the index cache if seen), its
        values looked up in the values kept from earlier steps too."""
        from tornasole.storage import get_storage
        from tornasole.trials import create_trial

        storage = CachingStorage(self.storage or get_storage(trial_path), self.index_cache)
        trial = create_trial(
            trial_path, name=job_name, listing=False, storage=storage, value_cache=self.value_cache
        )
        trial.load_index_files(files.index_keys())
        return trial

    def run(
        self,
        job_name: str,
        trial_path: str,
        files: StepFiles,
        rules: Sequence[RuleConfig],
        history: History | None = None,
        remaining_s: Callable[[], float] | None = None,
    ) -> list[StepOutcome]:
        """One outcome per rule (fired / not / skipped / error / step error) at ``files.step``.

        The rules are built on the trial of the step's own index files; then ``history(depth)``
        gives the earlier steps the most demanding of them needs, whose index files are added.
        ``remaining_s()`` is the invocation's remaining time (each rule's deadline is cut to it).
        Raises ``TransientError`` when a retryable AWS error got in the way.
        """
        if self.custom_rules is not None and any(r.source_s3_uri for r in rules):
            return self._run_custom_elsewhere(job_name, trial_path, files, rules, history, remaining_s)
        step = files.step

        def budget() -> Budget:
            return self.budget.within(remaining_s() if remaining_s else None, RESULTS_RESERVE_S)

        try:
            trial = self.build_trial(job_name, trial_path, files)
            self._check_step_readable(trial, step)
        except Exception as exc:  # a corrupt or missing step file: recorded against the step, rules go on
            return self._unreadable(job_name, trial_path, step, rules, exc)
        built = [self._build_rule(trial, r, step, budget()) for r in rules]
        rules_built = [b for b, _ in built if b is not None]
        depth = max((history_window(b, self.max_history_steps) for b in rules_built), default=0)
        lead = max((leading_window(b, self.max_history_steps) for b in rules_built), default=0)
        # outside the try: a failed state query is the invocation's failure (retried), not the rules'
        wanted = history and (depth or lead)
        earlier = StepFiles(step, files.workers, tuple(history(depth, lead))) if wanted else None
        if earlier is not None:
            try:
                trial.load_index_files(earlier.history_keys())
            except Exception as exc:  # noqa: BLE001 - earlier steps only widen the window; rules still run
                if is_transient(exc):
                    raise TransientError(f"reading earlier index files of {trial_path}: {exc}") from exc
                log.warning("earlier index files unreadable: %s", exc, extra={"job": job_name, "step": step})
        return [
            self._run_rule(job_name, r, step, rule, ms, budget(), trial)
            for r, (rule, ms) in zip(rules, built, strict=True)
        ]

    def _run_custom_elsewhere(
        self,
        job_name: str,
        trial_path: str,
        files: StepFiles,
        rules: Sequence[RuleConfig],
        history: History | None,
        remaining_s: Callable[[], float] | None,
    ) -> list[StepOutcome]:
        """Built-ins here (one shared trial), each custom rule through ``custom_rules``; rules' order kept."""
        assert self.custom_rules is not None
        if history is not None:  # every sandboxed rule asks for the same windows: query them once
            history = functools.cache(history)
        builtins = [r for r in rules if not r.source_s3_uri]
        here = iter(self.run(job_name, trial_path, files, builtins, history, remaining_s) if builtins else ())
        out = []
        custom = self.custom_rules
        for r in rules:
            if r.source_s3_uri:
                out.append(
                    _custom_outcome(
                        r,
                        files.step,
                        lambda r=r: custom.evaluate(job_name, trial_path, files, r, history, remaining_s),
                    )
                )
            else:
                out.append(next(here))
        return out

    @staticmethod
    def _check_step_readable(trial: Any, step: int) -> None:
        bad = {k: v for k, v in trial.bad_steps.items() if k[0] == step}
        if bad:
            (s, worker), exc = next(iter(bad.items()))
            raise RuntimeError(f"step {s} of worker {worker} is unreadable: {exc}") from exc

    @staticmethod
    def _unreadable(
        job_name: str, trial_path: str, step: int, rules: Sequence[RuleConfig], exc: Exception
    ) -> list[StepOutcome]:
        if is_transient(exc):
            raise TransientError(f"reading step {step} of {trial_path}: {exc}") from exc
        reason = f"cannot read step {step} of {trial_path}: {exc}"
        log.warning(reason, extra={"job": job_name, "step": step})
        return [StepOutcome(r.name, step, step_error=reason[:1024]) for r in rules]

    def _build_rule(
        self, trial: Any, config: RuleConfig, step: int, budget: Budget
    ) -> tuple[Any, float | Exception]:
        """``(rule, build ms)``, or ``(None, the exception)`` when it cannot be built."""
        start = time.perf_counter()
        try:
            rule = guarded(lambda: self.rule_factory(config, trial, step), budget)
        except Exception as exc:
            if is_transient(exc):
                raise TransientError(f"building rule {config.name}: {exc}") from exc
            return None, exc
        return rule, (time.perf_counter() - start) * 1000

    def _run_rule(
        self,
        job_name: str,
        config: RuleConfig,
        step: int,
        rule: Any,
        built: float | Exception,
        budget: Budget,
        trial: Any = None,
    ) -> StepOutcome:
        rule_log = logging.getLogger(f"tornasole.rules.{config.rule_to_invoke}")
        # the rule's logging-level (2019 RuntimeConfigurations); unset: inherit (warm Lambdas reuse loggers)
        rule_log.setLevel(config.logging_level.upper() if config.logging_level else logging.NOTSET)
        keys = {"job": job_name, "rule": config.name, "step": step}
        build_ms = built if isinstance(built, float) else 0.0
        start = time.perf_counter()
        try:
            if isinstance(built, Exception):
                raise built
            with TensorTouches(trial) as touched:
                outcome, details, values = _tried(
                    config, lambda: guarded(lambda: _plain_outcome(rule.evaluate(step)), budget)
                )
        except Exception as exc:
            ms = build_ms + (time.perf_counter() - start) * 1000
            if is_transient(exc) and config.source_s3_uri:
                return _gave_up(config, step, exc, ms)
            if is_transient(exc):
                raise TransientError(f"rule {config.name} at step {step}: {exc}") from exc
            reason = f"{config.name}: {type(exc).__name__}: {exc}"
            if is_data_error(exc) and not isinstance(exc, RuleAborted) and not isinstance(built, Exception):
                rule_log.warning("step %d unreadable for the rule: %s", step, reason, extra=keys)
                return StepOutcome(config.name, step, step_error=reason[:1024], latency_ms=ms)
            rule_log.warning("rule raised at step %d: %s", step, reason, extra=keys)
            return StepOutcome(config.name, step, error=reason[:1024], latency_ms=ms)
        ms = build_ms + (time.perf_counter() - start) * 1000
        skipped = bool(getattr(outcome, "skipped", False))
        if not skipped and not outcome.fired and trial is not None and touched.count == 0:
            skipped = True  # it looked at no tensor: its tensors matched nothing, which is not "no issue"
            values = {**values, "tensors_matched": 0}
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
            details=details or (f"{config.name}: condition met at step {step}" if outcome.fired else ""),
            values={**values, **({"skipped": True} if skipped else {})},
            latency_ms=ms,
            skipped=skipped and not outcome.fired,
        )


def _plain_outcome(outcome: Any) -> tuple[Any, str, dict[str, Any]]:
    """The outcome with its details clipped and values capped, computed under the rule's budget (a rule's
    gigantic or self-referencing report costs its own time, and never reaches the state table as is)."""
    import json

    from tornasole.evaluator.details import clip
    from tornasole.evaluator.store.item_limits import cap_values

    values = json.loads(cap_values(dict(getattr(outcome, "values", None) or {})))
    return outcome, clip(str(getattr(outcome, "details", "") or "")), values


def _tried(config: RuleConfig, attempt: Callable[[], Any]) -> Any:
    """``attempt()``; a custom rule's transient failure is tried again, ``CUSTOM_RULE_TRIES`` in all.

    A built-in rule's transient failure still raises at once: it reads what every rule reads, so
    the whole step is retried (it stays pending), as before.
    """
    tries = CUSTOM_RULE_TRIES if config.source_s3_uri else 1
    for n in range(1, tries + 1):
        try:
            return attempt()
        except Exception as exc:
            if n == tries or not is_transient(exc):
                raise
            log.warning("custom rule %s: transient error (try %d of %d): %s", config.name, n, tries, exc)
            time.sleep(CUSTOM_RULE_BACKOFF_S * n)
    raise AssertionError("unreachable")  # pragma: no cover


def _gave_up(config: RuleConfig, step: int, exc: BaseException, ms: float = 0.0) -> StepOutcome:
    """The step, given up for this custom rule alone after ``CUSTOM_RULE_TRIES`` transient failures."""
    reason = (
        f"{config.name}: step {step} given up after {CUSTOM_RULE_TRIES} tries with a transient error: "
        f"{type(exc).__name__}: {exc}"
    )
    log.warning(reason, extra={"rule": config.name, "step": step})
    return StepOutcome(config.name, step, step_error=reason[:1024], latency_ms=ms)


def _custom_outcome(config: RuleConfig, step: int, evaluate: Callable[[], StepOutcome]) -> StepOutcome:
    """A sandboxed custom rule's outcome: its transient failures tried again, then given up for it alone;
    anything else it raised (a forged or broken reply on its pipe) is its own ``error``."""
    try:
        return _tried(config, evaluate)
    except Exception as exc:  # noqa: BLE001 - the rule's, never the other rules' (#34 N5)
        if is_transient(exc):
            return _gave_up(config, step, exc)
        reason = f"{config.name}: {type(exc).__name__}: {exc}"
        log.warning("custom rule failed at step %d: %s", step, reason, extra={"rule": config.name})
        return StepOutcome(config.name, step, error=reason[:1024])
