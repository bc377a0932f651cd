"""Tensor and collection queries of a Trial: names by step / mode / regex / collection, Tensor objects.

The collection test is :meth:`Collection.matches` (exact name or
``include_regex`` found anywhere in the name), applied to the tensors actually
saved, as smdebug's ``tensor_names(collection=...)`` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tornasole.core.collection import Collection
from tornasole.exceptions import TensorUnavailable
from tornasole.modes import GLOBAL, ModeKeys
from tornasole.trials.tensor import Tensor, ValueSource
from tornasole.trials.tensor_name import TensorName

if TYPE_CHECKING:
    from tornasole.trials.loading import IndexLoader
    from tornasole.trials.step_index import StepTable

__all__ = ["TensorQueries"]


class TensorQueries:
    """Mixin over ``self._table``, ``self._loader`` and ``self.maybe_refresh()``."""

    name: str
    _table: StepTable
    _loader: IndexLoader
    _tensors: dict[str, Tensor]
    _created_collections: dict[str, Collection]  # by collection() for names the collections file lacks
    _reader: ValueSource

    def maybe_refresh(self, name: str | None = None) -> None:  # pragma: no cover - provided by Trial
        raise NotImplementedError

    def tensor_names(
        self,
        step: int | None = None,
        mode: ModeKeys = GLOBAL,
        regex: str | Sequence[str] | None = None,
        collection: Any = None,
        *,
        show_prefixed_tensors: bool = False,
    ) -> list[str]:
        """Names of saved tensors, optionally at one step, matching regexes or in a collection.

        ``step`` is a ``mode`` step (a global step for GLOBAL); ``regex`` is one
        pattern or a list (``re.search``); ``collection`` a name or a Collection.
        ``show_prefixed_tensors`` is accepted for smdebug compatibility.

        Examples
        --------
        >>> trial.tensor_names(step=2, mode=modes.EVAL)  # doctest: +SKIP
        ['CrossEntropyLoss_output_0', 'Net_fc1.bias', ...]
        >>> trial.tensor_names(collection="weights")  # doctest: +SKIP
        ['Net_fc1.weight', 'Net_fc2.weight']
        """
        if regex is not None and collection is not None:
            raise ValueError("Only one of `regex` or `collection` can be passed to tensor_names")
        self.maybe_refresh()
        mode = GLOBAL if mode is None else mode
        if step is None:
            names = self._table.tensor_names() if mode == GLOBAL else self._table.mode_tensor_names(mode)
        else:
            g = self._table.global_step(mode, step)
            names = self._table.step_tensor_names(g) if g is not None else set()
        if regex is not None:
            patterns = [regex] if isinstance(regex, str) else _flatten(regex)
            names = {n for n in names if any(re.search(p, n) for p in patterns)}
        if collection is not None:
            coll = self.collection(collection)
            names = {n for n in names if coll.matches(n)}
        return sorted(names)

    def saved_order(self, step: int) -> list[str]:
        """Names of the tensors saved at global ``step``, in the order they were written (their records'
        offsets in the first worker's event file); tensors saved as reductions only count at their first
        reduction. Why: a hook writes a module's input or output as the forward pass reaches it, so the order
        says which layer ran last before the loss (the output layer), which no name can say.

        Examples
        --------
        >>> trial.saved_order(0)  # doctest: +SKIP
        ['fc1_sigmoid_input_0', 'out_sigmoid_input_0', 'BCELoss_output_0', 'gradient/Net_out.weight', ...]
        """
        from tornasole.trials.step_index import LOC_PATH, LOC_START, entry_locations

        self.maybe_refresh()
        with self._table.lock:
            rec = self._table.record(step)
            if rec is None or not rec.workers:
                return []
            tensors = rec.workers[sorted(rec.workers)[0]]
            keyed = []
            for name, entry in tensors.items():
                locs = entry_locations(entry)
                if locs:
                    keyed.append((locs[0][LOC_PATH], locs[0][LOC_START], name))
        return [name for _, _, name in sorted(keyed)]

    def tensor(self, name: str) -> Tensor:
        """The :class:`Tensor` called ``name``; :class:`TensorUnavailable` if it was never saved.

        Examples
        --------
        >>> trial.tensor("CrossEntropyLoss_output_0").value(5)  # doctest: +SKIP
        array(1.0572, dtype=float32)
        """
        t = self._tensors.get(name)  # a tensor handed out once stays valid: no check, no refresh
        if t is not None:
            return t
        if not self.has_tensor(name):
            raise TensorUnavailable(name)
        t = Tensor(name, self, self._table, self._reader, self.maybe_refresh)
        return self._tensors.setdefault(name, t)

    def has_tensor(self, name: str) -> bool:
        if not self._table.has_tensor(name):
            self.maybe_refresh()
        return self._table.has_tensor(name)

    def collections(self) -> dict[str, Collection]:
        """Collection name -> :class:`~tornasole.core.collection.Collection` (first collections file,
        and the ones :meth:`collection` made for names it does not have)."""
        if self._loader.collections is None:
            self.maybe_refresh()
        return {**self._created_collections, **(self._loader.collections or {})}

    def collection(self, name: Any) -> Collection:
        """One collection, by name or by a Collection object.

        A name the collections file does not have gets a new, empty collection, kept by the trial (as
        smdebug's ``collection_manager.get`` creates it): it matches no tensor, and it gives way to the
        file's collection of that name once a live run writes one.
        """
        key = getattr(name, "name", name)
        if not isinstance(key, str) or not key:
            raise TypeError(f"trial {self.name}: a collection is named by a non-empty string, not {key!r}")
        colls = self.collections()
        if key in colls:
            return colls[key]
        return self._created_collections.setdefault(key, Collection(key))

    # older names
    def tensors(self, *args: Any, **kwargs: Any) -> list[str]:
        return self.tensor_names(*args, **kwargs)

    def tensors_matching_regex(self, patterns: str | Sequence[str]) -> list[str]:
        return self.tensor_names(regex=patterns)

    def tensors_in_collection(self, collection: Any) -> list[TensorName]:
        """Names of the saved tensors of ``collection``; each also works as its Tensor (``TensorName``)."""
        return [TensorName(n, self) for n in self.tensor_names(collection=collection)]


def _flatten(items: Iterable[Any]) -> list[str]:
    out: list[str] = []
    for item in items:
        out.extend(_flatten(item) if isinstance(item, (list, tuple, set)) else [item])
    return out
