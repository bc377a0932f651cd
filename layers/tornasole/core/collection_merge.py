"""Merge duplicate ``CollectionConfigurations`` entries as the UNION of what each asks to save.

Why: the SageMaker SDK puts the rules' collections (``save_interval: 500``) and
the user's own into one list, so the same ``CollectionName`` appears several
times, in an order that changes from run to run. "Last wins" then silently
drops either the user's steps or the steps a rule needs (a rule saw loss only
at step 0 and reported ``NoIssuesFound`` on a NaN loss). Merging keeps every
requested step, whatever the order.

A mode's save settings save ``save_steps`` plus every ``save_interval``-th step
in ``[start_step, end_step)``. A union of such settings is usually one of them
again: one progression covers the others (``interval 1`` covers ``interval
500``), and finite ones it does not cover become explicit ``save_steps``. When
no single progression can hold the union exactly, the result is the smallest
progression that holds it (the greatest common divisor of the intervals over
the widest range): every requested step is saved, and a few more.

Pure functions over the request's string maps; the registration and the hook
read the same result.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tornasole.exceptions import ConfigurationError

__all__ = ["MODES", "SAVE_KEYS", "SaveRange", "merge_collection_configurations", "union_of_ranges"]

MODES = ("train", "eval", "predict", "global")
SAVE_KEYS = ("save_interval", "start_step", "end_step", "save_steps")
_LIST_KEYS = ("include_regex", "reductions")
_FLAG_KEYS = ("save_raw_tensor", "save_shape", "save_histogram")
_DEFAULT_INTERVAL = 500
#: A finite progression a wider one does not cover is written out as steps up to this many.
MAX_ENUMERATED_STEPS = 1000


@dataclass(frozen=True)
class SaveRange:
    """One mode's save settings: ``steps`` plus every ``interval``-th step in ``[start, end)``."""

    interval: int = _DEFAULT_INTERVAL
    start: int = 0
    end: int | None = None
    steps: tuple[int, ...] = ()

    def saves(self, step: int) -> bool:
        if step in self.steps:
            return True
        return self.start <= step and (self.end is None or step < self.end) and step % self.interval == 0

    def _first(self) -> int:
        return -(-self.start // self.interval) * self.interval

    def _points(self) -> range:
        """The progression's steps (finite ranges only)."""
        assert self.end is not None
        return range(self._first(), self.end, self.interval)

    def _covers(self, other: SaveRange) -> bool:
        """Every step of ``other``'s progression is one of ours (explicit steps aside)."""
        if other.end is not None and other._first() >= other.end:
            return True  # empty progression
        if other.interval % self.interval or other._first() < self.start:
            return False
        if self.end is None:
            return True
        return other.end is not None and other._points()[-1] < self.end


def union_of_ranges(ranges: Iterable[SaveRange]) -> tuple[SaveRange, bool]:
    """One ``SaveRange`` saving every step any of ``ranges`` saves; ``(range, exact)``.

    Examples
    --------
    >>> union_of_ranges([SaveRange(500), SaveRange(1)])
    (SaveRange(interval=1, start=0, end=None, steps=()), True)
    >>> union_of_ranges([SaveRange(10), SaveRange(5, 0, 12)])[0].steps
    (5,)
    """
    ranges = sorted(set(ranges), key=lambda r: (r.interval, r.start, -1 if r.end is None else r.end))
    steps = {s for r in ranges for s in r.steps}
    for base in ranges:
        extra: set[int] = set()
        for other in ranges:
            if other is base or base._covers(other):
                continue
            if other.end is None or len(other._points()) > MAX_ENUMERATED_STEPS:
                break
            extra.update(other._points())
        else:
            kept = sorted(s for s in steps | extra if not _on_progression(base, s))
            return SaveRange(base.interval, base.start, base.end, tuple(kept)), True
    interval = math.gcd(*(r.interval for r in ranges))
    start = min(r.start for r in ranges)
    end = None if any(r.end is None for r in ranges) else max(r.end for r in ranges if r.end is not None)
    widest = SaveRange(interval, start, end)
    return SaveRange(interval, start, end, tuple(sorted(s for s in steps if not widest.saves(s)))), False


def _on_progression(r: SaveRange, step: int) -> bool:
    return r.start <= step and (r.end is None or step < r.end) and step % r.interval == 0


def _parse_mode_keys(params: Mapping[str, Any]) -> dict[str | None, dict[str, str]]:
    """``{None: common save keys, "train": train.* keys, ...}`` as given (strings)."""
    out: dict[str | None, dict[str, str]] = {}
    for key, value in params.items():
        mode, _, bare = key.rpartition(".")
        if bare in SAVE_KEYS and (mode == "" or mode in MODES):
            out.setdefault(mode or None, {})[bare] = str(value)
    return out


def _int(where: str, key: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ConfigurationError(f"{where}: {key}={text!r} is not an integer") from None


def _range(where: str, settings: Mapping[str, str]) -> SaveRange:
    def num(key: str, default: int | None) -> int | None:
        text = str(settings.get(key, "")).strip()
        return default if text in ("", "None", "none", "null") else _int(where, key, text)

    listed = str(settings.get("save_steps", "")).split(",")
    steps = {_int(where, "save_steps", s) for s in listed if s.strip()}
    interval = num("save_interval", _DEFAULT_INTERVAL)
    if interval is None or interval <= 0:
        raise ConfigurationError(f"{where}: save_interval must be a positive integer")
    return SaveRange(interval, num("start_step", 0) or 0, num("end_step", None), tuple(sorted(steps)))


def _mode_ranges(
    where: str, params: Mapping[str, Any], hook: dict[str | None, dict[str, str]]
) -> dict[str, SaveRange]:
    """Each mode's effective save settings for one entry, the hook's settings filling the gaps."""
    own = _parse_mode_keys(params)
    return {
        m: _range(
            f"{where} ({m})", {**hook.get(None, {}), **hook.get(m, {}), **own.get(None, {}), **own.get(m, {})}
        )
        for m in MODES
    }


def _merge_other(values: list[Any], key: str) -> str:
    texts = [str(v) for v in values]
    if key in _LIST_KEYS:
        items = {p.strip() for t in texts for p in t.split(",") if p.strip()}
        return ",".join(sorted(items))
    if key in _FLAG_KEYS:
        return "true" if any(t.strip().lower() in ("true", "1", "yes") for t in texts) else "false"
    return min(texts)  # order-independent choice for keys with no union


def _save_params(ranges: dict[str, SaveRange]) -> dict[str, str]:
    def keys(prefix: str, r: SaveRange) -> dict[str, str]:
        out = {f"{prefix}save_interval": str(r.interval), f"{prefix}start_step": str(r.start)}
        if r.end is not None:
            out[f"{prefix}end_step"] = str(r.end)
        out[f"{prefix}save_steps"] = ",".join(str(s) for s in r.steps)
        return out

    if len(set(ranges.values())) == 1:
        return keys("", next(iter(ranges.values())))
    return {k: v for m in MODES for k, v in keys(f"{m}.", ranges[m]).items()}


def merge_collection_configurations(
    entries: Iterable[Mapping[str, Any]], hook_parameters: Mapping[str, Any] | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Entries with one ``CollectionName`` each; ``(merged entries, names merged inexactly)``.

    A name given once is kept as given. Entries sharing a name become one entry
    whose save settings are the union (per mode, the hook's ``HookParameters``
    filling what an entry leaves out) and whose other parameters are merged
    (regex and reduction lists united, flags or-ed). Names keep their first
    position. A save setting that is not an integer raises ``ConfigurationError``
    naming the collection, mode and key.

    Examples
    --------
    >>> merged, _ = merge_collection_configurations([
    ...     {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}},
    ...     {"CollectionName": "losses", "CollectionParameters": {"save_interval": "1"}}])
    >>> merged[0]["CollectionParameters"]["save_interval"]
    '1'
    """
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        groups.setdefault(str(entry.get("CollectionName")), []).append(entry)
    hook = _parse_mode_keys(hook_parameters or {})
    merged: list[dict[str, Any]] = []
    inexact: list[str] = []
    for name, group in groups.items():
        if len(group) == 1:
            merged.append(dict(group[0]))
            continue
        all_params = [dict(e.get("CollectionParameters") or {}) for e in group]
        per_mode = [_mode_ranges(f"collection {name!r}", p, hook) for p in all_params]
        ranges: dict[str, SaveRange] = {}
        for m in MODES:
            ranges[m], exact = union_of_ranges(r[m] for r in per_mode)
            if not exact and name not in inexact:
                inexact.append(name)
        others: dict[str, list[Any]] = {}
        for p in all_params:
            for k, v in p.items():
                if k.rpartition(".")[2] not in SAVE_KEYS:
                    others.setdefault(k, []).append(v)
        params = {k: _merge_other(v, k) for k, v in sorted(others.items())}
        params.update(_save_params(ranges))
        merged.append({"CollectionName": name, "CollectionParameters": params})
    return merged, inexact
