"""``smdebug.profiler.utils`` under the alias: time units and file-name helpers of the profiler readers."""

from __future__ import annotations

from tornasole.profiler.readers.file_names import (
    get_node_id_from_system_profiler_filename,
    get_node_id_from_tracefilename,
    get_timestamp_from_tracefilename,
    get_utctimestamp_us_since_epoch_from_system_profiler_file,
    is_valid_tracefilename,
    validate_system_profiler_file,
)
from tornasole.profiler.readers.units import (
    TimeUnits,
    convert_utc_datetime_to_microseconds,
    convert_utc_datetime_to_nanoseconds,
    convert_utc_timestamp_to_microseconds,
    convert_utc_timestamp_to_nanoseconds,
    convert_utc_timestamp_to_seconds,
    ns_since_epoch_to_human_readable_time,
    us_since_epoch_to_human_readable_time,
)

__all__ = [
    "TimeUnits",
    "convert_utc_datetime_to_microseconds",
    "convert_utc_datetime_to_nanoseconds",
    "convert_utc_timestamp_to_microseconds",
    "convert_utc_timestamp_to_nanoseconds",
    "convert_utc_timestamp_to_seconds",
    "ns_since_epoch_to_human_readable_time",
    "us_since_epoch_to_human_readable_time",
    "get_node_id_from_system_profiler_filename",
    "get_node_id_from_tracefilename",
    "get_timestamp_from_tracefilename",
    "get_utctimestamp_us_since_epoch_from_system_profiler_file",
    "is_valid_tracefilename",
    "validate_system_profiler_file",
]
