"""A process forked before the first invocation, which forks one child per request.

Why: a child forked from the handler's own process is a copy of everything that process ever held,
and a warm sandbox has held earlier invocations, which may be other jobs' (their events, their
temporary credentials, in live objects or in freed memory a rule could scan). The zygote is forked at
cold start, before any event exists, and never reads a request: the handler passes it two pipe ends
(``socket.send_fds``), the zygote forks, and the child reads its request from the pipe itself. So a
rule's process holds its own request and nothing of any other.

The zygote also holds what a rule could use against the next job (``confine``): it is not dumpable,
its environment holds no role keys and no runtime API address, it is a subreaper that kills every
process left once a child is gone (a ``setsid`` grandchild included), and it wipes the tmp root after
each run; each child is confined (rlimits, seccomp) and gets a ``TMPDIR`` of its own before the rule.

Protocol on the zygote's socket: the handler sends the run's timeout (8 bytes, seconds) with the
request pipe's read end and the reply pipe's write end; the zygote answers the child's pid (4 bytes),
then, once the child and every process it left are gone, its wait status (4 bytes). Replies are read
and judged as for a directly forked child (``forked``).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from tornasole.evaluator.sandbox import confine
from tornasole.evaluator.sandbox.forked import collect_reply, kill_group, verdict

__all__ = ["Zygote"]

log = logging.getLogger(__name__)
_INT = struct.Struct("!i")
_TIMEOUT = struct.Struct("!d")


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _confine_child(limits: confine.Limits | None, tmp_root: str | None, timeout_s: float) -> None:
    """A ``TMPDIR`` of the run's own, then the limits and the seccomp filter; what could not be
    applied is logged (the rule still runs: the zygote's and the handler's hardening stands)."""
    if tmp_root is not None:
        confine.private_tmp(tmp_root)
    if limits is not None:
        for why in confine.confine(limits, cpu_seconds=timeout_s).missing:
            log.warning("rule sandbox: %s", why)


def _child(
    target: Callable[[bytes], dict[str, Any]],
    request_fd: int,
    reply_fd: int,
    limits: confine.Limits | None,
    tmp_root: str | None,
    timeout_s: float,
) -> None:
    try:
        os.setpgid(0, 0)
        try:
            if limits is not None:
                confine.close_inherited_fds((request_fd, reply_fd))
            _confine_child(limits, tmp_root, timeout_s)
            reply = target(_read_all(request_fd))
        except BaseException as exc:  # noqa: BLE001 - the child's failure becomes the reply
            why = f"the rule sandbox's child raised {type(exc).__name__}: {exc}"
            reply = {"kind": "error", "reason": why}
        _write_all(reply_fd, json.dumps(reply).encode())
    finally:
        os._exit(0)


def _harden_zygote(confined: bool) -> None:
    """What the zygote does once, before serving: no role keys or runtime API in its environment,
    not dumpable, the subreaper of every process its children start."""
    if not confined:
        return
    confine.scrub_environment()
    try:
        confine.set_dumpable(False)
        confine.make_subreaper()
    except OSError as exc:
        log.warning("rule sandbox: the zygote could not be hardened: %s", exc)


def _serve(
    sock: socket.socket,
    target: Callable[[bytes], dict[str, Any]],
    limits: confine.Limits | None = None,
    tmp_root: str | None = None,
) -> None:
    """The zygote's loop: one child per message, until the handler's end of the socket closes."""
    _harden_zygote(limits is not None)
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, _TIMEOUT.size, 2)
        except OSError:
            return
        if len(msg) != _TIMEOUT.size or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            return
        (timeout_s,) = _TIMEOUT.unpack(msg)
        request_fd, reply_fd = fds
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child leaves through os._exit
            sock.close()
            _child(target, request_fd, reply_fd, limits, tmp_root, timeout_s)
        os.close(request_fd)
        os.close(reply_fd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        sock.sendall(_INT.pack(pid))
        _, status = os.waitpid(pid, 0)
        if limits is not None:  # what the child left: all of it in this subreaper's subtree
            confine.kill_children()
        if tmp_root is not None:
            confine.wipe_tmp(tmp_root)
        sock.sendall(_INT.pack(status))


class Zygote:
    """Forks ``target``'s processes from a clean copy of this process taken at ``start()``.

    ``limits``: confine the zygote and its children (``confine``: scrubbed environment, not dumpable,
    subreaper, rlimits and seccomp); None leaves them as forked (tests of the protocol alone).
    ``tmp_root``: each child's ``TMPDIR`` is a new directory under it, and all of it is wiped after
    each run (``/tmp`` in Lambda). ``reap_orphans``: this process is a subreaper too (the caller made
    it one), and when the zygote stops it kills every child it has but those it had at the first
    ``start()``: a rule that killed its zygote left its processes to it. Only where this process's
    children are all the sandbox's (the Lambda runtime's process, not a test runner's).
    """

    def __init__(
        self,
        target: Callable[[bytes], dict[str, Any]],
        limits: confine.Limits | None = None,
        tmp_root: str | None = None,
        reap_orphans: bool = False,
    ) -> None:
        self.target = target
        self.limits = limits
        self.tmp_root = tmp_root
        self.reap_orphans = reap_orphans
        self.pid: int | None = None
        self._sock: socket.socket | None = None
        self._spared: frozenset[int] | None = None

    def start(self) -> Zygote:
        if self.reap_orphans and self._spared is None:  # this process's children before the zygote's
            self._spared = frozenset(confine.children_of(os.getpid(), scan=True))
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the zygote leaves through os._exit
            here.close()
            try:
                _serve(there, self.target, self.limits, self.tmp_root)
            finally:
                os._exit(0)
        there.close()
        self._sock, self.pid = here, pid
        return self

    def stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = None
            if self.reap_orphans:
                confine.kill_children(keep=self._spared or ())
            if self.tmp_root is not None:
                confine.wipe_tmp(self.tmp_root)

    def _alive(self) -> bool:
        if self.pid is None or self._sock is None:
            return False
        try:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return done == 0

    def _recv_int(self, timeout_s: float) -> int:
        assert self._sock is not None
        self._sock.settimeout(max(0.1, timeout_s))
        data = b""
        while len(data) < _INT.size:
            chunk = self._sock.recv(_INT.size - len(data))
            if not chunk:
                raise ConnectionError("the sandbox's zygote closed its socket")
            data += chunk
        return _INT.unpack(data)[0]

    def run(self, request: bytes, timeout_s: float, max_bytes: int) -> dict[str, Any]:
        """``target(request)`` in a fresh child of the zygote, within ``timeout_s``; its reply or an error."""
        if not self._alive():
            self.stop()
            self.start()
        assert self._sock is not None
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        start = time.monotonic()
        try:
            socket.send_fds(self._sock, [_TIMEOUT.pack(timeout_s)], [request_r, reply_w])
        finally:
            os.close(request_r)
            os.close(reply_w)
        pid = None
        try:
            pid = self._recv_int(timeout_s)
            _write_all(request_w, request)
            os.close(request_w)
            request_w = -1
            left = timeout_s - (time.monotonic() - start)
            data, size, timed_out = collect_reply(reply_r, left, max_bytes, abort_fd=self._sock.fileno())
        except (OSError, ConnectionError) as exc:
            self.stop()
            return {"kind": "error", "reason": f"the rule sandbox could not start the rule's process: {exc}"}
        finally:
            if request_w >= 0:
                os.close(request_w)
            os.close(reply_r)
            if pid is not None:
                kill_group(pid)
        try:
            status = self._recv_int(10.0)
        except (OSError, ConnectionError):
            self.stop()  # and, with reap_orphans, what the child left behind
            return {"kind": "error", "reason": "the rule's process ended its sandbox's zygote"}
        return verdict(data, size, timed_out, status, timeout_s, max_bytes)
