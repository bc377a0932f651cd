"""Running one rule for a person at a terminal: find the trial, show progress, print the verdict.

Shared by ``tornasole invoke`` and ``python -m tornasole.rules.rule_invoker`` so
both wait the same bounded time for a trial, show the same progress line and
print the same ``RESULT`` line (a script parsing one can parse the other).

* :func:`wait_for_trial` polls a path for a trial (a collections file, an index
  file or the end marker) for at most ``timeout`` seconds, saying what it
  waits for; nothing there is a :class:`TrialNotFoundError` naming the path.
* :class:`Progress` draws ``[####......] 3/5 steps, fired 2 times`` on stderr
  (redrawn in place on a terminal, a plain line every few seconds otherwise).
* :func:`result_line` is the ``RESULT ...`` line; ``none`` stands for "no step".
"""

from __future__ import annotations

import difflib
import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from tornasole.exceptions import TornasoleValueError
from tornasole.rules.step_loop import InvokeSummary, invoke_rule

__all__ = [
    "MAX_LISTED",
    "NONE",
    "Progress",
    "StepWaitTimeoutError",
    "TrialNotFoundError",
    "UnknownRuleError",
    "check_builtin_rule",
    "print_verdict",
    "result_line",
    "run_rule",
    "wait_for_trial",
]

NONE = "none"  # the RESULT line's word for "no step" (first_step, fired_steps)
MAX_LISTED = 20  # fired steps listed in the RESULT line, fire details printed


class TrialNotFoundError(FileNotFoundError):
    """No trial appeared at a path within the time given; the message names the path."""


class UnknownRuleError(TornasoleValueError):
    """No built-in rule has that name; the message has the closest name and the known ones."""


def check_builtin_rule(name: str) -> None:
    """Raise :class:`UnknownRuleError` (with a "did you mean") unless ``name`` is a built-in rule or an
    alias of one (``UnchangedWeights``)."""
    from tornasole.rules.registry import alias_names, rule_names

    known = rule_names()
    if name in known or name in alias_names():
        return
    known = sorted(known + alias_names())
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UnknownRuleError(f"unknown built-in rule {name!r}{hint}; known rules: {', '.join(known)}")


def _has_trial(trial: Any) -> bool:
    return bool(trial.collections() or trial.steps(show_incomplete_steps=True) or trial.training_ended())


def wait_for_trial(
    path: str, timeout: float = 10.0, *, poll: float = 0.5, err: TextIO | None = None, **trial_kwargs: Any
) -> Any:
    """The trial at ``path`` once it holds anything, polling at most ``timeout`` seconds.

    Raises
    ------
    TrialNotFoundError
        Nothing a hook writes (collections file, index file, end marker) appeared in time.
    """
    from tornasole.trials import create_trial

    err = sys.stderr if err is None else err
    deadline = time.monotonic() + max(0.0, timeout)
    trial_logger = logging.getLogger("tornasole.trials.trial")
    level = trial_logger.level
    trial_logger.setLevel(logging.ERROR)  # its "no collections file yet" warning is said better below
    try:
        trial = create_trial(path, collections_timeout=0, **trial_kwargs)
    finally:
        trial_logger.setLevel(level)
    said = False
    while not _has_trial(trial):
        if time.monotonic() >= deadline:
            waited = f"waited {timeout:g} s for" if timeout > 0 else "found no"
            raise TrialNotFoundError(
                f"no trial at {path}: {waited} collections file, index file or end marker, which a hook "
                "writes there (is this the hook's out_dir? --timeout waits longer)"
            )
        if not said:
            print(
                f"waiting up to {timeout:g} s for a trial at {path} (collections file, index files) ...",
                file=err,
                flush=True,
            )
            said = True
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
        trial.refresh()
    if said:
        print(f"found a trial at {path}", file=err, flush=True)
    return trial


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


class Progress:
    """``[####......] 3/5 steps, fired 2 times`` on ``stream``; in place on a terminal.

    ``total`` is the number of saved steps in the range when the run started; a
    live trial can go past it (the total then follows the count).
    """

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 30, every: float = 5.0) -> None:
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.every = every
        try:
            self.tty = self.stream.isatty()
        except (AttributeError, ValueError):
            self.tty = False
        self._last = 0.0 if self.tty else time.monotonic()  # a log gets a line every ``every`` s

    def text(self, done: int, fired: int) -> str:
        total = max(self.total, done)
        filled = int(self.width * done / total) if total else self.width
        bar = "#" * filled + "." * (self.width - filled)
        return f"[{bar}] {done}/{total} steps, fired {_times(fired)}"

    def update(self, done: int, fired: int, *, final: bool = False, note: str = "") -> None:
        now = time.monotonic()
        text = self.text(done, fired) + (f"; {note}" if note else "")
        if self.tty:
            if final or now - self._last >= 0.1:
                self.stream.write("\r\033[K" + text + ("\n" if final else ""))
                self.stream.flush()
                self._last = now
        elif final or now - self._last >= self.every:
            self.stream.write(text + "\n")
            self.stream.flush()
            self._last = now


