"""System-metric lines: one JSON object per line, one sample of one metric of one device.

The shape SageMaker's profiler daemon writes and smdebug's ``SystemProfilerEventParser`` reads::

    {"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 4.76,
     "NodeId": "algo-1", "Timestamp": 1591160699.4570894}

``Type`` groups a device (``cpu``, ``gpu``, ``memory``, ``io``, ``network``), ``Name`` is the device
(``cpu0``..., ``gpu0``...; :data:`CPU_TOTAL` for the whole machine), ``Dimension`` says what was measured,
``Value`` is a percentage for the utilisations and bytes per second for the I/O rates, ``Timestamp`` is
epoch seconds. A file is appended to while it is open, so its last line may be cut short: decoding drops
an unparsable *last* line, as smdebug does, and names the file and line for any other.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass

from tornasole.exceptions import FormatError

__all__ = [
    "CPU_UTILIZATION",
    "CPU_TOTAL",
    "IO_WAIT",
    "MEMORY_USED_PERCENT",
    "GPU_UTILIZATION",
    "GPU_MEMORY_UTILIZATION",
    "DISK_READ_BYTES",
    "DISK_WRITE_BYTES",
    "NETWORK_RECEIVE_BYTES",
    "NETWORK_SEND_BYTES",
    "SystemRecord",
    "encode_record",
    "encode_records",
    "decode_records",
]

#: Percent of a core (``Name`` ``cpu<n>``) or of all cores (``Name`` :data:`CPU_TOTAL`) busy.
CPU_UTILIZATION = "CPUUtilization"
CPU_TOTAL = "cpu_total"
#: Percent of CPU time waiting on I/O (``Type`` ``cpu``).
IO_WAIT = "I/OWaitPercentage"
#: Host memory in use, percent (``Type`` ``memory``; smdebug's readers know it by this ``Name``).
MEMORY_USED_PERCENT = "MemoryUsedPercent"
#: Percent busy and percent of memory used, per GPU (``Name`` ``gpu<n>``).
GPU_UTILIZATION = "GPUUtilization"
GPU_MEMORY_UTILIZATION = "GPUMemoryUtilization"
#: Bytes per second over the last interval (``Type`` ``io`` / ``network``).
DISK_READ_BYTES = "DiskReadBytesPerSecond"
DISK_WRITE_BYTES = "DiskWriteBytesPerSecond"
NETWORK_RECEIVE_BYTES = "NetworkReceiveBytesPerSecond"
NETWORK_SEND_BYTES = "NetworkSendBytesPerSecond"

_MAX_TEXT = 128


@dataclass(frozen=True)
class SystemRecord:
    """One sample: ``value`` of ``dimension`` on device ``name`` of ``node_id`` at ``timestamp`` (epoch s)."""

    type: str
    name: str
    dimension: str
    value: float
    node_id: str
    timestamp: float


def encode_record(record: SystemRecord) -> str:
    """One line (with its ``\\n``), keys in SageMaker's order."""
    _check(record, where="record to encode")
    body = {
        "Type": record.type,
        "Name": record.name,
        "Dimension": record.dimension,
        "Value": record.value,
        "NodeId": record.node_id,
        "Timestamp": record.timestamp,
    }
    return json.dumps(body, separators=(",", ":"), allow_nan=False) + "\n"


def encode_records(records: Iterable[SystemRecord]) -> str:
    """The lines of several records, in order."""
    return "".join(encode_record(record) for record in records)


def decode_records(text: str | bytes, *, source: str = "<system metrics>") -> list[SystemRecord]:
    """Every record of a file's text. ``source`` names the file in errors.

    A cut-short last line (a file still being written) is dropped; any other bad line raises
    :class:`FormatError` naming ``source`` and the line number.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise FormatError(f"{source}: system metrics are not UTF-8 ({error})") from None
    lines = text.split("\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    records: list[SystemRecord] = []
    for number, line in enumerate(lines[: last + 1], start=1):
        if not line.strip():
            continue
        try:
            records.append(_decode_line(line, source=source, number=number))
        except FormatError:
            if number - 1 == last and not line.rstrip().endswith("}"):
                break  # the writer was mid-line: the same tolerance as smdebug's parser
            raise
    return records


def _decode_line(line: str, *, source: str, number: int) -> SystemRecord:
    where = f"{source} line {number}"
    try:
        body = json.loads(line)
    except ValueError as error:
        raise FormatError(f"{where}: not JSON ({error.args[0] if error.args else error})") from None
    if not isinstance(body, dict):
        raise FormatError(f"{where}: a system metric must be a JSON object")
    missing = [key for key in ("Type", "Dimension", "Value", "Timestamp") if key not in body]
    if missing:
        raise FormatError(f"{where}: missing {', '.join(missing)}")
    value, timestamp = body["Value"], body["Timestamp"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FormatError(f"{where}: Value {value!r} is not a number")
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)):
        raise FormatError(f"{where}: Timestamp {timestamp!r} is not a number")
    record = SystemRecord(
        type=body["Type"],
        name=body.get("Name") or "",
        dimension=body["Dimension"],
        value=float(value),
        node_id=body.get("NodeId") or "",
        timestamp=float(timestamp),
    )
    _check(record, where=where)
    return record


def _check(record: SystemRecord, *, where: str) -> None:
    for field in ("type", "name", "dimension", "node_id"):
        text = getattr(record, field)
        if not isinstance(text, str) or len(text) > _MAX_TEXT:
            raise FormatError(f"{where}: {field} must be a string of at most {_MAX_TEXT} characters")
    if not record.type or not record.dimension:
        raise FormatError(f"{where}: Type and Dimension must not be empty")
    if not math.isfinite(record.value):
        raise FormatError(f"{where}: Value {record.value!r} is not finite")
    if not math.isfinite(record.timestamp) or record.timestamp < 0:
        raise FormatError(f"{where}: Timestamp {record.timestamp!r} is not an epoch time in seconds")
