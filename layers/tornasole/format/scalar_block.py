"""A step's block of float32 scalars, encoded from a template: statistics mode's few hundred records a step.

Statistics mode saves the same tags every step (six statistics of each weight
and gradient, the loss, the totals), one 0-d float32 value each, all with the
step's wall time. Of each record's bytes only three parts change from one step
to the next: the ``Event``'s wall time and step, the four bytes of the value,
and the mode metadata. So the records of a tag list are laid out once (a
:class:`ScalarBlockLayout`: the bytes with those parts blank, their offsets,
the index entries and their JSON) and each step fills the blanks with three
numpy scatters instead of encoding each record (~0.8 us each) and formatting
each index entry.

The bytes equal :func:`tornasole.format.event_encoding.numeric_records`' for
the same tags and 0-d float32 values (tests compare them); a layout depends on
the tags, the lengths of the step's head and metadata, and the block's offset
in its event file.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tornasole.format.crc import masked_crc32c
from tornasole.format.event_encoding import _FOOTER, _HEADER, _LEN, _body, _head, _metadata
from tornasole.format.index import IndexEntry, index_entry, tensor_payload

__all__ = ["ScalarBlockLayout", "layout", "encode_block"]

_FLOAT32 = np.dtype(np.float32)
_LAYOUTS_LIMIT = 16  # a hook has one tag list (a few with activations that come and go)
_layouts: dict[tuple[tuple[str, ...], int, int, int], ScalarBlockLayout] = {}
_lock = threading.Lock()  # the writer threads of several hooks may share the cache


@dataclass(frozen=True, eq=False)
class ScalarBlockLayout:
    """The event-file bytes of a tag list with the step's parts blank, and where those parts go."""

    template: np.ndarray  # uint8: every record, blanks zero
    head_at: np.ndarray  # [records, head length] byte positions of each record's wall time and step
    value_at: np.ndarray  # [records, 4] positions of each record's float32 value
    metadata_at: np.ndarray  # [records, metadata length] positions of each record's mode metadata
    entries: tuple[IndexEntry, ...]  # the index entries (offsets in the event file)
    payload: str  # their JSON, as encode_index writes it
    payload_bytes: bytes  # the same, encoded (what the index file holds)

    def fill(self, head: bytes, values: np.ndarray, metadata: bytes) -> bytes:
        """The block's bytes for a step's head, values (float32, one per record) and metadata."""
        buf = self.template.copy()
        buf[self.head_at] = np.frombuffer(head, dtype=np.uint8)
        buf[self.value_at] = values.astype("<f4", copy=False).view(np.uint8).reshape(-1, 4)
        buf[self.metadata_at] = np.frombuffer(metadata, dtype=np.uint8)
        return buf.tobytes()


def layout(tags: Sequence[str], head_size: int, metadata_size: int, offset: int) -> ScalarBlockLayout:
    """The layout of ``tags``' records at ``offset`` of an event file (built once, then cached)."""
    key = (tuple(tags), head_size, metadata_size, offset)
    found = _layouts.get(key)
    if found is not None:
        return found
    records, heads, values, metas, entries = [], [], [], [], []
    pos = 0
    for tag in key[0]:
        body, body_size = _body(tag, _FLOAT32, (), metadata_size - 2)
        size = head_size + body_size
        header = _HEADER.pack(size, masked_crc32c(_LEN.pack(size)))
        record = b"".join((header, bytes(head_size), body, bytes(4), bytes(metadata_size), _FOOTER))
        at = pos + len(header)
        heads.append(at)
        values.append(at + head_size + len(body))
        metas.append(at + head_size + len(body) + 4)
        entries.append(index_entry(tag, offset + pos, len(record)))
        records.append(record)
        pos += len(record)
    template = np.frombuffer(b"".join(records), dtype=np.uint8).copy()
    payload = tensor_payload(entries)
    found = ScalarBlockLayout(
        template=template,
        head_at=np.asarray(heads, dtype=np.intp)[:, None] + np.arange(head_size),
        value_at=np.asarray(values, dtype=np.intp)[:, None] + np.arange(4),
        metadata_at=np.asarray(metas, dtype=np.intp)[:, None] + np.arange(metadata_size),
        entries=tuple(entries),
        payload=payload,
        payload_bytes=payload.encode(),
    )
    with _lock:
        if len(_layouts) >= _LAYOUTS_LIMIT:
            _layouts.clear()
        _layouts[key] = found
    return found


def encode_block(
    tags: Sequence[str],
    values: np.ndarray,
    *,
    step: int,
    mode_value: int,
    mode_step: int,
    wall_time: float,
    offset: int,
) -> tuple[bytes, ScalarBlockLayout] | None:
    """The records of ``tags`` with ``values`` (one float32 each) at ``offset``, and their layout.

    ``None`` where the per-record encoder must be used: a negative step, a zero wall time (as
    :func:`~tornasole.format.event_encoding.numeric_record`), or values that are not one float32
    per tag.
    """
    if step < 0 or not wall_time or values.dtype != _FLOAT32 or values.shape != (len(tags),):
        return None
    head = _head(wall_time, step)
    metadata = _metadata(mode_step, mode_value)
    block = layout(tags, len(head), len(metadata), offset)
    return block.fill(head, values, metadata), block
