"""S3 backend of the :class:`~tornasole.storage.base.Storage` protocol (boto3).

One boto3 client (the process-wide one from :mod:`tornasole.aws.clients`, or
an injected one) is shared by every thread of ``read_many``: clients are
thread-safe and pool their connections. Listing passes ``StartAfter`` so a
live reader polling for new steps lists only keys after the last one it saw,
never the whole prefix. ``ClientError`` codes are translated here, once, into
builtins that name the ``s3://`` path and keep the original as ``__cause__``.
Endpoints (moto, MinIO) come from ``AWS_ENDPOINT_URL[_S3]``, read by boto3.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from tornasole.aws.clients import s3_client
from tornasole.storage.base import ReadRequest
from tornasole.storage.paths import split_s3
from tornasole.storage.threaded import ThreadedReads

__all__ = ["S3Storage"]

_MISSING_KEY = {"NoSuchKey", "404", "NotFound"}
_DENIED = {"AccessDenied", "403", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch"}


class S3Storage(ThreadedReads):
    """Read, write and list objects at ``s3://bucket/key`` URLs.

    Parameters
    ----------
    client : botocore client, optional
        An S3 client to use for every call; by default the cached
        :func:`tornasole.aws.clients.s3_client`, fetched per call so a cleared
        client cache (tests, a changed endpoint) is picked up.
    max_workers : int, optional
        Threads used by :meth:`read_many`; default ``$TORNASOLE_READ_THREADS`` or 32.

    Examples
    --------
    >>> storage = S3Storage()
    >>> storage.read("s3://bucket/run/events/000000000010_worker_0.tfevents", 0, 12)  # doctest: +SKIP
    b'...'
    """

    def __init__(self, client: Any = None, max_workers: int | None = None) -> None:
        super().__init__(max_workers, default_workers=32)
        self._injected = client

    @property
    def client(self) -> Any:
        """The client for the next call: the injected one, else the process-wide cached one."""
        return self._injected if self._injected is not None else s3_client()

    def read(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        """``GetObject``, with a ``Range`` header when ranged; short or empty past the end."""
        return self._get(self.client, path, start, end)

    def read_many(
        self, requests: Sequence[ReadRequest], on_error: Literal["raise", "return"] = "raise"
    ) -> list[bytes | BaseException]:
        """Ranged GETs on the thread pool, all through one client; results in request order."""
        client = self.client
        return self._run_batch(requests, on_error, lambda r: self._get(client, r.path, r.start, r.end))

    def _get(self, client: Any, path: str, start: int | None, end: int | None) -> bytes:
        bucket, key = _object(path)
        start = 0 if start is None else start
        if start < 0 or (end is not None and end < 0):
            raise ValueError(f"negative byte range [{start}, {end}) for {path!r}")
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if end is not None and end <= start:
            # HTTP cannot express an empty range: fetch one byte to still report a missing object.
            kwargs["Range"] = f"bytes={start}-{start}"
        elif end is not None:
            kwargs["Range"] = f"bytes={start}-{end - 1}"
        elif start:
            kwargs["Range"] = f"bytes={start}-"
        try:
            body = client.get_object(**kwargs)["Body"]
            with body:
                data = body.read()
        except ClientError as exc:
            if _code(exc) == "InvalidRange":  # 416: the range starts at or past the end
                return b""
            raise _translate(exc, path) from exc
        except BotoCoreError as exc:
            raise _io_error(exc, path) from exc
        return b"" if end is not None and end <= start else data

    def write_atomic(self, path: str, data: bytes) -> None:
        """One ``PutObject``: S3 publishes an object whole or not at all."""
        bucket, key = _object(path)
        with _translated(path):
            self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def list(self, prefix: str, start_after: str | None = None) -> Iterator[str]:
        """Paginated ``ListObjectsV2`` under ``prefix`` with ``StartAfter`` set from ``start_after``."""
        bucket, key_prefix = split_s3(prefix)
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": key_prefix}
        if start_after is not None:
            after_bucket, after_key = split_s3(start_after)
            if after_bucket != bucket:
                raise ValueError(f"start_after {start_after!r} is not in the bucket of {prefix!r}")
            kwargs["StartAfter"] = after_key
        return self._list(prefix, bucket, kwargs)

    def _list(self, prefix: str, bucket: str, kwargs: dict[str, Any]) -> Iterator[str]:
        with _translated(prefix):
            for page in self.client.get_paginator("list_objects_v2").paginate(**kwargs):
                for obj in page.get("Contents", ()):
                    yield f"s3://{bucket}/{obj['Key']}"

    def exists(self, path: str) -> bool:
        """``HeadObject``: True for an object, False on 404 (a missing key or bucket)."""
        bucket, key = _object(path)
        try:
            self.client.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if _code(exc) in _MISSING_KEY or _code(exc) == "NoSuchBucket":
                return False
            raise _translate(exc, path) from exc
        except BotoCoreError as exc:
            raise _io_error(exc, path) from exc
        return True

    def delete(self, path: str) -> None:
        """``DeleteObject``; S3 itself treats a missing key as success."""
        bucket, key = _object(path)
        with _translated(path):
            self.client.delete_object(Bucket=bucket, Key=key)


def _object(path: str) -> tuple[str, str]:
    bucket, key = split_s3(path)
    if not key:
        raise ValueError(f"not an S3 object URL (no key): {path!r}")
    return bucket, key


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _translate(exc: ClientError, path: str) -> OSError:
    """The builtin for a ``ClientError``, naming ``path`` and S3's code and request id."""
    code = _code(exc)
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    request_id = exc.response.get("ResponseMetadata", {}).get("RequestId", "")
    detail = f"{code or status}: {exc.response.get('Error', {}).get('Message', '')}".rstrip(": ")
    if request_id:
        detail += f" (request id {request_id})"
    if code == "NoSuchBucket":
        bucket = exc.response.get("Error", {}).get("BucketName") or split_s3(path)[0]
        return FileNotFoundError(errno.ENOENT, f"no such bucket {bucket!r}: {detail}", path)
    if code in _MISSING_KEY or status == 404:
        return FileNotFoundError(errno.ENOENT, f"no such object: {detail}", path)
    if code in _DENIED or status == 403:
        return PermissionError(errno.EACCES, f"access denied: {detail}", path)
    return OSError(errno.EIO, f"S3 error {detail}", path)


def _io_error(exc: BotoCoreError, path: str) -> OSError:
    """Connection, credential and parsing failures: no S3 error code, still an ``OSError``."""
    return OSError(errno.EIO, f"S3 request failed: {exc}", path)


@contextmanager
def _translated(path: str) -> Iterator[None]:
    """``with _translated(path):`` turns botocore errors into builtins naming ``path``."""
    try:
        yield
    except ClientError as exc:
        raise _translate(exc, path) from exc
    except BotoCoreError as exc:
        raise _io_error(exc, path) from exc
