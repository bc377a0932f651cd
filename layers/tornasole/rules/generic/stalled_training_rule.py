"""StalledTrainingRule: no new tensors were written for ``threshold`` seconds.

How the time is measured: the wall time of a step is the ``wall_time`` of its
first tensor record (the moment the hook saved it, read from the event file;
per-step values are memoised). At step s:

* if a later step exists, the gap is (wall time of the next saved step) -
  (wall time of s): a stall that already ended is still reported at the step
  where it began;
* if s is the newest step and the training end marker is there, nothing fires
  (finished training is not stalled);
* otherwise the gap is ``clock() - wall time of s``. ``clock`` defaults to
  ``time.time`` and can be injected (tests, replays).

The rule fires when the gap exceeds ``threshold``. ``invoke_rule`` evaluates
a step once, when it lands, so to watch a live job evaluate the newest step
periodically (``rule.evaluate(trial.steps()[-1])``; the evaluator's scheduled
check does). ``stop_training_on_fire=True`` adds a ``stoptraining`` action
(with ``training_job_name_prefix``) unless ``action_json`` already has one.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

from tornasole.format import paths
from tornasole.format.events import decode_event
from tornasole.format.tfrecord import iter_records
from tornasole.rules.actions import Action
from tornasole.rules.generic.base import BuiltinRule
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

    def invoke_at_step(self, step: int) -> bool:
        t = self.wall_time(step)
        if t is None:
            return False
        steps = self.base_trial.steps()
        later = [s for s in steps if s > step]
        if later:
            nxt = self.wall_time(later[0])
            if nxt is None:
                return False
            gap, what = nxt - t, f"step {later[0]} was written {self.fmt(nxt - t)} s later"
        elif self.base_trial.training_ended():
            return False
        else:
            gap = self.clock() - t
            what = f"no step written for {self.fmt(gap)} s"
        if gap > self.threshold:
            self.report_issue(
                f"{what} (> threshold {self.fmt(self.threshold)} s)",
                value=gap,
                threshold=self.threshold,
                last_write_time=t,
            )
            return True
        return False
