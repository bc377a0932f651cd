"""When to save: per-mode save intervals, explicit steps and step ranges.

The JSON shape is the ``save_config`` object of a collections file
(FORMAT.md 4): a dict keyed by all four mode names, each value either ``null``
(mode not configured) or ``{"save_interval", "save_steps", "start_step",
"end_step"}`` in that key order. A mode left ``null`` is saved with the
defaults (interval 500), as smdebug's hook does after merging with its own
default config, but stays ``null`` on disk so files round-trip byte for byte.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from tornasole.exceptions import ConfigurationError
from tornasole.modes import ModeKeys

__all__ = ["SaveConfig", "SaveConfigMode", "DEFAULT_SAVE_INTERVAL"]

DEFAULT_SAVE_INTERVAL = 500


def _as_int(field: str, value: Any, *, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool):
        raise ConfigurationError(f"SaveConfig: {field}={value!r} must be an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"SaveConfig: {field}={value!r} must be an integer") from None


def _as_mode(key: Any) -> ModeKeys:
    if isinstance(key, ModeKeys):
        return key
    try:
        return ModeKeys.from_name(str(key))
    except ValueError as exc:
        raise ConfigurationError(f"SaveConfig: unknown mode {key!r} in mode_save_configs") from exc


def _loads(what: str, json_str: str) -> Any:
    try:
        return json.loads(json_str)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{what}.from_json: not valid JSON: {exc}") from exc


class SaveConfigMode:
    """One mode's settings: every ``save_interval`` steps in ``[start_step, end_step)``, and ``save_steps``.

    Parameters
    ----------
    save_interval : int
        Save when ``mode_step % save_interval == 0`` (within the range).
    start_step, end_step : int, optional
        Half-open range of mode steps where the interval applies.
    save_steps : list of int, optional
        Mode steps always saved, whatever the interval and range.

    Examples
    --------
    >>> SaveConfigMode(save_interval=10, start_step=5).should_save_step(10)
    True
    >>> SaveConfigMode(save_steps=[3]).should_save_step(3)
    True
    """

    __slots__ = ("save_interval", "start_step", "end_step", "save_steps", "_alternatives")

    def __init__(
        self,
        save_interval: int = DEFAULT_SAVE_INTERVAL,
        start_step: int = 0,
        end_step: int | None = None,
        save_steps: Iterable[int] | None = None,
    ) -> None:
        self.save_interval = _as_int(
            "save_interval", DEFAULT_SAVE_INTERVAL if save_interval is None else save_interval
        )
        if self.save_interval <= 0:
            raise ConfigurationError(
                f"SaveConfig: save_interval={save_interval!r} must be a positive integer"
            )
        self.start_step = _as_int("start_step", 0 if start_step is None else start_step)
        self.end_step = _as_int("end_step", end_step, allow_none=True)
        if isinstance(save_steps, str):
            save_steps = [s for s in save_steps.split(",") if s.strip()]
        self.save_steps = [_as_int("save_steps", s) for s in (save_steps or [])]
        # Other settings whose steps are saved too (see union()); not part of the JSON shape.
        self._alternatives: tuple[SaveConfigMode, ...] = ()

    def should_save_step(self, mode_step: int) -> bool:
        """Whether ``mode_step`` is saved under this mode's settings."""
        if self.save_steps and mode_step in self.save_steps:
            return True
        if self._alternatives and any(a.should_save_step(mode_step) for a in self._alternatives):
            return True
        if mode_step < self.start_step or (self.end_step is not None and mode_step >= self.end_step):
            return False
        return mode_step % self.save_interval == 0

    def next_saved_step(self, mode_step: int) -> float:
        """The first mode step ``>= mode_step`` that :meth:`should_save_step` accepts (``math.inf``: none).

        Lets a hook whose steps are short (XGBoost rounds) skip the idle steps in between
        instead of asking every step.

        Examples
        --------
        >>> SaveConfigMode(save_interval=100, start_step=5).next_saved_step(7)
        100
        >>> SaveConfigMode(save_interval=10, end_step=30, save_steps=[42]).next_saved_step(31)
        42
        """
        best: float = min((s for s in self.save_steps if s >= mode_step), default=math.inf)
        for other in self._alternatives:
            best = min(best, other.next_saved_step(mode_step))
        first = max(mode_step, self.start_step)
        first += -first % self.save_interval
        if self.end_step is None or first < self.end_step:
            best = min(best, first)
        return best

    @classmethod
    def union(cls, *configs: SaveConfigMode) -> SaveConfigMode:
        """Settings that save every step any of ``configs`` saves, and no other.

        Why: SageMaker's SDK sends the same collection twice when a rule and the
        user both configure it (e.g. ``losses`` every 500 steps for the rule,
        every 10 for the user); keeping only one would lose the other's steps.
        When one interval divides the others over the same range the result is
        plain (``save_interval`` 10 plus both ``save_steps``); otherwise the
        densest settings are what the JSON shows and the others are kept as
        alternatives that :meth:`should_save_step` also honours.

        Examples
        --------
        >>> SaveConfigMode.union(SaveConfigMode(500), SaveConfigMode(10, save_steps=[3]))
        SaveConfigMode(save_interval=10, start_step=0, end_step=None, save_steps=[3])
        >>> u = SaveConfigMode.union(SaveConfigMode(4), SaveConfigMode(6))
        >>> [s for s in range(13) if u.should_save_step(s)]
        [0, 4, 6, 8, 12]
        """
        members: list[SaveConfigMode] = []
        for c in configs:
            for m in (c, *c._alternatives):
                plain = SaveConfigMode(m.save_interval, m.start_step, m.end_step, m.save_steps)
                if plain not in members:
                    members.append(plain)
        if not members:
            raise ConfigurationError("SaveConfigMode.union needs at least one SaveConfigMode")
        steps = sorted({s for m in members for s in m.save_steps})
        primary = min(members, key=lambda m: m.save_interval)
        others = [m for m in members if m is not primary]
        out = cls(primary.save_interval, primary.start_step, primary.end_step, steps)
        out._alternatives = tuple(
            m
            for m in others
            if not (
                (m.start_step, m.end_step) == (primary.start_step, primary.end_step)
                and m.save_interval % primary.save_interval == 0
            )
        )
        return out

    def to_json_dict(self) -> dict[str, Any]:
        """The per-mode object of a collections file (key order as smdebug writes it)."""
        return {
            "save_interval": self.save_interval,
            "save_steps": list(self.save_steps),
            "start_step": self.start_step,
            "end_step": self.end_step,
        }

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any] | None) -> SaveConfigMode | None:
        """Inverse of :meth:`to_json_dict`; ``None`` stays ``None``; missing keys take the defaults."""
        if d is None:
            return None
        if not isinstance(d, Mapping):
            raise ConfigurationError(f"SaveConfig: a mode's settings must be an object, got {d!r}")
        unknown = set(d) - {"save_interval", "save_steps", "start_step", "end_step"}
        if unknown:
            raise ConfigurationError(f"SaveConfig: unknown key(s) {sorted(unknown)} in {dict(d)!r}")
        return cls(d.get("save_interval"), d.get("start_step"), d.get("end_step"), d.get("save_steps"))

    @classmethod
    def from_dict(
        cls, params: Mapping[str, Any] | None, default_values: Mapping[str, Any] | None = None
    ) -> SaveConfigMode | None:
        """smdebug's spelling of :meth:`from_json_dict`; missing keys come from ``default_values``."""
        if params is None or not default_values:
            return cls.from_json_dict(params)
        if not isinstance(default_values, Mapping):
            raise ConfigurationError(f"SaveConfigMode: default_values={default_values!r} must be a dict")
        return cls.from_json_dict({**default_values, **params})

    def to_json(self) -> str:
        """:meth:`to_json_dict` as a JSON string."""
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_json(cls, json_str: str) -> SaveConfigMode | None:
        """Inverse of :meth:`to_json`."""
        return cls.from_json_dict(_loads("SaveConfigMode", json_str))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaveConfigMode):
            return NotImplemented
        return self.to_json_dict() == other.to_json_dict() and self._alternatives == other._alternatives

    def __hash__(self) -> int:
        return hash(
            (self.save_interval, self.start_step, self.end_step, tuple(self.save_steps), self._alternatives)
        )

    def __repr__(self) -> str:
        return (
            f"SaveConfigMode(save_interval={self.save_interval}, start_step={self.start_step}, "
            f"end_step={self.end_step}, save_steps={self.save_steps})"
        )


