"""One S3 request at a time in the embedded moto server: an overwritten object's reply stays valid.

A correctness patch (``tornasole.local.moto_patches``). moto 5 stores an S3
object's bytes in a temporary file and closes the file of the object a PUT
replaces. Two PUTs of one key from two threads race: the second closes the
first's file after the first stored it but before the first computed the ETag
of its reply, so the first request fails with a 500 ("I/O operation on closed
file"; a GET or a listing of the replaced object fails the same way). botocore
retries it, which stores the first body again, after the second, and makes
S3 send the object-created notification twice. S3 itself answers every
completed PUT with 200, once. The local mode's training uploads and the
evaluator's workers write from several threads, so every S3 request is served
under one lock, around the response class's ``key_response`` and
``bucket_response`` (both the server's threads and the in-process transport
reach moto through them).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

__all__ = ["LOCK", "serialize_s3", "unserialize_s3"]

#: Held for each S3 request moto serves in this process.
LOCK = threading.RLock()
_ORIGINALS: dict[str, Any] = {}  # S3Response method name -> moto's own function, while patched
_METHODS = ("key_response", "bucket_response")


def serialize_s3() -> None:
    """Wrap ``S3Response.key_response`` and ``bucket_response`` in the lock (idempotent)."""
    from moto.s3.responses import S3Response

    for name in _METHODS:
        if name in _ORIGINALS:
            continue
        original = S3Response.__dict__[name]
        _ORIGINALS[name] = original

        @functools.wraps(original)
        def one_at_a_time(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            with LOCK:
                return _original(self, *args, **kwargs)

        setattr(S3Response, name, one_at_a_time)


def unserialize_s3() -> None:
    """Put moto's own request handling back (after the local mode stopped)."""
    from moto.s3.responses import S3Response

    for name, original in list(_ORIGINALS.items()):
        setattr(S3Response, name, original)
        del _ORIGINALS[name]
