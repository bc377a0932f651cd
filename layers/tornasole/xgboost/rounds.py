"""The next boosting round a save configuration saves: lets the hook skip the rounds in between.

A round that saves nothing still costs the hook its step bookkeeping (the
save manager asks every save setting whether the round is saved). XGBoost
rounds are short and a save interval of 100 leaves 99 of them idle, so the
hook works out once, after an idle round, the next round anything is saved
and only moves its step counters until then.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["next_saved_step"]


def next_saved_step(settings: Any, step: int) -> float:
    """The first mode step ``>= step`` that ``settings.should_save_step`` accepts (``math.inf``: none).

    ``settings`` is a :class:`tornasole.core.save_config.SaveConfigMode`:
    ``save_steps`` are always saved, then every ``save_interval``-th step of
    ``[start_step, end_step)``, and whatever a merged alternative saves.

    Examples
    --------
    >>> from tornasole.core.save_config import SaveConfigMode
    >>> next_saved_step(SaveConfigMode(save_interval=100, start_step=5), 7)
    100
    >>> next_saved_step(SaveConfigMode(save_interval=10, end_step=30, save_steps=[42]), 31)
    42
    """
    best: float = min((s for s in settings.save_steps if s >= step), default=math.inf)
    for other in getattr(settings, "_alternatives", ()):
        best = min(best, next_saved_step(other, step))
    first = max(step, settings.start_step)
    first += -first % settings.save_interval
    if settings.end_step is None or first < settings.end_step:
        best = min(best, first)
    return best
