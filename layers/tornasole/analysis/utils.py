"""``no_refresh`` / ``refresh``: switch a trial's automatic refreshing off or on for a block.

Rules turn refreshing off while they read tensors already fetched (each
refresh is a listing); ``wait_for_steps`` turns it on. Unlike smdebug, the
previous setting of each trial is restored on exit (also on error), so the
context managers nest.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["no_refresh", "refresh"]


def _as_list(trials: Any) -> list[Any]:
    return list(trials) if isinstance(trials, (list, tuple, set)) else [trials]


@contextmanager
def _dynamic_refresh(trials: Any, on: bool) -> Iterator[Any]:
    items = _as_list(trials)
    previous = [t.dynamic_refresh for t in items]
    for t in items:
        t.dynamic_refresh = on
    try:
        yield trials
    finally:
        for t, p in zip(items, previous):
            t.dynamic_refresh = p


def no_refresh(trials: Any):
    """Within the block, the trial(s) do not look for new steps.

    Parameters
    ----------
    trials : Trial or list of Trial

    Examples
    --------
    >>> from tornasole.analysis.utils import no_refresh
    >>> with no_refresh(trial):  # doctest: +SKIP
    ...     trial.steps()
    """
    return _dynamic_refresh(trials, False)


def refresh(trials: Any):
    """Within the block, the trial(s) look for new steps on every query.

    Examples
    --------
    >>> from tornasole.analysis.utils import refresh
    >>> with refresh([trial_a, trial_b]):  # doctest: +SKIP
    ...     trial_a.steps()
    """
    return _dynamic_refresh(trials, True)
