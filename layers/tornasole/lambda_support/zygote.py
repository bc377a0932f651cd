"""A process forked before the first invocation, which forks one child per request.

Why: a child forked from the handler's own process is a copy of everything that process ever held,
and a warm sandbox has held earlier invocations, which may be other jobs' (their events, their
temporary credentials, in live objects or in freed memory a rule could scan). The zygote is forked at
cold start, before any event exists, and never reads a request: the handler passes it two pipe ends
(``socket.send_fds``), the zygote forks, and the child reads its request from the pipe itself. So a
rule's process holds its own request and nothing of any other.

Protocol on the zygote's socket: the handler sends one byte with the request pipe's read end and the
reply pipe's write end; the zygote answers the child's pid (4 bytes), then, once the child is gone,
its wait status (4 bytes). Replies are read and judged as for a directly forked child (``forked``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from tornasole.lambda_support.forked import collect_reply, kill_group, verdict

__all__ = ["Zygote"]

_INT = struct.Struct("!i")


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _child(target: Callable[[bytes], dict[str, Any]], request_fd: int, reply_fd: int) -> None:
    try:
        os.setpgid(0, 0)
        try:
            reply = target(_read_all(request_fd))
        except BaseException as exc:  # noqa: BLE001 - the child's failure becomes the reply
            why = f"the rule sandbox's child raised {type(exc).__name__}: {exc}"
            reply = {"kind": "error", "reason": why}
        _write_all(reply_fd, json.dumps(reply).encode())
    finally:
        os._exit(0)


def _serve(sock: socket.socket, target: Callable[[bytes], dict[str, Any]]) -> None:
    """The zygote's loop: one child per message, until the handler's end of the socket closes."""
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1, 2)
        except OSError:
            return
        if not msg or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            return
        request_fd, reply_fd = fds
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child leaves through os._exit
            sock.close()
            _child(target, request_fd, reply_fd)
        os.close(request_fd)
        os.close(reply_fd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        sock.sendall(_INT.pack(pid))
        _, status = os.waitpid(pid, 0)
        sock.sendall(_INT.pack(status))


class Zygote:
    """Forks ``target``'s processes from a clean copy of this process taken at ``start()``."""

    def __init__(self, target: Callable[[bytes], dict[str, Any]]) -> None:
        self.target = target
        self.pid: int | None = None
        self._sock: socket.socket | None = None

    def start(self) -> Zygote:
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the zygote leaves through os._exit
            here.close()
            try:
                _serve(there, self.target)
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
            socket.send_fds(self._sock, [b"r"], [request_r, reply_w])
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
            data, size, timed_out = collect_reply(reply_r, left, max_bytes)
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
            self.stop()
            status = 0
        return verdict(data, size, timed_out, status, timeout_s, max_bytes)
