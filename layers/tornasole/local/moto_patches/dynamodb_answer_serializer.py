"""moto writes DynamoDB attribute values into its JSON answers the slow way: take the short one.

A speed patch (``tornasole.local.moto_patches``).

moto 5.2 serializes every response by walking the botocore output shape: for
each member of each structure it builds five alias providers and tries each
name they offer on the value. An attribute value is a structure of ten members
of which one is set, so an item of 15 attributes costs about 150 of those
look-ups, and a Query answering five items about 7 ms: a quarter of the local
mode's DynamoDB time.

moto's items are already in the wire shape (``{"S": "..."}``, ``{"M": {...}}``,
as DynamoDB's JSON protocol writes them). While patched, an ``AttributeValue``
that is a plain dict of one string, number, boolean, null, string set, number
set, map or list (nested values checked the same way) is written as a copy of
itself: what the generic walk writes for those; so is a map of them (an item, a
key) at once. Anything else (binary values, which moto encodes once more, other
types, a shape or value moto might alias, any response transformer registered)
takes moto's own path, for the whole map.
"""

from __future__ import annotations

from typing import Any

__all__ = ["patch", "unpatch"]

_originals: dict[str, Any] = {}
_SCALARS = {"S": str, "N": str, "BOOL": bool, "NULL": bool}
_SETS = ("SS", "NS")


def patch() -> None:
    from moto.core.serialize import BaseJSONSerializer

    if _originals:
        return
    original = BaseJSONSerializer.__dict__["_serialize_type_structure"]
    original_map = BaseJSONSerializer.__dict__["_serialize_type_map"]
    _originals["structure"] = original
    _originals["map"] = original_map

    def _serialize_type_map(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if key and shape.value.name == "AttributeValue" and not _transformers(self):
            plain = plain_item(value)
            if plain is not None:
                self._default_serialize(serialized, plain, shape, key)
                return
        original_map(self, serialized, value, shape, key)

    def _serialize_type_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if key and shape.name == "AttributeValue" and not _transformers(self):
            plain = plain_attribute_value(value)
            if plain is not None:
                self._default_serialize(serialized, plain, shape, key)
                return
        original(self, serialized, value, shape, key)

    BaseJSONSerializer._serialize_type_structure = _serialize_type_structure  # type: ignore[method-assign]
    BaseJSONSerializer._serialize_type_map = _serialize_type_map  # type: ignore[method-assign]


def unpatch() -> None:
    from moto.core.serialize import BaseJSONSerializer

    if _originals:
        BaseJSONSerializer._serialize_type_structure = _originals.pop("structure")  # type: ignore[method-assign]
        BaseJSONSerializer._serialize_type_map = _originals.pop("map")  # type: ignore[method-assign]


def _transformers(serializer: Any) -> bool:
    picker = getattr(serializer, "_value_picker", None)
    return bool(getattr(picker, "response_transformers", None))


def plain_item(value: Any) -> dict[str, Any] | None:
    """A copy of a map of attribute names to wire-shaped values (an item, a key, an ``M``), or None."""
    if type(value) is not dict:
        return None
    members = {}
    for name, member in value.items():
        plain = plain_attribute_value(member) if type(name) is str and name else None
        if plain is None:
            return None
        members[name] = plain
    return members


def plain_attribute_value(value: Any) -> dict[str, Any] | None:
    """A copy of a wire-shaped attribute value, or None where moto's generic walk must decide."""
    if type(value) is not dict or len(value) != 1:
        return None
    ((kind, inner),) = value.items()
    scalar = _SCALARS.get(kind)
    if scalar is not None:
        return {kind: inner} if type(inner) is scalar else None
    if kind in _SETS:
        if type(inner) is list and all(type(v) is str for v in inner):
            return {kind: list(inner)}
        return None
    if kind == "M":
        members = plain_item(inner)
        return None if members is None else {"M": members}
    if kind == "L" and type(inner) is list:
        elements = []
        for element in inner:
            plain = plain_attribute_value(element)
            if plain is None:
                return None
            elements.append(plain)
        return {"L": elements}
    return None
