"""Run a function in a forked child process and get back its JSON-able result: nothing it does stays.

Why: Lambda reuses a warm execution environment for later invocations, which in the rule sandbox
are other jobs' rules. Code a rule leaves behind in the process (a patched module, a thread, a
hook on boto3) would see the next job's credentials. Forked, the rule runs in a copy of the
process that exits when the verdict is sent: the handler's own process never runs rule code.
The child gets its own process group, which is killed afterwards, so processes the rule started
are stopped too. One that calls ``setsid`` itself leaves the group: in Lambda the rule runs in a child
of the zygote instead, a subreaper that kills those too (``zygote``, ``docs/SECURITY.md``).

The child writes its result as JSON to a pipe and leaves with ``os._exit`` (no atexit handlers,
no buffers of the parent flushed twice). The parent reads at most ``max_bytes`` + 1 bytes until
``timeout_s`` and reports what went wrong (timed out, killed by a signal, no result) as an
``error`` reply, never by raising.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

__all__ = ["collect_reply", "kill_group", "run_forked", "verdict"]


def _child(fn: Callable[[], dict[str, Any]], out: int, limits: Any = None, timeout_s: float = 0.0) -> None:
    try:
        os.setpgid(0, 0)
        try:
            if limits is not None:
                from tornasole.evaluator.sandbox import confine

                for why in confine.confine(limits, cpu_seconds=timeout_s).missing:
                    logging.getLogger(__name__).warning("rule process: %s", why)
            reply = fn()
        except BaseException as exc:  # noqa: BLE001 - the child's failure becomes the reply
            reply = {
                "kind": "error",
                "reason": f"the rule sandbox's child raised {type(exc).__name__}: {exc}",
            }
        data = json.dumps(reply).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(out, view) :]
    finally:
        os._exit(0)


def collect_reply(
    read_fd: int, timeout_s: float, max_bytes: int, abort_fd: int | None = None
) -> tuple[bytes, int, bool]:
    """Read a child's reply until EOF, ``max_bytes`` + 1 bytes, or ``timeout_s``: (data, size, timed out).

    ``abort_fd``: stop early (not timed out) once it is readable and the reply is not (the zygote's
    socket: it speaks only after the child is gone, or closes when the zygote died)."""
    chunks: list[bytes] = []
    size, timed_out = 0, False
    deadline = time.monotonic() + max(0.1, timeout_s)
    # poll, not select: select refuses a descriptor numbered 1024 or more, which a long-lived process
    # (a warm handler, a test session) reaches; the reply was then lost to "filedescriptor out of range"
    poller = select.poll()
    for fd in [read_fd] if abort_fd is None else [read_fd, abort_fd]:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while size <= max_bytes:
        left = deadline - time.monotonic()
        ready = {fd for fd, _ in poller.poll(max(1, int(left * 1000)))} if left > 0 else set()
        if not ready:
            timed_out = True
            break
        if read_fd not in ready:
            break
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), size, timed_out


def kill_group(pid: int) -> None:
    """SIGKILL the child's process group (the child and whatever it started), else the child."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass  # already gone


def verdict(
    data: bytes, size: int, timed_out: bool, status: int, timeout_s: float, max_bytes: int
) -> dict[str, Any]:
    """The reply a child's output and wait status amount to: its JSON object, or an error reply."""
    if timed_out:
        return {"kind": "error", "reason": f"the rule was stopped after {timeout_s:.1f}s in the sandbox"}
    if size > max_bytes:
        return {"kind": "error", "reason": f"the rule's reply was larger than {max_bytes} bytes"}
    if not data:
        why = (
            f"signal {os.WTERMSIG(status)}"
            if os.WIFSIGNALED(status)
            else f"status {os.waitstatus_to_exitcode(status)}"
        )
        return {"kind": "error", "reason": f"the rule's process ended without a verdict ({why})"}
    try:
        reply = json.loads(data)
    except ValueError:
        return {"kind": "error", "reason": "the rule's process sent a reply that is not JSON"}
    return (
        reply if isinstance(reply, dict) else {"kind": "error", "reason": "the rule's reply is not an object"}
    )


def run_forked(
    fn: Callable[[], dict[str, Any]], timeout_s: float, max_bytes: int, limits: Any = None
) -> dict[str, Any]:
    """``fn()`` run in a forked child, within ``timeout_s`` seconds; its reply, or an error reply.

    ``limits`` (a ``confine.Limits``): the child's rlimits and seccomp filter, set before ``fn`` runs."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, which leaves through os._exit
        os.close(read_end)
        _child(fn, write_end, limits, timeout_s)
    os.close(write_end)
    try:  # also here: the child may not have made its group yet when the parent kills it
        os.setpgid(pid, pid)
    except OSError:
        pass
    try:
        data, size, timed_out = collect_reply(read_end, timeout_s, max_bytes)
    finally:
        os.close(read_end)
        kill_group(pid)
        _, status = os.waitpid(pid, 0)
    return verdict(data, size, timed_out, status, timeout_s, max_bytes)
