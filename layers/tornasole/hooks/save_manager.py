"""Deciding what to save: which collections are saved at a step, and what to write for a tensor.

The hook asks two questions on its hot path, both answered from caches:

* at a step boundary, :meth:`SaveManager.collections_for_step` (mode, mode step)
  -> the collections whose save config selects this step (an empty tuple on
  most steps, which is what keeps unsaved steps nearly free);
* per tensor, :meth:`SaveManager.plan` -> a :class:`WritePlan` (shape record,
  reductions in FORMAT.md 2.4 order, raw tensor) or ``None``.

Effective settings follow smdebug so files look the same: a collection without
its own save config gets the hook's (with its ``null`` modes), a partial one is
completed from the hook's; a collection without a reduction config gets the
hook's default (full tensor); ``losses`` and other scalar collections are always
saved raw, without reductions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from tornasole.core.collection import (
    NON_HISTOGRAM_COLLECTIONS,
    SCALAR_COLLECTIONS,
    Collection,
    CollectionKeys,
)
from tornasole.core.collection_manager import CollectionManager
from tornasole.core.reduction_config import ReductionConfig
from tornasole.core.save_config import SaveConfig, SaveConfigMode
from tornasole.modes import ModeKeys

__all__ = ["SaveManager", "WritePlan"]

_NO_GRADIENT_MODES = (ModeKeys.EVAL, ModeKeys.PREDICT)


@dataclass(frozen=True)
class WritePlan:
    """What to write for one tensor at one step."""

    save_shape: bool
    reductions: tuple[tuple[str, bool], ...]
    save_raw: bool
    # TensorBoard: the collection naming the histogram (None: no histogram), and whether a scalar summary
    # is wanted (the tensor is in a scalar collection such as ``losses``), as smdebug decides them.
    histogram_of: str | None = None
    scalar_summary: bool = False


class SaveManager:
    """Collection bookkeeping for one hook (see the module docstring)."""

    def __init__(
        self,
        collections: CollectionManager,
        *,
        save_config: SaveConfig,
        reduction_config: ReductionConfig,
        include_collections: Iterable[str],
    ) -> None:
        self.collections = collections
        self.save_config = save_config
        self.reduction_config = reduction_config
        self.include_collections: list[str] = list(dict.fromkeys(include_collections))
        self._prepared_count = -1
        self._generation = 0
        self._to_save: tuple[Collection, ...] = ()
        # per mode: [(SaveConfigMode, indices into _to_save)], collections grouped by identical settings
        self._groups: dict[ModeKeys, list[tuple[SaveConfigMode, tuple[int, ...]]]] = {}
        self._combos: dict[tuple[ModeKeys, tuple[bool, ...]], tuple[Collection, ...]] = {}
        self._tensor_cache: dict[str, tuple[Collection, ...]] = {}
        self._plan_cache: dict[tuple[str, tuple[Collection, ...]], WritePlan | None] = {}
        # a plan depends only on the collections (WritePlan is immutable): names sharing them share it
        self._plans_of: dict[tuple[Collection, ...], WritePlan] = {}

    def include(self, name: str) -> None:
        """Save collection ``name`` too (``save_tensor`` includes the collections it writes to)."""
        if name not in self.include_collections:
            self.include_collections.append(name)
            self._prepared_count = -1

    def prepare(self) -> None:
        """Resolve effective settings; cheap to call again (re-runs only when collections were added)."""
        if self._prepared_count == len(self.collections):
            return
        for name in self.include_collections:
            self.collections.get(name)  # built-ins such as ``outputs`` come with their regex
        save_all = CollectionKeys.ALL in self.include_collections
        for coll in self.collections:
            if coll.save_config is None:
                coll.save_config = self.save_config
            elif coll.save_config is not self.save_config:
                coll.save_config = coll.save_config.merged_with(self.save_config)
            if coll.name in SCALAR_COLLECTIONS:
                coll.reduction_config = ReductionConfig(save_raw_tensor=True)
                coll.save_histogram = False
            elif coll.reduction_config is None:
                coll.reduction_config = self.reduction_config
        self._to_save = tuple(c for c in self.collections if save_all or c.name in self.include_collections)
        self._prepared_count = len(self.collections)
        self._groups = {mode: self._group(mode) for mode in ModeKeys}
        self._generation += 1
        self._combos.clear()
        self._tensor_cache.clear()
        self._plan_cache.clear()
        self._plans_of.clear()

    @property
    def saved_collections(self) -> tuple[Collection, ...]:
        """The collections this hook saves (after :meth:`prepare`)."""
        self.prepare()
        return self._to_save

    @property
    def generation(self) -> int:
        """Changes whenever the effective save settings are rebuilt (a collection was added)."""
        return self._generation

    def next_saved_step(self, mode: ModeKeys, mode_step: int) -> float:
        """The first mode step ``>= mode_step`` at which any saved collection saves (``math.inf``: none),
        under the settings of the current :attr:`generation`."""
        self.prepare()
        settings = (cfg for cfg, _ in self._groups.get(mode, ()))
        return min((cfg.next_saved_step(mode_step) for cfg in settings), default=math.inf)

    def _group(self, mode: ModeKeys) -> list[tuple[SaveConfigMode, tuple[int, ...]]]:
        groups: dict[SaveConfigMode, list[int]] = {}
        for i, coll in enumerate(self._to_save):
            if mode in _NO_GRADIENT_MODES and coll.name == CollectionKeys.GRADIENTS:
                continue
            groups.setdefault(coll.save_config.get_save_config(mode), []).append(i)
        return [(cfg, tuple(idx)) for cfg, idx in groups.items()]

    def collections_for_step(self, mode: ModeKeys, mode_step: int) -> tuple[Collection, ...]:
        """Collections saved at ``mode_step`` of ``mode`` (gradients never in EVAL/PREDICT).

        Called on every step: one ``should_save_step`` per distinct save setting
        (usually one or two), then a cached tuple.
        """
        self.prepare()
        hits = tuple(cfg.should_save_step(mode_step) for cfg, _ in self._groups[mode])
        if not any(hits):
            return ()
        key = (mode, hits)
        colls = self._combos.get(key)
        if colls is None:
            wanted = sorted(i for hit, (_, idx) in zip(hits, self._groups[mode]) if hit for i in idx)
            colls = self._combos[key] = tuple(self._to_save[i] for i in wanted)
        return colls

    def collections_of(self, name: str) -> tuple[Collection, ...]:
        """Saved collections ``name`` belongs to; a regex match records the name in the collection."""
        self.prepare()
        cached = self._tensor_cache.get(name)
        if cached is None:
            found = []
            for coll in self._to_save:
                if name in coll.tensor_names:
                    found.append(coll)
                elif coll.matches_regex(name):
                    coll.add_tensor_name(name)
                    found.append(coll)
            cached = self._tensor_cache[name] = tuple(found)
        return cached

    def plan(self, name: str, step_collections: tuple[Collection, ...], mode: ModeKeys) -> WritePlan | None:
        """What to write for tensor ``name`` given the step's collections, or ``None`` to skip it."""
        if not step_collections:
            return None
        key = (name, step_collections)
        try:
            return self._plan_cache[key]
        except KeyError:
            pass
        colls = tuple(c for c in self.collections_of(name) if any(c is s for s in step_collections))
        plan = None
        if colls and not (mode in _NO_GRADIENT_MODES and name.startswith("gradient/")):
            plan = self._plans_of.get(colls)
            if plan is None:
                plan = self._plans_of[colls] = _make_plan(list(colls))
        self._plan_cache[key] = plan
        return plan

    def invalidate(self) -> None:
        """Forget cached decisions (after a collection was edited in place)."""
        self._prepared_count = -1


def _make_plan(colls: list[Collection]) -> WritePlan:
    reductions: list[tuple[str, bool]] = []
    for coll in colls:
        if coll.name in SCALAR_COLLECTIONS:
            continue
        rc = coll.reduction_config
        for item in [(r, False) for r in (*rc.reductions, *rc.norms)] + [
            (r, True) for r in (*rc.abs_reductions, *rc.abs_norms)
        ]:
            if item not in reductions:
                reductions.append(item)
    histogram_of = next(
        (c.name for c in colls if c.name not in NON_HISTOGRAM_COLLECTIONS and c.save_histogram), None
    )
    return WritePlan(
        save_shape=any(c.reduction_config.save_shape for c in colls),
        reductions=tuple(reductions),
        save_raw=any(c.reduction_config.save_raw_tensor for c in colls),
        histogram_of=histogram_of,
        scalar_summary=any(c.name in SCALAR_COLLECTIONS for c in colls),
    )
