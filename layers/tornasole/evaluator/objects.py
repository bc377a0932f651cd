"""What an S3 object is to the evaluator: where its trial is, whether its key is canonical, capped reads.

Why checked before anything is recorded: an S3 key is typed by whoever can
write to the bucket. A key that does not round-trip the canonical layout (a
45-digit step, an index file in the wrong folder, a worker name with control
characters) is rejected with a reason, never turned into a DynamoDB number that
cannot be stored or a step that can never be read back. Files read whole
(collections, job configuration) are read with a size cap.
"""

from __future__ import annotations

from tornasole.evaluator.models import JobState
from tornasole.format import paths
from tornasole.stack_spec import END_MARKER_FILE

__all__ = [
    "MAX_CONFIG_BYTES",
    "canonical_index_problem",
    "end_marker_present",
    "listed_steps",
    "read_capped",
    "trial_path_of",
]

#: Largest collections / job configuration file read (both are small JSON written once).
MAX_CONFIG_BYTES = 1024 * 1024


def read_capped(path: str, cap: int = MAX_CONFIG_BYTES) -> bytes:
    """The whole file at ``path`` when it is at most ``cap`` bytes (one ranged read), else ``ValueError``."""
    from tornasole.storage import get_storage

    data = get_storage(path).read(path, 0, cap + 1)
    if len(data) > cap:
        raise ValueError(f"{path}: larger than {cap} bytes, not read")
    return data


def canonical_index_problem(key: str, step: int, worker: str) -> str | None:
    """Why an index key does not round-trip the canonical layout (12-digit step, folder step // 1000,
    a worker name that serialises back to itself), or None."""
    if any(part in ("", ".", "..") for part in key.split("://", 1)[-1].split("/")):
        return "the key has '.', '..' or empty path segments"
    if step >= 10**12:
        return f"step {step} has more than 12 digits"
    if not worker or len(worker) > 256 or any(not c.isprintable() for c in worker):
        return f"worker name {worker!r} is empty, too long or has control characters"
    try:
        canonical = paths.index_file_name(step, worker)
    except ValueError as exc:
        return str(exc)
    if key != canonical and not key.endswith("/" + canonical):
        return f"not at its canonical place {canonical}"
    return None


def trial_path_of(bucket: str, key: str, depth: int) -> str:
    """The trial root of ``key`` when the file sits ``depth`` levels below it."""
    parts = key.split("/")
    prefix = "/".join(parts[: len(parts) - depth])
    return f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"


def end_marker_present(trial_path: str) -> bool:
    """Whether the trial's end marker is there (one HEAD/stat)."""
    from tornasole.storage import get_storage

    return get_storage(trial_path).exists(f"{trial_path.rstrip('/')}/{END_MARKER_FILE}")


def listed_steps(state: JobState) -> dict[int, set[str]]:
    """Step -> workers whose index file is in the trial (one listing; non-canonical keys left out)."""
    from tornasole.storage import get_storage, join

    workers: dict[int, set[str]] = {}
    for path in get_storage(state.trial_path).list(join(state.trial_path, paths.INDEX_DIR) + "/"):
        parsed = paths.parse_index_file_name(path)
        if parsed is not None and canonical_index_problem(path, *parsed) is None:
            workers.setdefault(parsed[0], set()).add(parsed[1])
    return workers
