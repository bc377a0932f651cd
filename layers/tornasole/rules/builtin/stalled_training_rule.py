"""StalledTrainingRule: no new tensors were written for ``threshold`` seconds.

How the time is measured: the wall time of a step is the ``wall_time`` of its
first tensor record (the moment the hook saved it, read from the event file;
per-step values are memoised). Only the evaluated step and earlier ones are
read (like every rule), so the serverless evaluator, which evaluates a step
when it lands, and ``invoke_rule`` over a finished run agree. At step s:

* the gap since the previous saved step p is ``wall(s) - wall(p)``: a stall
  that has ended is reported at the first step written after it;
* if s is the newest step and training has not ended (no end marker), the
  time since s, ``clock() - wall(s)``, counts too: a stall still going on is
  reported when the newest step is evaluated again later (the evaluator's
  scheduled check does this; ``invoke_rule`` evaluates a step only once, when
  it lands). Finished training is never "stalled". ``clock`` defaults to
  ``time.time`` and can be injected (tests, replays).

The rule fires when a gap exceeds ``threshold``. ``stop_training_on_fire=True``
adds a ``stoptraining`` action (with ``training_job_name_prefix``) unless
``action_json`` already has one.
"""

from __future__ import annotations

import bisect
import struct
import time
from collections.abc import Callable
from typing import Any

from tornasole.format import paths
from tornasole.format.event_records import decode_event
from tornasole.format.tfrecord import iter_records
from tornasole.rules.actions import Action
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.params import Param

__all__ = ["StalledTrainingRule"]

_HEADER = 12  # uint64 length + masked crc of the length
_FOOTER = 4


class StalledTrainingRule(BuiltinRule):
    """Fires when more than ``threshold`` seconds pass without a new step being written.

    Parameters
    ----------
    clock : callable, optional
        Returns "now" in epoch seconds (default ``time.time``).

    Examples
    --------
    >>> # rule = StalledTrainingRule(trial, threshold="1800"); rule.evaluate(trial.steps()[-1]).fired
    """

    LIKELY_CAUSE = "no new step was saved for a long time: the training hung or crashed"
    SUGGESTED_FIX = "check the training job's logs (a data loader deadlock, a dead worker)"

    PARAMETERS = (
        Param("threshold", "float", "1800", "seconds without a new step that fire"),
        Param("stop_training_on_fire", "bool", "False", "add a stoptraining action"),
        Param("training_job_name_prefix", "str", None, "job prefix for the stoptraining action"),
    )

    def __init__(
        self,
        base_trial: Any,
        other_trials: Any = None,
        clock: Callable[[], float] | None = None,
        **params: Any,
    ) -> None:
        super().__init__(base_trial, other_trials=other_trials, **params)
        self.clock = clock or time.time
        self._wall: dict[int, float | None] = {}
        if self.stop_training_on_fire and not any(a.name == "stoptraining" for a in self.actions):
            self.actions = (
                *self.actions,
                Action("stoptraining", training_job_prefix=self.training_job_name_prefix),
            )

    def wall_time(self, step: int) -> float | None:
        """When step ``step`` was saved (first record's wall time), or None if unreadable."""
        if step not in self._wall:
            self._wall[step] = self._read_wall_time(step)
        return self._wall[step]

    def _read_wall_time(self, step: int) -> float | None:
        from tornasole.storage import get_storage, join

        trial = self.base_trial
        storage = get_storage(trial.path)
        for worker in trial.workers():
            path = join(trial.path, paths.event_file_name(step, worker))
            try:
                head = storage.read(path, 0, _HEADER)
                (length,) = struct.unpack("<Q", head[:8])
                buf = storage.read(path, 0, _HEADER + length + _FOOTER)
                for _, payload in iter_records(buf, path):
                    return float(decode_event(payload, path=path).wall_time)
            except FileNotFoundError:
                continue
            except Exception:  # noqa: BLE001 - e.g. a version record first: scan the file
                try:
                    for _, payload in iter_records(storage.read(path), path):
                        try:
                            return float(decode_event(payload, path=path).wall_time)
                        except Exception:  # noqa: BLE001
                            continue
                except (OSError, ValueError):
                    continue
        return None

    def history_steps(self) -> int | None:
        return 1

    def invoke_at_step(self, step: int) -> bool:
        t = self.wall_time(step)
        if t is None:
            return False
        steps = self.base_trial.steps()
        i = bisect.bisect_left(steps, step)
        if i > 0:
            prev = steps[i - 1]
            tp = self.wall_time(prev)
            if tp is not None and t - tp > self.threshold:
                self.report_issue(
                    f"step {step} was written {self.fmt(t - tp)} s after step {prev} "
                    f"(> threshold {self.fmt(self.threshold)} s)",
                    value=t - tp,
                    threshold=self.threshold,
                    previous_step=prev,
                )
                return True
        newest = i + 1 >= len(steps)
        if newest and not self.base_trial.training_ended():
            idle = self.clock() - t
            if idle > self.threshold:
                self.report_issue(
                    f"no step written for {self.fmt(idle)} s (> threshold {self.fmt(self.threshold)} s)",
                    value=idle,
                    threshold=self.threshold,
                    last_write_time=t,
                )
                return True
        return False
