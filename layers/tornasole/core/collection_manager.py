"""The set of collections a hook knows, and the ones a framework creates by default.

Kept apart from :mod:`tornasole.core.collection` so the model class stays a
plain value object; the manager owns creation-on-first-use (``get``), the
built-in PyTorch collections and the collections-file dict shape.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tornasole.core.collection import (
    DEFAULT_PYTORCH_COLLECTIONS,
    PYTORCH_DEFAULT_REGEXES,
    Collection,
    CollectionKeys,
)
from tornasole.exceptions import ConfigurationError

__all__ = ["CollectionManager"]


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

    def __init__(self, collections: Mapping[str, Collection] | None = None) -> None:
        self.collections: dict[str, Collection] = dict(collections or {})

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

    def to_json_dicts(self) -> dict[str, dict[str, Any]]:
        """``{name: collection JSON dict}``: the input of ``format.collections.encode_collections``."""
        return {name: c.to_json_dict() for name, c in self.collections.items()}

    @classmethod
    def from_json_dicts(cls, d: Mapping[str, Mapping[str, Any]]) -> CollectionManager:
        """Inverse of :meth:`to_json_dicts` (the ``collections`` object of a collections file)."""
        return cls({name: Collection.from_json_dict(c) for name, c in d.items()})
