"""The rest of smdebug's public hook API, for scripts and framework forks written against it.

Kept apart from :mod:`tornasole.hooks.numpy_hook` (the saving model) because these
are thin questions and conveniences over the same state: which collections are
saved, whether the configuration is the default one, adding a framework
variable to a collection, writing the collections file now.
"""

from __future__ import annotations

from typing import Any

from tornasole.core.collection import CollectionKeys
from tornasole.modes import ModeKeys

__all__ = ["SmdebugHookMethods", "DEFAULT_SAVED_COLLECTIONS"]

# What a hook saves when nobody configured anything (smdebug's default for PyTorch and the core hook).
DEFAULT_SAVED_COLLECTIONS = (CollectionKeys.LOSSES,)


class SmdebugHookMethods:
    """Mixin for :class:`tornasole.hooks.Hook` (uses its ``_saves``, ``collection_manager``, step state)."""

    @property
    def include_collections(self) -> list[str]:
        """Names of the collections this hook saves (besides every collection, with ``save_all``)."""
        return list(self._saves.include_collections)

    def _saved_collection_names(self) -> set[str]:
        self._saves.prepare()
        return {c.name for c in self._saves._to_save}

    def has_default_hook_configuration(
        self, default_saved_collections: Any = DEFAULT_SAVED_COLLECTIONS
    ) -> bool:
        """Whether the hook saves exactly the default collections (framework forks skip work then)."""
        return self._saved_collection_names() == set(default_saved_collections)

    def has_default_configuration(self) -> bool:
        """smdebug's name: the default collections and the profiler off (framework forks skip work then)."""
        return self.has_default_hook_configuration() and getattr(self, "profiler_config", None) is None

    def should_save_tensor_or_collection(self, tensor_name: str, collection_name: str) -> bool:
        """Whether ``tensor_name`` (a member of ``collection_name``) would be saved at the current step."""
        if self._closed:
            return False
        colls = self._current_step_colls()
        coll = self.collection_manager.collections.get(collection_name)
        if coll is not None and any(c is coll for c in colls):
            if self.mode in (ModeKeys.EVAL, ModeKeys.PREDICT) and collection_name == CollectionKeys.GRADIENTS:
                return False
            return not coll.include_regex or coll.matches(tensor_name)
        return self._saves.plan(tensor_name, colls, self.mode) is not None

    def add_to_collection(self, collection_name: str, variable: Any) -> None:
        """Make ``variable`` (a tensor name, or anything with a ``name``) a member of ``collection_name``."""
        name = variable if isinstance(variable, str) else getattr(variable, "name", None)
        if not isinstance(name, str) or not name:
            raise TypeError(f"add_to_collection: {variable!r} has no tensor name")
        self.get_collection(collection_name).add_tensor_name(name)

    def export_collections(self) -> None:
        """Write this worker's collections file now (``close`` does it anyway after the first saved step)."""
        if self._closed or not self._is_writer():
            return
        self._submit_collections()
        self.flush()

    def _get_worker_name(self) -> str:
        """smdebug's private name for :attr:`worker` (``worker_<rank>``), which its distributed tests call."""
        return self.worker

    def _get_num_workers(self) -> int:
        """smdebug's private name for the world size, whoever writes (:attr:`num_workers` counts writers)."""
        return self._worker_info().world_size

    def _cleanup(self) -> None:
        """smdebug's private name for ``close()``, which its examples and tests call."""
        self.close()

    def __repr__(self) -> str:
        return (
            f"<{type(self).__module__}.{type(self).__qualname__}: out_dir={self.out_dir!r}, "
            f"tensorboard_dir={getattr(self, 'tensorboard_dir', None)!r}, step={self.step}, "
            f"mode={self.mode.name}, include_collections={self.include_collections}>"
        )
