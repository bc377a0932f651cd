"""The set of collections a hook knows, and the ones a framework creates by default.

Kept apart from :mod:`tornasole.core.collection` so the model class stays a
plain value object; the manager owns creation-on-first-use (``get``), the
built-in PyTorch collections and the collections-file dict shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from tornasole.core.collection import (
    DEFAULT_PYTORCH_COLLECTIONS,
    PYTORCH_DEFAULT_REGEXES,
    Collection,
    CollectionKeys,
)
from tornasole.exceptions import ConfigurationError

__all__ = ["CollectionManager", "COLLECTIONS_DIR"]

# Where a trial keeps its collections files (the same constant as tornasole.format.paths, a higher layer).
COLLECTIONS_DIR = "collections/000000000"


class CollectionManager:
    """An ordered name -> :class:`Collection` mapping that creates collections on first use.

    Examples
    --------
    >>> cm = CollectionManager.pytorch_defaults()
    >>> cm.get("weights").include_regex
    ['^(?!gradient).*weight']
    >>> cm.get("my_coll").name in cm
    True
    """

    def __init__(
        self, collections: Mapping[str, Collection] | None = None, create_default: bool = False
    ) -> None:
        # ``create_default`` is accepted for smdebug's signature; defaults come from ``pytorch_defaults``.
        self.collections: dict[str, Collection] = dict(collections or {})
        self._meta: dict[str, Any] = {"num_workers": 1}

    @classmethod
    def pytorch_defaults(cls) -> CollectionManager:
        """``all``, ``default``, ``weights``, ``biases``, ``gradients``, ``losses`` with smdebug's regexes."""
        cm = cls()
        for name in DEFAULT_PYTORCH_COLLECTIONS:
            cm.get(name)
        for name in (
            CollectionKeys.WEIGHTS,
            CollectionKeys.BIASES,
            CollectionKeys.GRADIENTS,
            CollectionKeys.LOSSES,
        ):
            cm.get(name).include(PYTORCH_DEFAULT_REGEXES[name])
        cm.get(CollectionKeys.LOSSES).save_histogram = False
        return cm

    def get(self, name: str, create: bool = True) -> Collection:
        """The collection called ``name``; created empty when missing unless ``create=False``."""
        coll = self.collections.get(name)
        if coll is None:
            if not create:
                raise ConfigurationError(
                    f"collection {name!r} does not exist; known: {sorted(self.collections)}"
                )
            coll = self.collections[name] = Collection(name)
            default_regex = PYTORCH_DEFAULT_REGEXES.get(name)
            if default_regex is not None and name in (
                CollectionKeys.OUTPUTS,
                CollectionKeys.INPUTS,
                CollectionKeys.SCALARS,
            ):
                coll.include(default_regex)
        return coll

    def create_collection(self, name: str, cls: type[Collection] = Collection) -> None:
        """Create an empty collection ``name`` of class ``cls`` unless one exists (smdebug's API)."""
        if name not in self.collections:
            self.collections[name] = cls(name)

    def get_collections(self) -> dict[str, Collection]:
        """The ``name -> Collection`` mapping itself (edits are seen by the manager, as in smdebug)."""
        return self.collections

    def add(self, collection: Collection | str) -> Collection:
        """Add (or replace, by name) a collection; a string creates an empty one."""
        if isinstance(collection, str):
            return self.get(collection)
        if not isinstance(collection, Collection):
            raise ConfigurationError(f"{collection!r} is not a Collection")
        self.collections[collection.name] = collection
        return collection

    def __contains__(self, name: object) -> bool:
        return name in self.collections

    def __iter__(self) -> Iterator[Collection]:
        return iter(list(self.collections.values()))

    def __len__(self) -> int:
        return len(self.collections)

    # -- the collections file (smdebug's CollectionManager API) --------------------------------
    def update_meta(self, meta: Mapping[str, Any]) -> None:
        """Merge ``meta`` (e.g. ``{"num_workers": 2}``) into the file's ``_meta`` object."""
        if not isinstance(meta, Mapping):
            raise ConfigurationError(f"CollectionManager: meta must be a dict, got {type(meta).__name__}")
        self._meta.update(meta)

    def get_num_workers(self) -> int:
        return int(self._meta["num_workers"])

    def set_num_workers(self, num_workers: int) -> None:
        self._meta["num_workers"] = int(num_workers)

    def to_json_dict(self) -> dict[str, Any]:
        """``{"collections": {...}, "_meta": {...}}``: a whole collections file."""
        return {"collections": self.to_json_dicts(), "_meta": dict(self._meta)}

    def to_json(self) -> str:
        """The collections file's text (``json.dumps`` with default separators, as smdebug writes it)."""
        return json.dumps(self.to_json_dict())

    def export(self, out_dir: str, filename: str) -> str:
        """Write the collections file ``<out_dir>/collections/000000000/<filename>`` (local or ``s3://``).

        Returns the path written.
        """
        from tornasole.storage.paths import join
        from tornasole.storage.schemes import get_storage

        path = join(str(out_dir).rstrip("/"), COLLECTIONS_DIR, filename)
        get_storage(path).write_atomic(path, self.to_json().encode("utf-8"))
        return path

    @classmethod
    def load(cls, filename: str, collection_class: type[Collection] = Collection) -> CollectionManager:
        """Read a collections file (local or ``s3://``); errors name the file."""
        from tornasole.storage.schemes import get_storage

        try:
            data = get_storage(filename).read(filename)
        except OSError as exc:
            raise ConfigurationError(f"cannot read collections file {filename}: {exc}") from exc
        return cls.load_from_string(data.decode("utf-8"), collection_class, path=filename)

    @classmethod
    def load_from_string(
        cls, s: str | bytes, collection_class: type[Collection] = Collection, *, path: str | None = None
    ) -> CollectionManager:
        """Parse a collections file's text; ``path`` (if given) is named in errors."""
        where = path or "collections file"
        try:
            params = json.loads(s)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"{where}: not valid JSON: {exc}") from exc
        if not isinstance(params, Mapping) or not isinstance(params.get("collections"), Mapping):
            raise ConfigurationError(f"{where}: expected an object with a 'collections' object")
        unknown = set(params) - {"collections", "_meta"}
        if unknown:
            raise ConfigurationError(f"{where}: unknown key(s) {sorted(unknown)}")
        cm = cls()
        for c_dict in params["collections"].values():
            cm.add(collection_class.from_json_dict(c_dict))
        cm.update_meta(params.get("_meta") or {})
        return cm

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CollectionManager):
            return NotImplemented
        return self.collections == other.collections

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"CollectionManager(collection_names={list(self.collections)})"

    def to_json_dicts(self) -> dict[str, dict[str, Any]]:
        """``{name: collection JSON dict}``: the input of ``format.collections.encode_collections``."""
        return {name: c.to_json_dict() for name, c in self.collections.items()}

    @classmethod
    def from_json_dicts(cls, d: Mapping[str, Mapping[str, Any]]) -> CollectionManager:
        """Inverse of :meth:`to_json_dicts` (the ``collections`` object of a collections file)."""
        return cls({name: Collection.from_json_dict(c) for name, c in d.items()})
