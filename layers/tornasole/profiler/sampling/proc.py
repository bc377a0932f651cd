"""Host metrics from Linux's ``/proc``: CPU per core and in total, I/O wait, memory, disk and network rates.

No psutil (not one of the project's dependencies): the four files are small and their layouts are fixed
by the kernel (``man 5 proc``). Parsers are pure functions of the files' text, so they are tested on this
machine's real files and on fixed text; :class:`ProcSampler` keeps the previous counters and turns two
readings into rates and percentages, as SageMaker's profiler daemon reports them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from tornasole.profiler.format import system_records as sr
from tornasole.profiler.format.system_records import SystemRecord

__all__ = [
    "CpuTimes",
    "parse_stat",
    "parse_meminfo",
    "parse_diskstats",
    "parse_net_dev",
    "whole_disks",
    "ProcSampler",
]

_SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's own sector size
_PARTITION = re.compile(r"^(?:(?:sd|hd|vd|xvd)[a-z]+[0-9]+|(?:nvme[0-9]+n[0-9]+|mmcblk[0-9]+)p[0-9]+)$")
_VIRTUAL = ("loop", "ram", "zram", "fd", "sr")


@dataclass(frozen=True)
class CpuTimes:
    """One ``cpu`` line of ``/proc/stat``: clock ticks spent busy, idle and waiting on I/O, since boot."""

    total: int
    idle: int
    iowait: int


def parse_stat(text: str) -> dict[str, CpuTimes]:
    """``{"cpu": ..., "cpu0": ..., ...}`` from ``/proc/stat``'s text (``cpu`` is the whole machine)."""
    out: dict[str, CpuTimes] = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        parts = line.split()
        ticks = [int(value) for value in parts[1:11]]
        if len(ticks) < 4:
            continue
        ticks += [0] * (8 - len(ticks))
        # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is already in user
        total = sum(ticks[:8])
        out[parts[0]] = CpuTimes(total=total, idle=ticks[3] + ticks[4], iowait=ticks[4])
    return out


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo``'s fields in kB (``MemTotal``, ``MemAvailable``, ...)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            out[name.strip()] = int(fields[0])
    return out


def parse_diskstats(text: str, devices: frozenset[str] | None = None) -> tuple[int, int]:
    """Bytes read and written since boot, summed over ``devices`` (default: every whole, real disk)."""
    read = written = 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 10:
            continue
        name = parts[2]
        if devices is not None:
            if name not in devices:
                continue
        elif name.startswith(_VIRTUAL) or _PARTITION.match(name):
            continue  # a partition's sectors are counted in its disk's line already
        read += int(parts[5]) * _SECTOR_BYTES
        written += int(parts[9]) * _SECTOR_BYTES
    return read, written


def parse_net_dev(text: str) -> tuple[int, int]:
    """Bytes received and sent since boot, summed over every interface but loopback."""
    received = sent = 0
    for line in text.splitlines():
        name, colon, rest = line.partition(":")
        if not colon or name.strip() == "lo":
            continue
        fields = rest.split()
        if len(fields) >= 9 and fields[0].isdigit():
            received += int(fields[0])
            sent += int(fields[8])
    return received, sent


def whole_disks(sys_block: str = "/sys/block") -> frozenset[str] | None:
    """The kernel's whole block devices, real ones only; None where ``/sys/block`` cannot be listed."""
    try:
        names = os.listdir(sys_block)
    except OSError:
        return None
    return frozenset(name for name in names if not name.startswith(_VIRTUAL))


def _read(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as handle:
        return handle.read()


class ProcSampler:
    """Reads ``/proc`` each :meth:`sample` and returns one interval's records (nothing on the first call).

    ``read`` is injectable so tests can feed fixed text; ``proc`` is where the files are.
    """

    def __init__(
        self, node_id: str, *, proc: str = "/proc", read: Callable[[str], str] = _read, disks: object = ...
    ) -> None:
        self.node_id = node_id
        self._proc = proc.rstrip("/")
        self._read = read
        self._disks = whole_disks() if disks is ... else disks
        self._last: tuple[float, dict[str, CpuTimes], tuple[int, int], tuple[int, int]] | None = None

    def sample(self, now: float) -> list[SystemRecord]:
        """The records for the interval since the previous call, stamped ``now`` (epoch seconds)."""
        cpu = parse_stat(self._read(f"{self._proc}/stat"))
        disk = parse_diskstats(self._read(f"{self._proc}/diskstats"), self._disks)
        net = parse_net_dev(self._read(f"{self._proc}/net/dev"))
        memory = parse_meminfo(self._read(f"{self._proc}/meminfo"))
        last, self._last = self._last, (now, cpu, disk, net)
        records: list[SystemRecord] = []
        if memory.get("MemTotal"):
            available = memory.get("MemAvailable", memory.get("MemFree", 0))
            used = 100.0 * (memory["MemTotal"] - available) / memory["MemTotal"]
            records.append(self._record("memory", sr.MEMORY_USED_PERCENT, sr.MEMORY_USED_PERCENT, used, now))
        if last is None:
            return records
        then, last_cpu, last_disk, last_net = last
        for name, times in cpu.items():
            before = last_cpu.get(name)
            if before is None or times.total <= before.total:
                continue
            span = times.total - before.total
            busy = 100.0 * (span - (times.idle - before.idle)) / span
            label = sr.CPU_TOTAL if name == "cpu" else name
            records.append(self._record("cpu", label, sr.CPU_UTILIZATION, _percent(busy), now))
            if name == "cpu":
                wait = 100.0 * (times.iowait - before.iowait) / span
                records.append(self._record("cpu", sr.CPU_TOTAL, sr.IO_WAIT, _percent(wait), now))
        seconds = now - then
        if seconds > 0:
            for kind, name, dimension, new, old in (
                ("io", "disk", sr.DISK_READ_BYTES, disk[0], last_disk[0]),
                ("io", "disk", sr.DISK_WRITE_BYTES, disk[1], last_disk[1]),
                ("network", "network", sr.NETWORK_RECEIVE_BYTES, net[0], last_net[0]),
                ("network", "network", sr.NETWORK_SEND_BYTES, net[1], last_net[1]),
            ):
                records.append(self._record(kind, name, dimension, max(new - old, 0) / seconds, now))
        return records

    def _record(self, kind: str, name: str, dimension: str, value: float, now: float) -> SystemRecord:
        return SystemRecord(kind, name, dimension, round(value, 4), self.node_id, now)


def _percent(value: float) -> float:
    return min(max(value, 0.0), 100.0)
