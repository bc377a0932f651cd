"""The smdebug on-disk format (FORMAT.md): pure encoders/decoders plus one writer.

Floor plan: imported by trials, hooks, tensorboard, keras, rules and the evaluator; imports storage,
modes, safe_regex and exceptions only.

Submodules are imported on demand (``from tornasole.format import event_records``) so
that importing the package does no work. Only :mod:`tornasole.format.writer`
performs I/O, through :mod:`tornasole.storage`.
"""

from __future__ import annotations

__all__ = [
    "collections",
    "crc",
    "event_records",
    "index",
    "paths",
    "proto",
    "reductions",
    "tensors",
    "tfrecord",
    "writer",
]
