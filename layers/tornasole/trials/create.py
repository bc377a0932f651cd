"""``create_trial``: the one entry point users call, for local paths and ``s3://`` alike.

``LocalTrial`` and ``S3Trial`` are the same :class:`Trial` over a different
Storage; they also take smdebug's constructor arguments (``LocalTrial(name,
dirname)``, ``S3Trial(name, bucket_name, prefix_name)``) for code that builds
them directly.
"""

from __future__ import annotations

import os
from typing import Any

from tornasole.storage import Storage, is_s3
from tornasole.trials.caches import ValueCache
from tornasole.trials.trial import DEFAULT_COLLECTIONS_TIMEOUT, Trial

__all__ = ["create_trial", "LocalTrial", "S3Trial"]

# smdebug keyword arguments accepted for compatibility; they change nothing here.
_COMPAT_KWARGS = {"parallel", "check", "index_mode", "cache", "profiler", "output_dir"}


class LocalTrial(Trial):
    """A trial in a local directory: ``LocalTrial(name, dirname)`` as in smdebug.

    ``parallel``, ``check``, ``index_mode`` and ``cache`` are smdebug's and
    change nothing here; other keywords are :class:`Trial`'s.

    Examples
    --------
    >>> trial = LocalTrial("run", "/tmp/run")  # doctest: +SKIP
    """

    def __init__(
        self,
        name: str,
        dirname: str,
        range_steps: tuple[int | None, int | None] | None = None,
        parallel: bool = True,
        check: bool = False,
        index_mode: bool = True,
        cache: bool = False,
        **kwargs: Any,
    ) -> None:
        Trial.__init__(self, name, _local_path(dirname), range_steps=range_steps, **kwargs)


class S3Trial(Trial):
    """A trial under ``s3://bucket/prefix``: ``S3Trial(name, bucket_name, prefix_name)`` as in smdebug.

    Examples
    --------
    >>> trial = S3Trial("run", "my-bucket", "jobs/run")  # doctest: +SKIP
    >>> trial.path, trial.bucket_name, trial.prefix_name  # doctest: +SKIP
    ('s3://my-bucket/jobs/run', 'my-bucket', 'jobs/run/')
    """

    def __init__(
        self,
        name: str,
        bucket_name: str,
        prefix_name: str,
        range_steps: tuple[int | None, int | None] | None = None,
        check: bool = False,
        index_mode: bool = True,
        cache: bool = False,
        **kwargs: Any,
    ) -> None:
        bucket, prefix = str(bucket_name).strip("/"), str(prefix_name).strip("/")
        if not bucket or "/" in bucket:
            raise ValueError(f"S3Trial: bucket_name must be a bucket name, got {bucket_name!r}")
        path = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        Trial.__init__(self, name, path, range_steps=range_steps, **kwargs)

    @property
    def bucket_name(self) -> str:
        return self.path[len("s3://") :].split("/", 1)[0]

    @property
    def prefix_name(self) -> str:
        """The key prefix with a trailing slash, as smdebug keeps it."""
        rest = self.path[len("s3://") :].partition("/")[2]
        return rest + "/" if rest else ""


def _local_path(path: str) -> str:
    path = os.path.expanduser(str(path).strip())
    stripped = path.rstrip("/")  # one spelling per trial: names, joins and equality agree
    return stripped or path


def create_trial(
    path: str,
    name: str | None = None,
    range_steps: tuple[int | None, int | None] | None = None,
    *,
    listing: bool = True,
    storage: Storage | None = None,
    collections_timeout: float = DEFAULT_COLLECTIONS_TIMEOUT,
    poll_interval: float = 1.0,
    readahead_bytes: int | None = None,
    value_cache: ValueCache | None = None,
    **kwargs: Any,
) -> Trial:
    """Open the trial at ``path`` (a directory or ``s3://bucket/prefix``).

    Parameters
    ----------
    path : str
        Where the hook wrote (its ``out_dir``).
    name : str, optional
        Defaults to the last component of ``path``.
    range_steps : (int or None, int or None), optional
        Load only global steps ``begin <= step < end``.
    listing : bool
        ``True`` (default): read the collections file and every index file now,
        and pick up new steps as they land. ``False``: read nothing now and never
        list; add steps with :meth:`Trial.load_index_files` (serverless evaluator).
    storage : Storage, optional
        A backend to use instead of ``get_storage(path)``.
    collections_timeout, poll_interval : float
        See :class:`Trial`.
    readahead_bytes : int, optional
        See :class:`Trial` (default: 1 MiB on S3, none locally).
    value_cache : ValueCache, optional
        See :class:`Trial` (a value cache shared with other trials; the evaluator's).
    **kwargs
        smdebug's ``parallel``, ``check``, ``index_mode``, ``cache`` are accepted and ignored.

    Returns
    -------
    LocalTrial or S3Trial

    Examples
    --------
    >>> from tornasole.trials import create_trial
    >>> from tornasole import modes
    >>> trial = create_trial("s3://bucket/run")  # doctest: +SKIP
    >>> trial.steps(mode=modes.TRAIN)  # doctest: +SKIP
    [0, 5, 10, 15]
    >>> one_step = create_trial("s3://bucket/run", listing=False)  # doctest: +SKIP
    >>> one_step.load_index_files(["index/000000000/000000000010_worker_0.json"])  # doctest: +SKIP
    [10]
    """
    unknown = set(kwargs) - _COMPAT_KWARGS
    if unknown:
        raise TypeError(f"create_trial() got unexpected keyword arguments {sorted(unknown)}")
    path = str(path).strip()
    s3 = is_s3(path)
    if s3:
        stripped = path.rstrip("/")
        if stripped and not stripped.endswith(":"):
            path = stripped
    else:
        path = _local_path(path)
    if name is None:
        name = os.path.basename(path.rstrip("/"))
    cls = S3Trial if s3 else LocalTrial
    trial = cls.__new__(cls)
    Trial.__init__(  # the classes' own constructors take smdebug's arguments; the path is known here
        trial,
        name,
        path,
        range_steps=range_steps,
        listing=listing,
        storage=storage,
        collections_timeout=collections_timeout,
        poll_interval=poll_interval,
        readahead_bytes=readahead_bytes,
        value_cache=value_cache,
    )
    return trial
