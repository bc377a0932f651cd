"""Data-loader wait for the profiler: how long each ``next()`` on a PyTorch ``DataLoader`` iterator took.

PyTorch has no callback for it, so, as smdebug does, the iterator base class's ``__next__`` is wrapped; the
wrapper is installed while at least one profiling hook listens and removed when the last one closes, and
it only reads the clock around the original call (no graph is traced through it: data loading runs
outside ``torch.compile``'s regions).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from torch.utils.data import dataloader

from tornasole.profiler.format import trace_events
from tornasole.profiler.sampling.steps import now_us

__all__ = ["listen_to_dataloaders", "stop_listening"]

_listeners: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()
_original: Any = None


def _timed_next(self: Any) -> Any:
    start = now_us()
    try:
        return _original(self)
    finally:
        for hook in list(_listeners):
            hook._profile_phase(trace_events.DATALOADER, trace_events.DATALOADER, start, in_step=False)


def listen_to_dataloaders(hook: Any) -> None:
    """Have ``hook._profile_phase`` called for every batch any DataLoader yields from now on."""
    global _original
    with _lock:
        _listeners.add(hook)
        if _original is None:
            _original = dataloader._BaseDataLoaderIter.__next__
            dataloader._BaseDataLoaderIter.__next__ = _timed_next


def stop_listening(hook: Any) -> None:
    """Forget ``hook``; the last listener gone, DataLoader iterators are PyTorch's own again."""
    global _original
    with _lock:
        _listeners.discard(hook)
        if not _listeners and _original is not None:
            dataloader._BaseDataLoaderIter.__next__ = _original
            _original = None
