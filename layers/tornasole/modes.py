"""Training modes, with the values smdebug writes on disk.

The enum value is what an event record's ``mode`` plugin entry holds
(``"1"`` for TRAIN ...); the name is what an index file's ``meta.mode`` holds.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["ModeKeys", "TRAIN", "EVAL", "PREDICT", "GLOBAL", "ALLOWED_MODES", "ALLOWED_MODE_NAMES"]


class ModeKeys(Enum):
    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4

    @classmethod
    def from_name(cls, name: str) -> ModeKeys:
        """Parse an index file's mode name (``"TRAIN"``); also accepts ``"ModeKeys.TRAIN"``."""
        key = str(name).rsplit(".", 1)[-1].upper()
        try:
            return cls[key]
        except KeyError:
            raise ValueError(f"unknown mode {name!r}; expected one of {[m.name for m in cls]}") from None

    @classmethod
    def from_value(cls, value: int | str) -> ModeKeys:
        """Parse an event record's ``mode`` plugin content (``"1"``)."""
        try:
            return cls(int(value))
        except (ValueError, TypeError):
            raise ValueError(f"unknown mode value {value!r}; expected 1..4") from None


TRAIN = ModeKeys.TRAIN
EVAL = ModeKeys.EVAL
PREDICT = ModeKeys.PREDICT
GLOBAL = ModeKeys.GLOBAL
ALLOWED_MODES = [TRAIN, EVAL, PREDICT, GLOBAL]
ALLOWED_MODE_NAMES = [m.name for m in ALLOWED_MODES]
