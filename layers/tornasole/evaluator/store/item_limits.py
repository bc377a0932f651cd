"""The service limits the evaluator must stay within, enforced here because moto does not.

Why enforce them ourselves: DynamoDB rejects an item over 400 KB and a
transaction over 4 MB, EventBridge an entry over 256 KiB. moto accepts all
three, so a test suite on moto would never see the failure that, in AWS, makes
a whole step's transaction fail (every rule's result lost) or an event
unpublishable. Every write goes through ``check_item`` and every event entry
through ``event_entry_bytes``; what a rule produces is capped before it is
written (``cap_values``), so one rule's oversized report costs only its own
values, never the other rules' records.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from tornasole.exceptions import TornasoleValueError

__all__ = [
    "DYNAMODB_ITEM_BYTES",
    "DYNAMODB_TRANSACTION_BYTES",
    "EVENTBRIDGE_ENTRY_BYTES",
    "MAX_VALUES_BYTES",
    "ItemTooLarge",
    "attr_bytes",
    "cap_values",
    "check_item",
    "item_bytes",
]

DYNAMODB_ITEM_BYTES = 400 * 1024
DYNAMODB_TRANSACTION_BYTES = 4 * 1024 * 1024
EVENTBRIDGE_ENTRY_BYTES = 256 * 1024
#: A rule's values (its report at one step), as JSON; over this they are replaced by a preview.
MAX_VALUES_BYTES = 16 * 1024
VALUES_PREVIEW_CHARS = 1024


class ItemTooLarge(TornasoleValueError):
    """An item (or a transaction) would exceed DynamoDB's size limit."""


def attr_bytes(value: dict[str, Any]) -> int:
    """The size DynamoDB counts for one typed attribute value (``{"S": ...}``, ``{"M": ...}`` ...)."""
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode("utf-8", "surrogatepass"))
    if kind == "N":
        digits = len(str(v).lstrip("-").replace(".", "").lstrip("0")) or 1
        return (digits + 1) // 2 + 1
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(x.encode("utf-8", "surrogatepass")) for x in v)
    if kind == "NS":
        return sum(attr_bytes({"N": x}) for x in v)
    if kind == "BS":
        return sum(len(x) for x in v)
    if kind == "L":
        return 3 + sum(1 + attr_bytes(x) for x in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8", "surrogatepass")) + attr_bytes(x) for k, x in v.items())
    raise ValueError(f"unknown DynamoDB attribute type {kind!r}")


def item_bytes(attrs: dict[str, Any]) -> int:
    """DynamoDB's size of a typed item: attribute names plus values."""
    return sum(len(k.encode("utf-8", "surrogatepass")) + attr_bytes(v) for k, v in attrs.items())


def check_item(attrs: dict[str, Any], what: str) -> int:
    """``item_bytes(attrs)``; ``ItemTooLarge`` naming ``what`` when over DynamoDB's 400 KB."""
    size = item_bytes(attrs)
    if size > DYNAMODB_ITEM_BYTES:
        raise ItemTooLarge(
            f"{what}: item of {size} bytes exceeds DynamoDB's {DYNAMODB_ITEM_BYTES}-byte limit"
        )
    return size


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    return str(value)


def cap_values(values: dict[str, Any], limit: int = MAX_VALUES_BYTES) -> str:
    """A rule's values as JSON of at most ``limit`` bytes: as they are, or a marked preview.

    Anything JSON cannot take (objects, NaN-free numpy scalars ...) is written with ``str``;
    values that cannot be serialised at all (cycles, nesting beyond the recursion limit) are
    replaced by a note saying so.
    """
    try:
        text = json.dumps(values, sort_keys=True, default=_plain)
    except (ValueError, TypeError, RecursionError) as exc:
        return json.dumps({"values_unavailable": f"{type(exc).__name__}: {str(exc)[:200]}"})
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return text
    return json.dumps(
        {"values_truncated": True, "values_bytes": size, "preview": text[:VALUES_PREVIEW_CHARS]}
    )
