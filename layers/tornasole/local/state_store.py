"""``tornasole local up --state-dir DIR``: keep the trial bucket and the state table across restarts.

moto keeps everything in memory, so the local mode saves what a user cannot
re-create when it stops, and puts it back when it starts:

- every object of the trial bucket (trials, job configuration files, stop
  signals), as files under ``DIR/s3/<key>`` (an object is rewritten only when
  its ETag changed);
- every item of the state table (jobs, rule statuses and details, evaluated
  and pending steps, the outbox with what was published), in
  ``DIR/tornasole-local-state.json``, written last and atomically.

Objects are restored before the bucket's notifications are configured (so
nothing is evaluated twice) and items before the dispatcher starts; outbox
items already published stay published. Not kept: messages still queued in
SQS when it stopped (the local mode drains them first), and anything created
by hand in the endpoint (other buckets, queues, EventBridge rules or SNS
subscriptions).
"""

from __future__ import annotations

import base64
import json
import logging
import os
from pathlib import Path
from typing import Any

from tornasole.aws.clients import client
from tornasole.exceptions import TornasoleValueError

__all__ = ["STATE_FILE", "check_bucket", "has_state", "restore_objects", "restore_table", "save_state"]

log = logging.getLogger(__name__)
STATE_FILE = "tornasole-local-state.json"
FORMAT_VERSION = 1


def _encode(value: Any) -> Any:
    """DynamoDB JSON with binary values base64'd (``{"__b64__": ...}``) so it survives ``json``."""
    if isinstance(value, bytes | bytearray):
        return {"__b64__": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__b64__"}:
            return base64.b64decode(value["__b64__"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _load(state_dir: Path) -> dict[str, Any]:
    path = state_dir / STATE_FILE
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TornasoleValueError(f"{path}: cannot read the saved local state: {exc}") from exc
    if state.get("version") != FORMAT_VERSION:
        raise TornasoleValueError(f"{path}: unknown state format version {state.get('version')!r}")
    return state


def has_state(state_dir: str | os.PathLike[str]) -> bool:
    return (Path(state_dir) / STATE_FILE).is_file()


def check_bucket(state_dir: str | os.PathLike[str], bucket: str) -> None:
    """Refuse to mix two buckets in one state dir (the next save would drop the other's objects)."""
    if has_state(state_dir):
        saved = _load(Path(state_dir))["bucket"]
        if saved != bucket:
            raise TornasoleValueError(
                f"{state_dir} holds the local state of bucket {saved!r}, not {bucket!r}: "
                f"start with --bucket {saved} or use another --state-dir"
            )


def _object_path(state_dir: Path, key: str) -> Path:
    path = (state_dir / "s3" / key).resolve()
    if not path.is_relative_to((state_dir / "s3").resolve()):
        raise TornasoleValueError(f"object key {key!r} escapes {state_dir / 's3'}")
    return path


def save_state(state_dir: str | os.PathLike[str], bucket: str, table: str) -> dict[str, int]:
    """Write the bucket's objects and the table's items to ``state_dir``; returns what was saved."""
    root = Path(state_dir)
    root.mkdir(parents=True, exist_ok=True)
    previous = _load(root)["objects"] if has_state(root) else {}
    s3, ddb = client("s3"), client("dynamodb")
    objects: dict[str, str] = {}
    written = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            key, etag = obj["Key"], obj["ETag"]
            objects[key] = etag
            path = _object_path(root, key)
            if previous.get(key) == etag and path.is_file():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
            written += 1
    for key in set(previous) - set(objects):  # deleted since the last save
        _object_path(root, key).unlink(missing_ok=True)
    items = [
        _encode(item)
        for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
        for item in page.get("Items", [])
    ]
    state = {"version": FORMAT_VERSION, "bucket": bucket, "table": table, "objects": objects, "items": items}
    tmp = root / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(root / STATE_FILE)
    log.info(
        "local state saved to %s: %d objects (%d written), %d items", root, len(objects), written, len(items)
    )
    return {"objects": len(objects), "written": written, "items": len(items)}


def restore_objects(state_dir: str | os.PathLike[str]) -> str:
    """Create the saved bucket and put its objects back (before notifications exist); returns the bucket."""
    root = Path(state_dir)
    state = _load(root)
    bucket = state["bucket"]
    s3 = client("s3")
    s3.create_bucket(Bucket=bucket)
    for key in state["objects"]:
        path = _object_path(root, key)
        if not path.is_file():
            raise TornasoleValueError(f"{root}: saved object {key!r} is missing ({path})")
        s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    return bucket


def restore_table(state_dir: str | os.PathLike[str], table: str) -> int:
    """Put the saved items back into ``table`` (it exists, empty); returns how many."""
    items = [_decode(item) for item in _load(Path(state_dir))["items"]]
    ddb = client("dynamodb")
    for start in range(0, len(items), 25):
        requests = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        while requests:
            out = ddb.batch_write_item(RequestItems={table: requests})
            requests = out.get("UnprocessedItems", {}).get(table, [])
    return len(items)
