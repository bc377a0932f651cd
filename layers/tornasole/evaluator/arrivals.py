"""What the evaluator does when a job file, an index file or a collections file arrives.

Split from ``service`` (which dispatches on the key) so each module stays one concern: here a job
file registers its job and replays the index files that came before it (orphans), an index file is
a (step, worker) arrival handed to ``step_evaluation``, and a collections file gives ``num_workers``
and re-drives the steps that were waiting for it. Functions take the ``Evaluator`` and call back
through its methods, so what a test or a subclass overrides there still applies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from tornasole.evaluator.failures import UnusableCollections, raise_if_transient
from tornasole.evaluator.models import JobState, ObjectAction, ObjectKind, ObjectResult
from tornasole.evaluator.objects import read_capped
from tornasole.format import paths
from tornasole.stack_spec import END_MARKER_FILE, JOB_CONFIG_FILE

if TYPE_CHECKING:
    from tornasole.evaluator.service import Evaluator

__all__ = [
    "adopt_orphans",
    "discover_num_workers",
    "handle_collections",
    "handle_index",
    "register_from_file",
]

log = logging.getLogger(__name__)

Remaining = Callable[[], float] | None


def register_from_file(ev: Evaluator, trial_path: str, key: str) -> ObjectResult:
    from tornasole.evaluator.registration.job_limits import MAX_JOB_FILE_BYTES
    from tornasole.evaluator.registration.job_registry import JobRegistry
    from tornasole.storage import get_storage

    path = f"{trial_path}/{JOB_CONFIG_FILE}"
    registry = JobRegistry(
        ev.table,
        allowed_rule_prefixes=ev.allowed_rule_prefixes,
        clock=ev.clock,
        check_buckets=False,
    )
    try:  # read at most one byte past the limit: the registry refuses what is larger
        data = get_storage(path).read(path, 0, MAX_JOB_FILE_BYTES + 1)
    except (FileNotFoundError, PermissionError) as exc:
        outcome, job, reason = "invalid", None, f"{path}: cannot register the job: {exc}"
    else:
        outcome, job, reason = registry.register_file(trial_path, key, data)
    if outcome == "invalid" or job is None:
        log.warning(reason, extra={"key": key})
        ev.steps.set_trial_error(trial_path, key, reason, ev.now_ms())
        return ObjectResult(key, ObjectKind.JOB_CONFIG, ObjectAction.INVALID, job=job, reason=reason)
    replayed = ev.adopt_orphans(job, trial_path, evaluate=True)
    if get_storage(trial_path).exists(
        f"{trial_path}/{END_MARKER_FILE}"
    ):  # training ended before registration
        ev.handle_end_marker(trial_path, key)
    return ObjectResult(
        key,
        ObjectKind.JOB_CONFIG,
        ObjectAction(outcome),
        job=job,
        reason=f"{replayed} earlier index files replayed",
    )


def adopt_orphans(
    ev: Evaluator, job: str, trial_path: str, evaluate: bool, remaining_s: Remaining = None
) -> int:
    """Index files that arrived before the job was registered become the job's steps (each on its own:
    one that fails stays pending for the scheduled check, the others are still adopted)."""
    orphans = ev.steps.take_orphans(trial_path)
    for step, worker in orphans:
        if evaluate:
            try:
                ev.process_step(job, step, worker, remaining_s=remaining_s)
            except Exception:  # noqa: BLE001 - recorded pending; the schedule retries it
                log.exception("adopted step failed; left pending", extra={"job": job, "step": step})
                ev.steps.record_worker(job, step, worker, ev.clock())
                ev.steps.mark_pending(job, step, ev.now_ms())
        else:
            ev.steps.record_worker(job, step, worker, ev.clock())
            ev.steps.mark_pending(job, step, ev.now_ms())
    return len(orphans)


def handle_index(
    ev: Evaluator,
    trial_path: str,
    step: int,
    worker: str,
    key: str,
    remaining_s: Remaining = None,
    written_s: float | None = None,
) -> ObjectResult:
    job = ev.job_for_trial(trial_path)
    if job is None:
        ev.steps.record_orphan(trial_path, step, worker, ev.clock())
        # Registration claims the trial, then takes the orphans; we wrote the orphan, now re-read the
        # claim (both consistent): whichever of the two ran second sees the other, so none is left behind.
        job = ev.table.job_for_trial(trial_path)
        if job is None:
            log.warning(
                "index file for a trial no job is registered for; kept until one is",
                extra={"key": key, "trial": trial_path, "step": step},
            )
            return ObjectResult(
                key,
                ObjectKind.INDEX,
                ObjectAction.ORPHAN,
                step=step,
                reason=f"no job registered for {trial_path}",
            )
        ev.adopt_orphans(job, trial_path, evaluate=True, remaining_s=remaining_s)
        return ObjectResult(
            key, ObjectKind.INDEX, ObjectAction.ADOPTED, job=job, step=step, reason="registered meanwhile"
        )
    result = ev.process_step(job, step, worker, key, remaining_s=remaining_s)
    if result.action == ObjectAction.IGNORED and result.reason.startswith("job is "):
        note_rewrite(ev, job, key, step, written_s)
    return result


def note_rewrite(ev: Evaluator, job: str, key: str, step: int | None, written_s: float | None) -> None:
    """An index file for an ended job, written after it ended: its trial is written again
    (``lifecycle.note_rewrite``); a re-delivered notification of an earlier write is not."""
    from tornasole.evaluator.lifecycle import note_rewrite as record
    from tornasole.evaluator.lifecycle import written_after_end

    state = ev.table.load_job(job)
    if state is not None and written_after_end(state, written_s):
        record(ev.table, state, key, step, ev.now_ms())


def discover_num_workers(ev: Evaluator, state: JobState) -> int | None:
    """Read ``num_workers`` from the first collections file (a listing bounded by the workers).

    A collections file that cannot be used (bad bytes, 100k-deep JSON, ``num_workers`` 0, -3,
    1e9 or "two", an unsafe ``include_regex``) would otherwise raise on every later index
    notification and every scheduled check, the job InProgress forever: it settles the job
    instead (``settle_unusable_collections``) and raises ``UnusableCollections``, which the
    callers turn into settled steps. A transient read error still raises ``TransientError``.
    """
    from tornasole.format.collections import decode_collections
    from tornasole.storage import get_storage, join

    prefix = join(state.trial_path, paths.COLLECTIONS_DIR) + "/"
    storage = get_storage(state.trial_path)
    for path in storage.list(prefix):
        if paths.parse_collections_file_name(path) is None:
            continue
        try:
            _, n = decode_collections(read_capped(path), path)
        except (ValueError, OSError) as exc:
            raise_if_transient(exc)
            raise UnusableCollections(settle_unusable_collections(ev, state, exc)) from exc
        ev.steps.set_num_workers(state.name, int(n))
        return int(n)
    return None


def settle_unusable_collections(ev: Evaluator, state: JobState, exc: BaseException) -> str:
    """The job's error and every still-running rule's ``Error`` name the file and why; the reason."""
    from tornasole.evaluator.store.transitions import to_error

    text = str(exc)
    reason = text if "collections" in text else f"unreadable collections file: {text}"
    reason = f"unusable collections file: {reason}"[:1024]
    ev.steps.set_job_error(state.name, reason)
    for rule in state.rules:
        ev.transitions.apply(state.name, lambda s, n=rule.config.name: to_error(s, n, reason), ev.now_ms())
    return reason


def handle_collections(ev: Evaluator, trial_path: str, key: str) -> ObjectResult:
    job = ev.job_for_trial(trial_path)
    state = ev.table.load_job(job) if job else None
    if state is None:
        return ObjectResult(
            key,
            ObjectKind.COLLECTIONS,
            ObjectAction.IGNORED,
            reason=f"no job registered for {trial_path}",
        )
    try:
        n = state.num_workers or ev.discover_num_workers(state)
    except (ValueError, OSError) as exc:
        raise_if_transient(exc)
        reason = (
            str(exc) if isinstance(exc, UnusableCollections) else f"{key}: unreadable collections file: {exc}"
        )
        if not isinstance(exc, UnusableCollections):
            ev.steps.set_job_error(state.name, reason)
        for _, step, _ in ev.steps.pending(state.name):  # waiting for this file: settled, never stuck
            ev.record_step_error(ev.table.load_job(state.name) or state, step, f"step {step}: {reason}")
        return ObjectResult(key, ObjectKind.COLLECTIONS, ObjectAction.INVALID, job=job, reason=reason)
    done = []
    for _, step, _ in ev.steps.pending(state.name):
        try:  # each pending step on its own: one failing step must not keep the others waiting
            done.append(ev.process_step(state.name, step).action)
        except Exception as exc:  # noqa: BLE001 - it stays pending (attempt counted) for the schedule
            log.warning("pending step %d failed: %s", step, exc, extra={"job": state.name})
            done.append("failed")
    return ObjectResult(
        key,
        ObjectKind.COLLECTIONS,
        ObjectAction.NUM_WORKERS,
        job=job,
        reason=f"num_workers={n}; re-drove {done}",
    )
