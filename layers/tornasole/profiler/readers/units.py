"""Time units of smdebug's profiler queries (``TimeUnits``) and the conversions its readers use.

smdebug's readers take a query's ``start``/``end`` in any unit and compare in microseconds (trace events)
or nanoseconds (system samples); truncating to an integer the same way keeps the boundaries identical.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum

__all__ = [
    "CONVERT_TO_MICROSECS",
    "TimeUnits",
    "convert_utc_timestamp_to_nanoseconds",
    "convert_utc_timestamp_to_microseconds",
    "convert_utc_timestamp_to_seconds",
    "convert_utc_datetime_to_microseconds",
    "convert_utc_datetime_to_nanoseconds",
    "us_since_epoch_to_human_readable_time",
    "ns_since_epoch_to_human_readable_time",
]

CONVERT_TO_MICROSECS = 1_000_000


class TimeUnits(Enum):
    """The unit a query's timestamps are in (smdebug's values, so pickled or compared enums agree)."""

    SECONDS = 1
    MILLISECONDS = 2
    MICROSECONDS = 3
    NANOSECONDS = 4


def _unit(unit: TimeUnits) -> TimeUnits:
    if not isinstance(unit, TimeUnits):
        raise ValueError(f"unit {unit!r} is not a TimeUnits member ({', '.join(u.name for u in TimeUnits)})")
    return unit


_THOUSANDS_TO_NS = {TimeUnits.SECONDS: 3, TimeUnits.MILLISECONDS: 2, TimeUnits.MICROSECONDS: 1}


def _scale(timestamp: float, thousands: int) -> float:
    """``timestamp`` times 1000, ``thousands`` times over: one factor at a time, as smdebug multiplies, so a
    float query boundary rounds to the same integer in both libraries."""
    for _ in range(thousands):
        timestamp = timestamp * 1000
    return timestamp


def convert_utc_timestamp_to_nanoseconds(timestamp: float, unit: TimeUnits = TimeUnits.MICROSECONDS) -> int:
    """``timestamp`` (in ``unit``) in integer nanoseconds since the epoch."""
    unit = _unit(unit)
    if unit is TimeUnits.NANOSECONDS:
        return timestamp  # type: ignore[return-value]  # smdebug passes nanoseconds through unchanged
    return int(_scale(timestamp, _THOUSANDS_TO_NS[unit]))


def convert_utc_timestamp_to_microseconds(timestamp: float, unit: TimeUnits = TimeUnits.MICROSECONDS) -> int:
    """``timestamp`` (in ``unit``) in integer microseconds since the epoch."""
    unit = _unit(unit)
    if unit is TimeUnits.NANOSECONDS:
        return timestamp / 1000  # type: ignore[return-value]  # smdebug keeps the fraction here
    return int(_scale(timestamp, _THOUSANDS_TO_NS[unit] - 1))


def convert_utc_timestamp_to_seconds(timestamp: float, unit: TimeUnits = TimeUnits.MICROSECONDS) -> float:
    """``timestamp`` (in ``unit``) in seconds since the epoch (whole seconds, except from nanoseconds)."""
    unit = _unit(unit)
    if unit is TimeUnits.NANOSECONDS:
        return timestamp / 1e9
    for _ in range({TimeUnits.SECONDS: 0, TimeUnits.MILLISECONDS: 1, TimeUnits.MICROSECONDS: 2}[unit]):
        timestamp = timestamp / 1000
    return int(timestamp)


def convert_utc_datetime_to_microseconds(moment: datetime) -> int:
    return convert_utc_timestamp_to_microseconds(moment.timestamp(), unit=TimeUnits.SECONDS)


def convert_utc_datetime_to_nanoseconds(moment: datetime) -> int:
    return convert_utc_timestamp_to_nanoseconds(moment.timestamp(), unit=TimeUnits.SECONDS)


def us_since_epoch_to_human_readable_time(us_since_epoch: float) -> str:
    """``2020-06-03T05:04:59:457089``: the UTC text smdebug's data frames carry."""
    # through datetime, as smdebug: a fractional input rounds to the microsecond the same way
    moment = datetime.fromtimestamp(us_since_epoch / 1e6, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S:%f")


def ns_since_epoch_to_human_readable_time(ns_since_epoch: float) -> str:
    return us_since_epoch_to_human_readable_time(int(ns_since_epoch) // 1000)