class SaveConfig:
    """Save settings for all four modes.

    The parameters are in smdebug's order, so ``SaveConfig({modes.TRAIN:
    SaveConfigMode(...)})`` works. Either give the common settings (applied
    to every mode, by keyword) or ``mode_save_configs`` mapping modes (``ModeKeys`` or their names) to
    :class:`SaveConfigMode` (or its JSON dict, or ``None``); unconfigured modes
    save with the defaults but serialize as ``null``, as in smdebug.

    Examples
    --------
    >>> from tornasole import modes
    >>> sc = SaveConfig({modes.TRAIN: SaveConfigMode(save_interval=5)})
    >>> sc.should_save_step(modes.TRAIN, 10), sc.should_save_step(modes.TRAIN, 11)
    (True, False)
    >>> sc.to_json_dict()["EVAL"] is None
    True
    >>> SaveConfig.from_json(sc.to_json()) == sc
    True
    """

    def __init__(
        self,
        mode_save_configs: Mapping[Any, SaveConfigMode | Mapping[str, Any] | None] | None = None,
        save_interval: int | None = None,
        start_step: int | None = None,
        end_step: int | None = None,
        save_steps: Iterable[int] | None = None,
    ) -> None:
        self.mode_save_configs: dict[ModeKeys, SaveConfigMode | None]
        if mode_save_configs is None:
            common = SaveConfigMode(save_interval, start_step, end_step, save_steps)
            self.mode_save_configs = {m: common for m in ModeKeys}
        else:
            if not isinstance(mode_save_configs, Mapping):
                hint = (
                    " (the first positional parameter is mode_save_configs, as in smdebug;"
                    f" write SaveConfig(save_interval={mode_save_configs!r}))"
                    if isinstance(mode_save_configs, int)
                    else ""
                )
                raise ConfigurationError(
                    f"SaveConfig: mode_save_configs={mode_save_configs!r} must be a dict of modes{hint}"
                )
            # given modes first, then the missing ones: smdebug's key order, so to_json() matches its output
            self.mode_save_configs = {}
            for key, value in mode_save_configs.items():
                if value is not None and not isinstance(value, SaveConfigMode):
                    value = SaveConfigMode.from_json_dict(value)
                self.mode_save_configs[_as_mode(key)] = value
            for m in ModeKeys:
                self.mode_save_configs.setdefault(m, None)
        self._default = SaveConfigMode()

    def get_save_config(self, mode: ModeKeys) -> SaveConfigMode:
        """The settings used for ``mode`` (defaults when the mode was not configured)."""
        cfg = self.mode_save_configs[_as_mode(mode)]
        return self._default if cfg is None else cfg

    def set_save_config(self, mode: ModeKeys, save_config_mode: SaveConfigMode) -> None:
        """Replace the settings of one mode."""
        if not isinstance(save_config_mode, SaveConfigMode):
            raise ConfigurationError(f"SaveConfig: {save_config_mode!r} must be a SaveConfigMode")
        self.mode_save_configs[_as_mode(mode)] = save_config_mode

    def should_save_step(self, mode: ModeKeys, mode_step: int) -> bool:
        """Whether mode step ``mode_step`` of ``mode`` is saved."""
        return self.get_save_config(mode).should_save_step(mode_step)

    @classmethod
    def union(cls, *configs: SaveConfig) -> SaveConfig:
        """Per mode, :meth:`SaveConfigMode.union` of the configured modes (a mode nobody set stays unset)."""
        if not configs:
            raise ConfigurationError("SaveConfig.union needs at least one SaveConfig")
        merged: dict[ModeKeys, SaveConfigMode | None] = {}
        for mode in ModeKeys:
            given = [c.mode_save_configs.get(mode) for c in configs]
            present = [g for g in given if g is not None]
            if not present:
                merged[mode] = None
            else:  # an unset mode saves with the defaults: that counts too
                merged[mode] = SaveConfigMode.union(*present, *([SaveConfigMode()] if None in given else []))
        return cls(mode_save_configs=merged)

    def merged_with(self, default: SaveConfig) -> SaveConfig:
        """A copy whose unconfigured modes take ``default``'s settings (collection config over the hook's)."""
        merged = SaveConfig(mode_save_configs=dict(self.mode_save_configs))
        for mode, cfg in merged.mode_save_configs.items():
            if cfg is None:
                merged.mode_save_configs[mode] = default.mode_save_configs[mode] or SaveConfigMode()
        return merged

    def to_json_dict(self) -> dict[str, Any]:
        """``{"TRAIN": {...} | None, "EVAL": ..., "PREDICT": ..., "GLOBAL": ...}`` (collections file)."""
        return {
            m.name: (c.to_json_dict() if c is not None else None) for m, c in self.mode_save_configs.items()
        }

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any] | None) -> SaveConfig | None:
        """Inverse of :meth:`to_json_dict`; ``None`` stays ``None``."""
        if d is None:
            return None
        if not isinstance(d, Mapping):
            raise ConfigurationError(f"SaveConfig: expected an object keyed by mode names, got {d!r}")
        return cls(mode_save_configs=dict(d))

    @classmethod
    def from_dict(
        cls, params: Mapping[Any, Any] | None, default_values: Mapping[str, Any] | None = None
    ) -> SaveConfig | None:
        """smdebug's spelling of :meth:`from_json_dict`; missing keys from ``default_values``."""
        if params is None:
            return None
        if not isinstance(params, Mapping):
            raise ConfigurationError(f"SaveConfig: expected an object keyed by mode names, got {params!r}")
        return cls(
            mode_save_configs={
                k: (SaveConfigMode.from_dict(v, default_values) if isinstance(v, Mapping) else v)
                for k, v in params.items()
            }
        )

    def to_json(self) -> str:
        """:meth:`to_json_dict` as a JSON string (what smdebug's ``SaveConfig.to_json`` returns)."""
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_json(cls, json_str: str) -> SaveConfig | None:
        """Inverse of :meth:`to_json`; also reads smdebug's strings."""
        return cls.from_json_dict(_loads("SaveConfig", json_str))

    @classmethod
    def from_save_config_mode(cls, save_config_mode: SaveConfigMode) -> SaveConfig:
        """Every mode with the settings ``save_config_mode``."""
        return cls(mode_save_configs={m: save_config_mode for m in ModeKeys})

    def merge_default_save_config(self, default_save_config: SaveConfig) -> None:
        """Fill this config's unconfigured modes from ``default_save_config``, in place (as smdebug)."""
        self.mode_save_configs = self.merged_with(default_save_config).mode_save_configs

    @classmethod
    def parse(cls, obj: Any) -> SaveConfig:
        """Accept ``None`` (defaults), a ``SaveConfig``, a ``SaveConfigMode`` (all modes) or a mode dict."""
        if obj is None:
            return cls()
        if isinstance(obj, SaveConfig):
            return obj
        if isinstance(obj, SaveConfigMode):
            return cls(mode_save_configs={m: obj for m in ModeKeys})
        if isinstance(obj, Mapping):
            return cls(mode_save_configs=obj)
        raise ConfigurationError(f"save_config={obj!r} must be a SaveConfig, SaveConfigMode or dict of modes")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaveConfig):
            return NotImplemented
        return self.to_json_dict() == other.to_json_dict()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"SaveConfig(mode_save_configs={self.mode_save_configs})"
