"""The collections file, at the JSON-dict level (FORMAT.md 4).

``collections/000000000/<worker>_collections.json`` holds
``{"collections": {name: collection dict, ...}, "_meta": {"num_workers": N}}``,
serialized by ``json.dumps`` with default separators and no trailing newline.
Turning a collection dict into a ``Collection`` object is
``tornasole.core.collection``'s job; this module only fixes the bytes and checks
the shape, so that a reader gets one clear error naming the file instead of a
``KeyError`` deep inside the model classes.
"""

from __future__ import annotations

import json
from typing import Any

from tornasole.exceptions import FormatError
from tornasole.safe_regex import regex_problem

__all__ = ["MAX_COLLECTIONS_BYTES", "MAX_NUM_WORKERS", "encode_collections", "decode_collections"]

#: The largest collections file a reader reads (smdebug's are a few KB; readers read at most one byte more).
MAX_COLLECTIONS_BYTES = 1024 * 1024

#: The most workers a collections file may announce (a step waits for this many index files).
MAX_NUM_WORKERS = 4096

# key -> accepted JSON types for the keys smdebug writes in every collection dict.
_COLLECTION_KEYS: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "include_regex": (list, type(None)),
    "tensor_names": (list, type(None)),
    "reduction_config": (dict, type(None)),
    "save_config": (dict, type(None)),
    "save_histogram": (bool,),
}


def encode_collections(collections: dict[str, dict[str, Any]], num_workers: int) -> bytes:
    """Serialize collection dicts exactly as smdebug's ``CollectionManager.export``.

    Parameters
    ----------
    collections : dict of str to dict
        ``name -> Collection.to_json_dict()``, in the order they should appear.
    num_workers : int
        Workers expected to write each step.

    Examples
    --------
    >>> encode_collections({"losses": {"name": "losses"}}, 1)
    b'{"collections": {"losses": {"name": "losses"}}, "_meta": {"num_workers": 1}}'
    """
    return json.dumps({"collections": collections, "_meta": {"num_workers": int(num_workers)}}).encode(
        "utf-8"
    )


def decode_collections(data: bytes | str, path: str | None) -> tuple[dict[str, dict[str, Any]], int]:
    """Parse and validate a collections file.

    Parameters
    ----------
    data : bytes or str
        The file contents.
    path : str or None
        The collections file, named in every error.

    Returns
    -------
    tuple
        ``(collections, num_workers)``; ``num_workers`` is 1 when ``_meta`` is absent
        (files from smdebug versions before multi-worker support).

    Raises
    ------
    FormatError
        Malformed JSON, a missing ``collections`` object, a collection that is not an
        object or has a key of the wrong type, or a bad ``num_workers``.

    Examples
    --------
    >>> decode_collections(b'{"collections": {}, "_meta": {"num_workers": 2}}', "c.json")
    ({}, 2)
    """
    try:
        doc = json.loads(data)
    except RecursionError:
        raise FormatError("malformed collections JSON (nested too deeply)", path=path) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError(f"malformed collections JSON ({e})", path=path) from None
    if not isinstance(doc, dict):
        raise FormatError(f"collections file must be a JSON object, got {type(doc).__name__}", path=path)
    colls = doc.get("collections")
    if not isinstance(colls, dict):
        raise FormatError("missing or non-object 'collections' section", path=path)
    for name, coll in colls.items():
        _check_collection(name, coll, path)
    meta = doc.get("_meta", {"num_workers": 1})
    if not isinstance(meta, dict):
        raise FormatError("'_meta' must be an object", path=path)
    num_workers = meta.get("num_workers", 1)
    if isinstance(num_workers, str) and num_workers.isdigit():
        num_workers = int(num_workers)
    if (
        not isinstance(num_workers, int)
        or isinstance(num_workers, bool)
        or not 1 <= num_workers <= MAX_NUM_WORKERS
    ):
        raise FormatError(
            f"'_meta.num_workers' must be a positive integer of at most {MAX_NUM_WORKERS}, "
            f"got {str(num_workers)[:40]!r}",
            path=path,
        )
    return colls, num_workers


def _check_collection(name: str, coll: Any, path: str | None) -> None:
    if not isinstance(coll, dict):
        raise FormatError(f"collection {name!r} must be an object, got {type(coll).__name__}", path=path)
    if "name" not in coll:
        raise FormatError(f"collection {name!r} has no 'name'", path=path)
    for key, types in _COLLECTION_KEYS.items():
        if key in coll and not isinstance(coll[key], types):
            expected = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise FormatError(
                f"collection {name!r}: {key!r} must be {expected}, got {type(coll[key]).__name__}", path=path
            )
    for key in ("include_regex", "tensor_names"):
        items = coll.get(key) or []
        if not all(isinstance(x, str) for x in items):
            raise FormatError(f"collection {name!r}: {key!r} must hold strings only", path=path)
    for pattern in coll.get("include_regex") or []:
        problem = regex_problem(pattern)  # whoever writes the trial chose it; matched against every name
        if problem:
            raise FormatError(f"collection {name!r}: include_regex {pattern[:80]!r}: {problem}", path=path)