class StepWaitTimeoutError(TimeoutError):
    """A live trial wrote no new step for the idle timeout; the message names the trial and the step."""


def _merge(total: InvokeSummary, part: InvokeSummary) -> None:
    total.fired += part.fired
    total.steps_evaluated += part.steps_evaluated
    total.steps_skipped += part.steps_skipped
    total.next_step = part.next_step


def run_rule(
    rule: Any,
    start_step: int = 0,
    end_step: int | None = None,
    *,
    idle_timeout: float | None = None,
    poll: float = 1.0,
    err: TextIO | None = None,
) -> InvokeSummary:
    """:func:`invoke_rule` over ``[start_step, end_step)`` with a progress line on ``err``.

    A live trial (no end marker) is evaluated as its steps land; with
    ``idle_timeout``, waiting more than that many seconds for a new step raises
    :class:`StepWaitTimeoutError` (a training that died without closing its hook
    never writes the end marker).
    """
    err = sys.stderr if err is None else err
    trial = rule.base_trial

    def in_range(s: int) -> bool:
        return s >= start_step and (end_step is None or s < end_step)

    progress = Progress(len([s for s in trial.steps() if in_range(s)]), err)
    total = InvokeSummary(
        rule_name=getattr(rule, "rule_name", type(rule).__name__),
        start_step=start_step,
        rule_to_invoke=type(rule).__name__,
        parameters=dict(getattr(rule, "params", None) or {}),
    )
    if trial.training_ended():
        part = invoke_rule(
            rule, start_step=start_step, end_step=end_step, on_step=_progress_of(progress, total)
        )
        _merge(total, part)
        progress.update(total.steps_evaluated + total.steps_skipped, len(total.fired), final=True)
        return total
    limit = "" if idle_timeout is None else f", or no new step for {idle_timeout:g} s (--idle-timeout)"
    print(
        f"trial {trial.path} is live (no end marker yet): evaluating its steps as they land until training "
        f"ends{' or step ' + str(end_step) if end_step is not None else ''}{limit}; Ctrl-C stops",
        file=err,
        flush=True,
    )
    step, idle_since = start_step, time.monotonic()
    while end_step is None or step < end_step:
        ended = trial.training_ended()  # before listing: a step written before the marker is not missed
        steps = [s for s in trial.steps() if s >= step and in_range(s)]
        if steps:
            last = steps[-1]
            part = invoke_rule(
                rule, start_step=step, end_step=last + 1, on_step=_progress_of(progress, total)
            )
            _merge(total, part)
            step, idle_since = last + 1, time.monotonic()
            continue
        if ended:
            break
        waited = time.monotonic() - idle_since
        if idle_timeout is not None and waited >= idle_timeout:
            progress.update(total.steps_evaluated + total.steps_skipped, len(total.fired), final=True)
            raise StepWaitTimeoutError(
                f"trial {trial.path}: no new step after step {step - 1} for {idle_timeout:g} s and no end "
                "marker (did the training stop without closing its hook? --idle-timeout waits longer)"
            )
        note = f"waiting for new steps ({waited:.0f} s)"
        progress.update(total.steps_evaluated + total.steps_skipped, len(total.fired), note=note)
        time.sleep(poll)
        trial.refresh()
    total.next_step = step
    progress.update(total.steps_evaluated + total.steps_skipped, len(total.fired), final=True)
    return total


def _progress_of(progress: Progress, total: InvokeSummary) -> Callable[[InvokeSummary], None]:
    def on_step(part: InvokeSummary) -> None:
        done = total.steps_evaluated + total.steps_skipped + part.steps_evaluated + part.steps_skipped
        progress.update(done, len(total.fired) + len(part.fired))

    return on_step


def result_line(summary: InvokeSummary) -> str:
    """``RESULT rule=.. status=.. first_step=.. fired_steps=.. steps_evaluated=.. steps_skipped=..``."""
    first = NONE if summary.first_step is None else str(summary.first_step)
    fired = ",".join(str(s) for s in summary.fired_steps[:MAX_LISTED]) or NONE
    return (
        f"RESULT rule={summary.rule_name} status={summary.status} first_step={first} fired_steps={fired} "
        f"steps_evaluated={summary.steps_evaluated} steps_skipped={summary.steps_skipped}"
    )


def print_verdict(summary: InvokeSummary, out: TextIO | None = None) -> int:
    """Print each fire's details (at most :data:`MAX_LISTED`), or what a rule that evaluated nothing
    needed, and the RESULT line; returns 1 if fired (``NothingEvaluated`` is not an issue: 0)."""
    from tornasole.rules.verdict import NOTHING_EVALUATED

    out = sys.stdout if out is None else out
    for outcome in summary.fired[:MAX_LISTED]:
        print(outcome.details, file=out)
    if len(summary.fired) > MAX_LISTED:
        print(f"... fired at {len(summary.fired) - MAX_LISTED} more steps", file=out)
    if summary.status == NOTHING_EVALUATED:
        print(summary.nothing_evaluated_reason(), file=out)
    print(result_line(summary), file=out)
    return 1 if summary.fired else 0
