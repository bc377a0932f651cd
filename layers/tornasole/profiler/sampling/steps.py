"""Framework metrics on the training thread: each step's span and the phases inside it, as trace events.

A hook tells the timer when a step begins (:meth:`StepTimer.begin`) and, where its framework allows, when
a phase ran (:meth:`StepTimer.phase`: data loading, forward, backward, optimizer). A step's event spans
from its beginning to the end of the last phase seen in it, or to the next step's beginning when none
was; it is recorded when the step ends (the next ``begin``, a mode switch, or the hook closing), with
``args.step_num`` the step's number in its mode, as smdebug's hooks write it.

The training thread pays for a clock read and one tuple handed to ``sink`` per event: a
:data:`RawEvent`, which the profiler's thread encodes straight into its file
(:class:`~tornasole.profiler.format.trace_events.TraceFileEncoder`); building a frozen
:class:`TraceEvent` and its ``args`` would cost more than everything else here together
(:func:`to_trace_event` does it for readers and tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tornasole.profiler.format import trace_events
from tornasole.profiler.format.trace_events import TraceEvent

__all__ = ["StepTimer", "RawEvent", "now_us", "to_trace_event"]

#: ``(phase, name, start us, duration us, step number or None, tid)``
RawEvent = tuple[str, str, int, int, "int | None", int]


def now_us() -> int:
    """Wall-clock epoch microseconds: the trace files' time base."""
    return time.time_ns() // 1000


def to_trace_event(raw: RawEvent) -> TraceEvent:
    """The :class:`TraceEvent` of a :data:`RawEvent`."""
    phase, name, start, duration, step_num, tid = raw
    args = {"step_num": str(step_num)} if step_num is not None else {}
    return TraceEvent(phase=phase, name=name, start_us=start, duration_us=duration, tid=tid, args=args)


class StepTimer:
    """Turns step boundaries and phases into :data:`RawEvent` tuples handed to ``sink``."""

    __slots__ = ("_sink", "_phase", "_step_num", "_start_us", "_last_end_us", "_tid")

    def __init__(self, sink: Callable[[RawEvent], None], *, tid: int = 0) -> None:
        self._sink = sink
        self._phase: str | None = None
        self._step_num = 0
        self._start_us = 0
        self._last_end_us = 0
        self._tid = tid

    @property
    def in_step(self) -> bool:
        return self._phase is not None

    def begin(self, mode_name: str, step_num: int, at_us: int | None = None) -> None:
        """A step of ``mode_name`` (``TRAIN``...) numbered ``step_num`` begins; the open one ends here."""
        at = now_us() if at_us is None else at_us
        if self._phase is not None:
            self.end(at)
        self._phase = trace_events.STEP_PREFIX + mode_name
        self._step_num = step_num
        self._start_us = at
        self._last_end_us = 0

    def end(self, at_us: int | None = None) -> None:
        """End the open step (if any): at its last phase's end, else at ``at_us`` (default: now)."""
        phase = self._phase
        if phase is None:
            return
        self._phase = None
        end = self._last_end_us or (now_us() if at_us is None else at_us)
        start = self._start_us
        self._sink((phase, phase, start, end - start if end > start else 0, self._step_num, self._tid))

    def phase(self, phase: str, name: str, start_us: int, end_us: int, *, in_step: bool = True) -> None:
        """Record one phase of the open step; ``in_step=False`` for work between steps (loading the next
        batch), which neither carries a step number nor stretches the open step."""
        in_step = in_step and self._phase is not None
        duration = end_us - start_us if end_us > start_us else 0
        self._sink((phase, name, start_us, duration, self._step_num if in_step else None, self._tid))
        if in_step and start_us >= self._start_us and end_us > self._last_end_us:
            self._last_end_us = end_us
