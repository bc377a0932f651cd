"""How many workers write a job's steps: read once from its first collections file.

A step is evaluated once every worker's index file is in, so ``num_workers`` gates every step.
A collections file that cannot be used (bad bytes, 100k-deep JSON, ``num_workers`` 0, -3, 1e9 or
"two", an unsafe ``include_regex``) would otherwise raise on every later index notification and
every scheduled check, the job InProgress forever: it settles the job instead
(``settle_unusable_collections``) and raises ``UnusableCollections``, which the callers turn into
settled steps. A transient read error still raises ``TransientError``.
"""

from __future__ import annotations

from collections.abc import Callable

from tornasole.evaluator.failures import UnusableCollections, raise_if_transient
from tornasole.evaluator.models import JobState
from tornasole.evaluator.objects import read_capped
from tornasole.evaluator.store.step_store import StepStore
from tornasole.evaluator.store.transitions import Transitions, to_error
from tornasole.format import paths

__all__ = ["discover_num_workers", "settle_unusable_collections"]

Clock = Callable[[], float]


def discover_num_workers(
    steps: StepStore, transitions: Transitions, clock: Clock, state: JobState
) -> int | None:
    """``num_workers`` of the first collections file (a listing bounded by the workers), recorded on
    the job; None while there is none."""
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
            reason = settle_unusable_collections(steps, transitions, clock, state, exc)
            raise UnusableCollections(reason) from exc
        steps.set_num_workers(state.name, int(n))
        return int(n)
    return None


def settle_unusable_collections(
    steps: StepStore, transitions: Transitions, clock: Clock, state: JobState, exc: BaseException
) -> str:
    """The job's error and every still-running rule's ``Error`` name the file and why; the reason."""
    text = str(exc)
    reason = text if "collections" in text else f"unreadable collections file: {text}"
    reason = f"unusable collections file: {reason}"[:1024]
    steps.set_job_error(state.name, reason)
    for rule in state.rules:
        transitions.apply(
            state.name, lambda s, n=rule.config.name: to_error(s, n, reason), int(clock() * 1000)
        )
    return reason
