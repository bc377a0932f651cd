"""Choose a storage backend from a path's scheme, importing optional backends lazily.

Like fsspec's ``registry``, backends are named as ``"module:Class"`` strings so
``import tornasole`` never pulls in boto3; the S3 backend is imported the first
time an ``s3://`` path is used. One instance is cached per scheme: backends
hold no per-path state, and the S3 one fetches its (cached) boto3 client per
call, so a cleared client cache is picked up without rebuilding it.
"""

from __future__ import annotations

import importlib
import threading

from tornasole.storage.base import Storage
from tornasole.storage.paths import scheme_of

__all__ = ["get_storage", "register", "registered_schemes", "clear_storage_cache"]

_REGISTRY: dict[str, str] = {
    "file": "tornasole.storage.local:LocalStorage",
    "s3": "tornasole.storage.s3:S3Storage",
}
_instances: dict[str, Storage] = {}
_lock = threading.Lock()


def register(scheme: str, target: str) -> None:
    """Use the class ``target`` (``"package.module:Class"``) for paths ``<scheme>://...``.

    The class is imported on first use and built with no arguments. A cached
    instance for ``scheme`` is dropped, so the next :func:`get_storage` uses
    the new class.

    Examples
    --------
    >>> register("memory", "mypackage.storage:MemoryStorage")  # doctest: +SKIP
    """
    module, sep, attr = target.partition(":")
    if not module or not sep or not attr:
        raise ValueError(f"storage target must look like 'package.module:Class', got {target!r}")
    with _lock:
        _REGISTRY[scheme.lower()] = target
        _instances.pop(scheme.lower(), None)


def registered_schemes() -> list[str]:
    """The schemes :func:`get_storage` accepts, sorted."""
    return sorted(_REGISTRY)


def get_storage(path: str) -> Storage:
    """The (cached) storage backend for ``path``: ``s3://`` -> S3, plain or ``file://`` -> local.

    Raises
    ------
    ValueError
        If the scheme has no registered backend.
    ImportError
        If the backend's optional dependency is missing, e.g.
        ``"install tornasole[s3] to read s3:// paths"``.

    Examples
    --------
    >>> type(get_storage("/tmp/run")).__name__
    'LocalStorage'
    """
    scheme = scheme_of(path)
    cached = _instances.get(scheme)
    if cached is not None:
        return cached
    with _lock:
        cached = _instances.get(scheme)
        if cached is None:
            cached = _instances[scheme] = _load(scheme, path)()
        return cached


def clear_storage_cache() -> None:
    """Close and forget every cached backend (tests; after :func:`register`)."""
    with _lock:
        instances = list(_instances.values())
        _instances.clear()
    for instance in instances:
        close = getattr(instance, "close", None)
        if close is not None:
            close()


def _load(scheme: str, path: str) -> type:
    target = _REGISTRY.get(scheme)
    if target is None:
        raise ValueError(
            f"no storage backend for scheme {scheme!r} in {path!r}; known: {', '.join(registered_schemes())}"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] == "tornasole":
            raise  # a bug or missing module of ours, not a missing optional dependency
        raise ImportError(f"install tornasole[{scheme}] to read {scheme}:// paths") from exc
    return getattr(module, attr)
