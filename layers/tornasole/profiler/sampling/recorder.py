"""The profiler a hook runs: one daemon thread that samples the machine and writes every profiler file.

The training thread's only work is :meth:`Profiler.record` (append a tuple to a bounded deque) through
:class:`~tornasole.profiler.sampling.steps.StepTimer`; reading ``/proc`` and NVML, encoding, rotating and
putting files all happen on the profiler's thread, once per interval. So a slow disk or S3 delays the
profiler's files, never a training step.

Fail-open: any error on the profiler's thread (a parser meeting an odd kernel, a write failing
``FileOpenFailThreshold`` times) is logged once with its traceback and turns the profiler off; training
goes on and :meth:`record` becomes a no-op. Memory is bounded: at most ``max_pending_events`` events
wait between two writes (more are dropped and counted), one open file per stream is held until it closes
at ``RotateMaxFileSizeInBytes``, and at most one failed file waits for a retry.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import threading
import time
from typing import Any

from tornasole.profiler.format import paths
from tornasole.profiler.sampling.config import ProfilerConfig
from tornasole.profiler.sampling.files import SystemMetricsFile, TraceEventsFile
from tornasole.profiler.sampling.gpu import open_nvml
from tornasole.profiler.sampling.proc import ProcSampler
from tornasole.profiler.sampling.steps import RawEvent, now_us

__all__ = ["Profiler"]

logger = logging.getLogger(__name__)


class Profiler:
    """Samples system metrics and writes them and the recorded trace events under ``root``.

    ``system_node`` (``algo-<n>``) names this machine's system files, or is None where another process
    of the machine samples it (one sampler per machine, not per rank); ``framework_node`` names this
    process's trace files. ``storage`` is the :class:`~tornasole.storage.Storage` for ``root``;
    ``samplers`` replaces the ``/proc`` and NVML samplers (tests); ``proc`` is where ``/proc`` is.
    """

    def __init__(
        self,
        config: ProfilerConfig,
        root: str,
        storage: Any,
        *,
        system_node: str | None,
        framework_node: str,
        samplers: list[Any] | None = None,
        proc: str = "/proc",
    ) -> None:
        self.config = config
        self.root = root.rstrip("/")
        self.system_node = system_node
        self.framework_node = framework_node
        options = {
            "max_bytes": config.rotate_max_file_size_bytes,
            "close_interval_s": config.rotate_file_close_interval_s,
            "fail_threshold": config.file_open_fail_threshold,
        }
        self._system = (
            SystemMetricsFile(storage, self.root, system_node, **options)
            if system_node and config.system_metrics
            else None
        )
        self.origin_us = now_us()  # no event this process records starts earlier
        self._trace = (
            TraceEventsFile(storage, self.root, framework_node, origin_us=self.origin_us, **options)
            if config.framework_metrics
            else None
        )
        self._samplers = samplers
        self._proc = proc
        self._events: collections.deque[RawEvent] = collections.deque()
        self._max_events = config.max_pending_events
        self.events_dropped = 0
        self.active = True
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # the thread's loop against close()

    # -- the training thread's side -----------------------------------------------------------
    def record(self, event: RawEvent) -> None:
        """Queue one trace event, a :data:`~tornasole.profiler.sampling.steps.RawEvent` tuple (dropped,
        and counted, while ``max_pending_events`` wait already)."""
        if not self.active or self._trace is None:
            return
        events = self._events
        if len(events) >= self._max_events:
            self.events_dropped += 1
            return
        events.append(event)

    def start(self) -> None:
        """Start the sampling thread (a daemon: it never keeps a finished script alive)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="tornasole-profiler", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 30.0) -> None:
        """Take a last sample, write the queued events and put every open file; idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.active:
            with self._lock:
                self._guarded(self._final_flush)
        self.active = False
        for sampler in self._samplers or ():
            closer = getattr(sampler, "close", None)
            if closer is not None:
                try:
                    closer()
                except Exception:  # noqa: BLE001 - releasing NVML is best effort
                    logger.debug("Tornasole profiler: closing a sampler failed", exc_info=True)
        if self.events_dropped:
            logger.warning(
                "Tornasole profiler: %d trace events were dropped (more than %d waited to be written)",
                self.events_dropped,
                self._max_events,
            )

    @property
    def files_written(self) -> list[str]:
        return [
            *(self._system.files_written if self._system else ()),
            *(self._trace.files_written if self._trace else ()),
        ]

    # -- the profiler thread ------------------------------------------------------------------
    def _run(self) -> None:
        interval = self.config.interval_s
        with self._lock:
            if not self._guarded(self._open_samplers):
                return
        next_at = time.monotonic()
        while not self._stop.is_set():
            with self._lock:
                if not self.active or not self._guarded(self._tick):
                    return
            next_at += interval
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind (a slow write): skip the missed samples rather than burst
                next_at = time.monotonic()
                delay = 0.0
            self._stop.wait(delay)

    def _guarded(self, work: Any) -> bool:
        try:
            work()
        except Exception as error:  # noqa: BLE001 - fail-open: the profiler stops, training never does
            self.active = False
            self.error = error
            self._events.clear()
            logger.warning("Tornasole profiler: turned off after an error; training continues", exc_info=True)
            return False
        return True

    def _open_samplers(self) -> None:
        if self._samplers is not None or self._system is None:
            self._samplers = self._samplers or []
            return
        samplers: list[Any] = []
        if os.path.isfile(f"{self._proc}/stat"):
            samplers.append(ProcSampler(self.system_node, proc=self._proc))
        else:  # not Linux: the host metrics are skipped, the GPU's and the steps' still recorded
            logger.info("Tornasole profiler: no host metrics (%s/stat is not readable here)", self._proc)
        if self.config.gpu:
            nvml = open_nvml(self.system_node)
            if nvml is not None:
                samplers.append(nvml)
        self._samplers = samplers

    def _tick(self) -> None:
        now = time.time()
        if self._system is not None:
            records = []
            for sampler in self._samplers or ():
                records.extend(sampler.sample(now))
            self._system.add(records, now)
        if self._trace is not None:
            self._trace.add(self._drain(), now)

    def _drain(self) -> list[RawEvent]:
        events = self._events
        popleft = events.popleft
        return [popleft() for _ in range(len(events))]

    def _final_flush(self) -> None:
        if self._samplers is None:
            self._open_samplers()
        self._tick()
        if self._system is not None:
            self._system.close()
        if self._trace is not None:
            self._trace.close()


def system_node_name(rank: int, env: Any) -> str | None:
    """``algo-<n>`` for the process that samples this machine, None for the others (one sampler a host).

    SageMaker names hosts ``algo-1``...; launchers say which host (``GROUP_RANK``/``NODE_RANK``) and which
    process on it (``LOCAL_RANK``). Without a local rank every process is its own machine's only one, and
    its node is ``algo-<rank + 1>``.
    """
    local = (env.get("LOCAL_RANK") or "").strip()
    if local and local != "0":
        return None
    for var in ("GROUP_RANK", "NODE_RANK"):
        value = (env.get(var) or "").strip()
        if value.isdigit():
            return f"algo-{int(value) + 1}"
    if local == "0":
        host = (env.get("SM_CURRENT_HOST") or "").strip()
        if host.startswith("algo-") and host[5:].isdigit():
            return host
        return "algo-1"
    return f"algo-{rank + 1}"


def framework_node_name(rank: int) -> str:
    """This process's node id in trace-file names: ``<rank>-<host>`` (one per rank, as smdebug's)."""
    return paths.framework_node_id(rank, socket.gethostname())
