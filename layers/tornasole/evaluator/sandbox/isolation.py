"""Run one rule so that nothing it does can take the step (or the process) down with it.

Why: rules are code, custom rules are users' code, and one evaluator process
serves every rule of every job. A rule that calls ``sys.exit``, raises
``KeyboardInterrupt``, loops forever or allocates without bound must cost only
its own outcome at that step, never the other rules' results, the step's
records or the warm process.

* ``BaseException`` from the rule (``SystemExit``, ``KeyboardInterrupt``,
  ``GeneratorExit`` ...) is caught and becomes that rule's error.
* A watchdog thread enforces a deadline: when the rule runs past it, the
  watchdog raises ``RuleDeadlineExceeded`` *inside* the rule's thread
  (``PyThreadState_SetAsyncExc``), which works in any thread (Lambda's main
  thread, local mode's dispatcher) and needs no signals. The deadline is the
  smaller of a per-rule limit and the invocation's remaining time less a
  reserve for writing the results.
* The same watchdog samples the process's resident memory; a rule whose run
  grows it past the memory budget gets ``RuleMemoryExceeded`` the same way.
  Sampling cannot stop one single giant allocation (that raises ``MemoryError``
  itself, which is caught too); it stops the allocate-in-a-loop rule long
  before the function's memory is gone.

An asynchronous exception is delivered at the rule's next bytecode boundary, so
a rule blocked inside one long C call is stopped when the call returns.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "Budget",
    "RuleAborted",
    "RuleDeadlineExceeded",
    "RuleMemoryExceeded",
    "RuleExit",
    "guarded",
    "rss_bytes",
]

T = TypeVar("T")

#: Watchdog sampling period (deadline and memory checks).
POLL_S = 0.02


class RuleAborted(Exception):
    """The rule was stopped by the evaluator (deadline, memory budget) or tried to stop the process."""


class RuleDeadlineExceeded(RuleAborted):
    """The rule ran past its deadline."""


class RuleMemoryExceeded(RuleAborted):
    """The rule grew the process's memory past its budget."""


class RuleExit(RuleAborted):
    """The rule raised ``SystemExit`` / ``KeyboardInterrupt`` / another non-``Exception`` error."""


class _StopDeadline(BaseException):
    """Injected into the rule's thread: a ``BaseException`` so ``except Exception`` in a rule misses it."""


class _StopMemory(BaseException):
    """Injected into the rule's thread when the memory budget is exceeded."""


@dataclass(frozen=True)
class Budget:
    """What one rule run may use: seconds of wall time and bytes of resident-memory growth."""

    seconds: float = 60.0
    memory_bytes: int | None = 512 * 1024 * 1024

    def within(self, remaining_s: float | None, reserve_s: float) -> Budget:
        """This budget, its deadline cut to ``remaining_s - reserve_s`` (at least a tenth of a second)."""
        if remaining_s is None:
            return self
        return Budget(max(0.1, min(self.seconds, remaining_s - reserve_s)), self.memory_bytes)


def rss_bytes() -> int | None:
    """The process's resident set size (Linux ``/proc``); None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _raise_in(thread_id: int, exc_type: type[BaseException] | None) -> None:
    """Schedule ``exc_type`` in thread ``thread_id`` (None clears a scheduled one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc_type) if exc_type else None
    )


class _Watchdog:
    """Raises a ``RuleAborted`` in the watched thread once; disarmed under a lock, so never after."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.thread_id = threading.get_ident()
        self.lock = threading.Lock()
        self.armed = True
        self.fired: type[BaseException] | None = None
        self.done = threading.Event()
        self.start_rss = rss_bytes()
        self.deadline = time.monotonic() + budget.seconds

    def run(self) -> None:
        while not self.done.wait(POLL_S):
            why = self.fired
            if why is None and time.monotonic() >= self.deadline:
                why = _StopDeadline
            elif why is None and self.budget.memory_bytes is not None and self.start_rss is not None:
                now = rss_bytes()
                if now is not None and now - self.start_rss > self.budget.memory_bytes:
                    why = _StopMemory
            if why is not None:
                with self.lock:
                    if not self.armed:
                        return
                    self.fired = why
                    # re-sent every period: a rule swallowing it (bare ``except:``) in a loop is stopped again
                    _raise_in(self.thread_id, why)

    def disarm(self) -> None:
        with self.lock:
            self.armed = False
            if self.fired is not None:
                _raise_in(self.thread_id, None)  # not delivered yet: drop it, the caller reports it
        self.done.set()


def _describe(exc: BaseException | type[BaseException], budget: Budget) -> RuleAborted:
    kind = exc if isinstance(exc, type) else type(exc)
    if kind is _StopDeadline:
        return RuleDeadlineExceeded(f"stopped after its deadline of {budget.seconds:.1f}s")
    if kind is _StopMemory:
        mib = (budget.memory_bytes or 0) // (1024 * 1024)
        return RuleMemoryExceeded(f"stopped after growing memory past its budget of {mib} MiB")
    return RuleExit(f"raised {type(exc).__name__}: {exc}")


def guarded(fn: Callable[[], T], budget: Budget) -> T:
    """``fn()`` under ``budget``; anything it raises comes out as an ``Exception``.

    ``Exception``\\ s propagate unchanged (the caller classifies them); ``SystemExit``,
    ``KeyboardInterrupt`` and the like become ``RuleExit``; a deadline or memory stop becomes
    ``RuleDeadlineExceeded`` / ``RuleMemoryExceeded``.
    """
    dog = _Watchdog(budget)
    watcher = threading.Thread(target=dog.run, name="tornasole-rule-watchdog", daemon=True)
    watcher.start()
    try:
        try:
            result = fn()
        finally:
            dog.disarm()
    except Exception:
        if dog.fired is not None:  # the rule turned our stop into an error of its own
            raise _describe(dog.fired, budget) from None
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit/KeyboardInterrupt from a rule must not escape
        raise _describe(dog.fired or exc, budget) from None
    if dog.fired is not None:  # it swallowed the stop, or it fired as the rule returned: over budget
        raise _describe(dog.fired, budget)
    return result
