"""Pure helpers for the two kinds of location Tornasole accepts: local paths and ``s3://`` URLs.

Kept apart from the backends so the registry, the trial layer and the writer
can parse and build locations without importing boto3. Joining always uses
``/`` (S3 keys are not OS paths, and every local OS we run on accepts ``/``).
"""

from __future__ import annotations

import os
import re

__all__ = ["join", "is_s3", "split_s3", "scheme_of", "to_local"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def scheme_of(path: str) -> str:
    """The URL scheme of ``path`` in lower case; ``"file"`` for a plain local path.

    Examples
    --------
    >>> scheme_of("s3://bucket/run"), scheme_of("/tmp/run"), scheme_of("file:///tmp/run")
    ('s3', 'file', 'file')
    """
    match = _SCHEME.match(os.fspath(path))
    return match.group(1).lower() if match else "file"


def is_s3(path: str) -> bool:
    """Whether ``path`` is an ``s3://`` URL.

    Examples
    --------
    >>> is_s3("s3://bucket/key"), is_s3("/tmp/s3/key")
    (True, False)
    """
    return scheme_of(path) == "s3"


def split_s3(path: str) -> tuple[str, str]:
    """Split ``s3://bucket/key`` into ``(bucket, key)``; the key may be empty (a whole bucket).

    Raises
    ------
    ValueError
        If ``path`` is not an ``s3://`` URL with a bucket name, naming ``path``.

    Examples
    --------
    >>> split_s3("s3://bucket/run/index/")
    ('bucket', 'run/index/')
    >>> split_s3("s3://bucket")
    ('bucket', '')
    """
    if not is_s3(path):
        raise ValueError(f"not an s3:// URL: {path!r}")
    bucket, _, key = path[len("s3://") :].partition("/")
    if not bucket or any(c.isspace() for c in bucket):
        raise ValueError(f"malformed s3:// URL (no valid bucket name): {path!r}")
    return bucket, key


def to_local(path: str) -> str:
    """The OS path for a local location, dropping a ``file://`` scheme if present.

    Examples
    --------
    >>> to_local("file:///tmp/run"), to_local("/tmp/run")
    ('/tmp/run', '/tmp/run')
    """
    path = os.fspath(path)
    if path[:7].lower() == "file://":
        return path[7:]
    return path


def join(base: str, *parts: str) -> str:
    """Join ``base`` and ``parts`` with single ``/`` separators, for local paths and URLs alike.

    Leading slashes of each part and the trailing slash of what precedes it
    collapse into one separator; a trailing slash on the last part is kept, so
    a joined directory prefix stays a directory prefix. Empty parts are ignored.

    Examples
    --------
    >>> join("s3://bucket/run/", "/index/", "000000000/")
    's3://bucket/run/index/000000000/'
    >>> join("/tmp/run", "events", "000000000010_worker_0.tfevents")
    '/tmp/run/events/000000000010_worker_0.tfevents'
    """
    out = os.fspath(base)
    for part in parts:
        part = os.fspath(part)
        if not part:
            continue
        if not out:
            out = part
        elif out.endswith("/"):
            out += part.lstrip("/")
        else:
            out += "/" + part.lstrip("/")
    return out
