"""``tornasole jobs status NAME --watch``: follow a job until it ends, saying what it waits for.

A watch never waits in silence or forever: it first checks that the job's
bucket exists (no step can arrive in a bucket that is not there), says what
it waits for, prints the job's rules again whenever something changes, keeps
a "no change for N s" line on stderr, and gives up with exit code 3 after
``timeout`` seconds without any change (no new step evaluated, no status
moved).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tornasole.cli.errors import NotFoundError

__all__ = ["WatchTimeoutError", "check_bucket", "watch_job"]

_LIVE = ("InProgress", "Stopping")


class WatchTimeoutError(NotFoundError):
    """Nothing changed in a watched job for the time given; the message says what was waited for."""


def check_bucket(trial_path: str, job: str) -> None:
    """Raise :class:`NotFoundError` when ``trial_path`` is on S3 and its bucket does not exist."""
    if not trial_path.startswith("s3://"):
        return
    from botocore.exceptions import ClientError

    from tornasole.aws.clients import client

    bucket = trial_path[5:].split("/", 1)[0]
    try:
        client("s3").head_bucket(Bucket=bucket)
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket", "NotFound"):
            raise NotFoundError(
                f"bucket {bucket!r} of job {job!r} does not exist: no step can arrive at {trial_path} "
                "(create the bucket, or register the job with the hook's real output path)"
            ) from exc
        raise


def _signature(state: Any) -> tuple:
    return (
        state.status.value,
        state.steps_evaluated,
        tuple((r.config.name, r.status.value, r.issue_step) for r in state.rules),
    )


def _tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def watch_job(
    jobs: Any,
    name: str,
    *,
    interval: float = 2.0,
    timeout: float = 300.0,
    out: Any = None,
    err: Any = None,
) -> str:
    """Print the job's rules on every change until it is no longer InProgress; returns its status.

    Raises
    ------
    NotFoundError
        The job's bucket does not exist.
    WatchTimeoutError
        Nothing changed for ``timeout`` seconds.
    """
    from tornasole.cli.job_status import print_status

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    state = jobs.table.load_job(name)
    if state is None:
        from tornasole.jobs import JobNotFoundError

        raise JobNotFoundError(f"no training job named {name!r} is registered in table {jobs.table.name}")
    check_bucket(state.trial_path, name)
    print(
        f"watching job {name}: waiting for the steps the hook writes under {state.trial_path} to be "
        f"evaluated; refreshing every {interval:g} s, giving up after {timeout:g} s without a change "
        "(--timeout); Ctrl-C stops",
        file=err,
        flush=True,
    )
    tty = _tty(err)
    last_sig: tuple | None = None
    changed_at = time.monotonic()
    said_at = changed_at
    while True:
        sig = _signature(state)
        now = time.monotonic()
        if sig != last_sig:
            if tty and last_sig is not None:
                err.write("\r\033[K")
            status = print_status(jobs, name)
            out.flush()
            last_sig, changed_at, said_at = sig, now, now
            if status not in _LIVE:
                return status
        elif now - changed_at >= timeout:
            if tty:
                err.write("\n")
            raise WatchTimeoutError(
                f"job {name}: nothing changed for {timeout:g} s ({state.steps_evaluated} steps evaluated, "
                f"still {state.status.value}); is the training writing to {state.trial_path}? "
                "(--timeout waits longer)"
            )
        elif tty or now - said_at >= 30:
            line = (
                f"{state.status.value}: {state.steps_evaluated} steps evaluated, "
                f"no change for {now - changed_at:.0f} s (waiting for new steps under {state.trial_path})"
            )
            err.write(("\r\033[K" + line) if tty else line + "\n")
            err.flush()
            said_at = now
        time.sleep(max(0.0, min(interval, timeout - (time.monotonic() - changed_at))))
        state = jobs.table.load_job(name) or state
