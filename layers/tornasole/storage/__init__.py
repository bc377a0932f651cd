"""Storage behind one small interface: local paths and ``s3://bucket/prefix`` URLs.

Floor plan: imported by every package from core and format up; imports aws and config only.

Everything above this package (format writer, trials, evaluator) reads and
writes through :func:`get_storage`. ``S3Storage`` is imported lazily so that
importing this package never requires boto3.

Examples
--------
>>> from tornasole.storage import get_storage, join
>>> storage = get_storage("/tmp/run")
>>> join("s3://bucket/run", "index", "000000000/")
's3://bucket/run/index/000000000/'
"""

from __future__ import annotations

from typing import Any

from tornasole.storage.base import ReadRequest, Storage
from tornasole.storage.local import LocalStorage
from tornasole.storage.paths import is_s3, join, split_s3
from tornasole.storage.schemes import clear_storage_cache, get_storage, register

__all__ = [
    "ReadRequest",
    "Storage",
    "LocalStorage",
    "S3Storage",
    "get_storage",
    "register",
    "clear_storage_cache",
    "join",
    "is_s3",
    "split_s3",
]


def __getattr__(name: str) -> Any:
    if name == "S3Storage":
        from tornasole.storage.s3 import S3Storage

        return S3Storage
    raise AttributeError(f"module 'tornasole.storage' has no attribute {name!r}")
