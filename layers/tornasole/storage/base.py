"""The storage interface every reader and writer goes through.

Paths are always full locations: a local path (``/tmp/run``) or an S3 URL
(``s3://bucket/prefix/key``). Backends translate their own errors into
builtins at this boundary (missing object -> ``FileNotFoundError``, access
denied -> ``PermissionError``, anything else -> ``OSError``), keeping the
cause; the format and trial layers then add step and tensor names.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = ["ReadRequest", "Storage"]


@dataclass(frozen=True)
class ReadRequest:
    """One (possibly ranged) read: bytes ``[start, end)`` of ``path``; ``None`` means the whole object."""

    path: str
    start: int | None = None
    end: int | None = None


@runtime_checkable
class Storage(Protocol):
    """Five primitives; caching and prefetching live above this interface."""

    def read(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` of ``path`` (whole object when both are None).

        Raises ``FileNotFoundError`` if missing. A range past the end returns
        what exists (callers check lengths and report truncation themselves).
        """
        ...

    def read_many(
        self, requests: Sequence[ReadRequest], on_error: Literal["raise", "return"] = "raise"
    ) -> list[bytes | BaseException]:
        """Reads concurrently with threads (never processes); results in request order.

        With ``on_error="return"`` a failed read yields its exception in place.
        """
        ...

    def write_atomic(self, path: str, data: bytes) -> None:
        """Publish ``data`` at ``path`` in one piece: readers see all of it or nothing."""
        ...

    def list(self, prefix: str, start_after: str | None = None) -> Iterator[str]:
        """Full paths of the objects under ``prefix``, in lexicographic order.

        ``prefix`` is a path prefix (``s3://b/run/index/`` or ``/tmp/run/index/``);
        with ``start_after`` only paths sorting strictly after it are returned,
        so a live reader lists only what is new since the last key it saw.
        Temporary files of in-progress local writes are never listed.
        """
        ...

    def exists(self, path: str) -> bool:
        """Whether an object (not a directory prefix) exists at ``path``."""
        ...

    def delete(self, path: str) -> None:
        """Remove one object; missing is not an error (used for markers such as the stop signal)."""
        ...
