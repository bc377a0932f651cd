"""The smdebug-written profiler fixture and the queries smdebug's readers answered on it."""

from __future__ import annotations

import json
from pathlib import Path

from tornasole.profiler.readers import TimeUnits

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "profiler"
TREE = FIXTURES / "profiler_pt_2nodes"
ROOT = TREE / "profiler-output"
EXPECTED = json.loads((FIXTURES / "profiler_pt_2nodes.expected.json").read_text())


def query_id(query: dict) -> str:
    return f"{query['reader']}.{query['method']}{query['args']}{query['kwargs']}"


def run_query(readers: dict, query: dict) -> list:
    """Our readers' answer to one recorded query, in the rows the ground truth holds (sorted)."""
    kwargs = dict(query["kwargs"])
    if "unit" in kwargs:
        kwargs["unit"] = TimeUnits[kwargs["unit"]]
    events = getattr(readers[query["reader"]], query["method"])(*query["args"], **kwargs)
    if query["reader"] == "system":
        rows = [[e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp] for e in events]
    else:
        rows = [
            [e.event_phase, e.event_name, e.start_time, e.duration, e.node_id, e.event_args] for e in events
        ]
    return sorted(rows, key=json.dumps)


def upload_tree(local_root: Path, bucket: str, prefix: str) -> str:
    """Copy a local profiler root to ``s3://bucket/prefix/profiler-output``; returns that URI."""
    from tornasole.aws.clients import s3_client

    client = s3_client()
    for path in sorted(local_root.rglob("*")):
        if path.is_file():
            key = f"{prefix}/profiler-output/{path.relative_to(local_root).as_posix()}"
            client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}/profiler-output"
