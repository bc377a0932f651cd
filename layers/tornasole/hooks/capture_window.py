"""Capture on demand, the hook's side: poll for the evaluator's requests, save full tensors for N steps.

A rule's ``capture`` action makes the evaluator write a request per rule under
``<out_dir>/tornasole_capture/`` (:mod:`tornasole.format.capture_request`).
:class:`CaptureRequestPoller` lists that folder on its own daemon thread every
``interval`` seconds (default :data:`DEFAULT_CAPTURE_CHECK_INTERVAL`, 2 s: one
LIST request on S3, plus one GET per new or changed file), decodes what is new,
and hands validated requests to the training thread through a lock-free list
swap. A request that cannot be used (too large, not JSON, unknown collection,
too many steps) is logged once per file version and dropped: training never
stops for it.

:class:`CaptureWindow` is the training thread's side. At a step boundary the
hook takes the pending requests (one attribute read when there are none) and
the window counts down the next ``steps`` training steps (TRAIN, or GLOBAL when
the script sets no mode; evaluation steps are neither captured nor counted).
At those steps the hook saves, on top of what its save config saves, the full
tensor of every tensor in the requested collections (:meth:`CaptureWindow.plan`
turns a step's write plan into one with ``save_raw``). Idempotent: each
``RequestId`` is served once; a new request while a capture runs extends it to
at most its own ``steps`` ahead (never a sum), and adds its collections.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Any

from tornasole.core.collection import Collection
from tornasole.format.capture_request import (
    CAPTURE_REQUESTS_DIR,
    MAX_REQUEST_BYTES,
    CaptureRequest,
    CaptureRequestError,
)
from tornasole.hooks.save_manager import WritePlan
from tornasole.modes import ModeKeys
from tornasole.storage.base import Storage
from tornasole.storage.paths import join

__all__ = ["CaptureRequestPoller", "CaptureWindow", "DEFAULT_CAPTURE_CHECK_INTERVAL"]

logger = logging.getLogger(__name__)

#: Seconds between two listings of the request folder (a capture can wait a step or two; a LIST costs).
DEFAULT_CAPTURE_CHECK_INTERVAL = 2.0
#: Request files looked at per listing: one per rule of a job, so a job's rule count bounds it.
_MAX_FILES = 64
_CAPTURED_MODES = (ModeKeys.TRAIN, ModeKeys.GLOBAL)
_RAW_ONLY = WritePlan(save_shape=False, reductions=(), save_raw=True)


class CaptureRequestPoller:
    """Background reader of ``<out_dir>/tornasole_capture/`` (see the module docstring).

    Examples
    --------
    >>> import tempfile, os
    >>> from tornasole.storage import get_storage
    >>> from tornasole.format.capture_request import capture_request_file_name
    >>> d = tempfile.mkdtemp()
    >>> p = CaptureRequestPoller(get_storage(d), d, interval=60)
    >>> os.makedirs(os.path.join(d, "tornasole_capture"))
    >>> req = CaptureRequest("job:1:capture/R", 5, ("weights",), rule="R")
    >>> _ = open(os.path.join(d, capture_request_file_name("R")), "wb").write(req.encode())
    >>> p.check_now(); [r.steps for r in p.take()]
    1
    [5]
    """

    def __init__(
        self, storage: Storage, out_dir: str, interval: float = DEFAULT_CAPTURE_CHECK_INTERVAL
    ) -> None:
        if interval <= 0:
            raise ValueError(f"capture request check interval must be > 0 seconds, got {interval}")
        self._storage = storage
        self.folder = join(out_dir, CAPTURE_REQUESTS_DIR)
        self.interval = float(interval)
        self._seen: dict[str, bytes] = {}  # path -> the bytes last read there (a rewrite is read again)
        self._pending: list[CaptureRequest] = []
        self._lock = threading.Lock()  # guards _pending (the poller thread adds, the training thread takes)
        self._checking = threading.Lock()  # one listing at a time (the thread's, or a caller's check_now)
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned: set[str] = set()

    @property
    def has_pending(self) -> bool:
        """Whether requests wait for the training thread (a plain read: cheap at every step)."""
        return bool(self._pending)

    def take(self) -> list[CaptureRequest]:
        """The requests found since the last call (training thread)."""
        if not self._pending:
            return []
        with self._lock:
            taken, self._pending = self._pending, []
        return taken

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tornasole-capture-requests", daemon=True)
            self._thread.start()

    def check_now(self) -> int:
        """One listing on the calling thread; returns how many new valid requests it queued."""
        with self._checking:
            return self._check()

    def _check(self) -> int:
        try:
            paths = [p for p in self._storage.list(self.folder + "/") if p.endswith(".json")][:_MAX_FILES]
        except (OSError, ValueError) as exc:
            self._warn_once(
                self.folder, f"cannot list capture requests in {self.folder}: {exc} (will keep trying)"
            )
            return 0
        found = []
        for path in paths:
            try:
                data = self._storage.read(path, 0, MAX_REQUEST_BYTES + 1)
            except FileNotFoundError:
                continue
            except OSError as exc:
                self._warn_once(path, f"cannot read capture request {path}: {exc} (will keep trying)")
                continue
            if self._seen.get(path) == data:
                continue
            self._seen[path] = data
            try:
                found.append(CaptureRequest.decode(data, path))
            except CaptureRequestError as exc:
                self._warn_once(f"{path}:{hash(data)}", f"ignoring a capture request: {exc}")
        if found:
            with self._lock:
                self._pending.extend(found)
        return len(found)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning("Tornasole: %s", message)

    def _run(self) -> None:
        while not self._closed.is_set():
            self.check_now()
            self._closed.wait(self.interval)

    def close(self) -> None:
        """Stop the thread (it exits within one interval; a slow listing is not waited for)."""
        self._closed.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=1.0)


class CaptureWindow:
    """Which steps capture which collections (training thread only; see the module docstring)."""

    def __init__(self) -> None:
        self.remaining = 0  # training steps still to capture, counting the open one once it is captured
        self.collections: tuple[str, ...] = ()
        self.served: set[str] = set()
        self.captured_steps: list[int] = []  # global steps captured, for the hook's log and tests
        self._colls: tuple[Collection, ...] = ()
        self._member: dict[str, bool] = {}

    @property
    def active(self) -> bool:
        return self.remaining > 0

    def add(self, request: CaptureRequest) -> bool:
        """Take a request; False when its id was served already (the same file read again)."""
        if request.request_id in self.served:
            return False
        self.served.add(request.request_id)
        self.remaining = max(self.remaining, request.steps)
        merged = tuple(sorted(set(self.collections) | set(request.collections)))
        if merged != self.collections:
            self.collections = merged
            self._colls = ()
            self._member.clear()
        logger.warning(
            "Tornasole: %s asked (request %s) for full tensors of %s; saving the next %d training steps",
            request.rule or "a rule",
            request.request_id,
            ", ".join(request.collections),
            self.remaining,
        )
        return True

    def begin_step(self, mode: ModeKeys, step: int, collections: Any) -> bool:
        """Whether the step opening now is captured; counts it down. ``collections``: the hook's manager."""
        if self.remaining <= 0 or mode not in _CAPTURED_MODES:
            return False
        if not self._colls:
            self._colls = tuple(collections.get(name) for name in self.collections)
        self.remaining -= 1
        self.captured_steps.append(step)
        return True

    def retarget(self, capturing: bool, mode: ModeKeys, step: int, collections: Any) -> bool:
        """The open step changed mode (``set_mode`` in a hook whose steps are open at start): whether it is
        captured now. A step counted under a training mode and now of an evaluation mode is given back."""
        if capturing and mode not in _CAPTURED_MODES:
            self.remaining += 1
            self.captured_steps.pop()
            return False
        return capturing or self.begin_step(mode, step, collections)

    def wants(self, name: str) -> bool:
        """Whether tensor ``name`` is in a requested collection (cached per name)."""
        hit = self._member.get(name)
        if hit is None:
            hit = self._member[name] = any(
                name in c.tensor_names or c.matches_regex(name) for c in self._colls
            )
        return hit

    def plan(self, name: str, plan: WritePlan | None) -> WritePlan | None:
        """``plan`` with the full tensor added when ``name`` is captured (None: nothing else to save)."""
        if not self.wants(name):
            return plan
        if plan is None:
            return _RAW_ONLY
        return plan if plan.save_raw else replace(plan, save_raw=True)
