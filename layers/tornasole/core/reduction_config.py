"""What to save of a tensor: the raw values, its shape, and/or reductions of it.

On disk (FORMAT.md 4) the four reduction lists are flattened into one comma
separated string, in the order plain reductions, norms (``l1_norm``), abs
reductions (``abs_mean``), abs norms (``abs_l2_norm``), next to the
``save_raw_tensor`` and ``save_shape`` booleans. The class is immutable so one
instance can be shared by many collections without one edit leaking into all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tornasole.exceptions import ConfigurationError

__all__ = ["ReductionConfig", "ALLOWED_REDUCTIONS", "ALLOWED_NORMS"]

ALLOWED_REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod")
ALLOWED_NORMS = ("l1", "l2")


def _names(field: str, values: Iterable[str] | str | None, allowed: tuple[str, ...]) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        values = [v.strip() for v in values.split(",") if v.strip()]
    out = []
    for v in values:
        if v not in allowed:
            raise ConfigurationError(f"ReductionConfig: {field} has {v!r}; allowed: {', '.join(allowed)}")
        out.append(v)
    return tuple(out)


def _bool(field: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise ConfigurationError(f"ReductionConfig: {field}={value!r} must be a boolean")


@dataclass(frozen=True, init=False)
class ReductionConfig:
    """Reductions to compute in the training process instead of (or besides) the raw tensor.

    Parameters
    ----------
    reductions, abs_reductions : sequence of str
        Any of ``min max mean std variance sum prod`` (abs: on ``|x|``).
    norms, abs_norms : sequence of str
        ``l1`` and/or ``l2``.
    save_raw_tensor : bool
        Also save the full tensor.
    save_shape : bool
        Record the tensor's shape in the index file.

    Examples
    --------
    >>> rc = ReductionConfig(reductions=["mean"], norms=["l2"], abs_reductions=["max"])
    >>> rc.to_json_dict()
    {'save_raw_tensor': False, 'reductions': 'mean,l2_norm,abs_max', 'save_shape': False}
    >>> ReductionConfig.from_json_dict(rc.to_json_dict()) == rc
    True
    >>> ReductionConfig.from_json(rc.to_json()) == rc
    True
    """

    reductions: tuple[str, ...]
    abs_reductions: tuple[str, ...]
    norms: tuple[str, ...]
    abs_norms: tuple[str, ...]
    save_raw_tensor: bool
    save_shape: bool

    def __init__(
        self,
        reductions: Iterable[str] = (),
        abs_reductions: Iterable[str] = (),
        norms: Iterable[str] = (),
        abs_norms: Iterable[str] = (),
        save_raw_tensor: bool = False,
        save_shape: bool = False,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "reductions", _names("reductions", reductions, ALLOWED_REDUCTIONS))
        set_(self, "abs_reductions", _names("abs_reductions", abs_reductions, ALLOWED_REDUCTIONS))
        set_(self, "norms", _names("norms", norms, ALLOWED_NORMS))
        set_(self, "abs_norms", _names("abs_norms", abs_norms, ALLOWED_NORMS))
        set_(self, "save_raw_tensor", _bool("save_raw_tensor", save_raw_tensor))
        set_(self, "save_shape", _bool("save_shape", save_shape))

    @property
    def has_reductions(self) -> bool:
        """Whether any reduction or norm is configured."""
        return bool(self.reductions or self.abs_reductions or self.norms or self.abs_norms)

    def ordered(self) -> list[tuple[str, bool]]:
        """``(name, abs)`` pairs in the order the hook writes them (FORMAT.md 2.4)."""
        return (
            [(r, False) for r in self.reductions]
            + [(n, False) for n in self.norms]
            + [(r, True) for r in self.abs_reductions]
            + [(n, True) for n in self.abs_norms]
        )

    def reductions_string(self) -> str:
        """The comma separated ``reductions`` string of a collections file."""
        parts = list(self.reductions)
        parts += [f"{n}_norm" for n in self.norms]
        parts += [f"abs_{r}" for r in self.abs_reductions]
        parts += [f"abs_{n}_norm" for n in self.abs_norms]
        return ",".join(parts)

    def to_json_dict(self) -> dict[str, Any]:
        """``{"save_raw_tensor", "reductions", "save_shape"}`` as in a collections file."""
        return {
            "save_raw_tensor": self.save_raw_tensor,
            "reductions": self.reductions_string(),
            "save_shape": self.save_shape,
        }

    @classmethod
    def from_reductions_string(
        cls, s: str, *, save_raw_tensor: bool = False, save_shape: bool = False
    ) -> ReductionConfig:
        """Parse ``"min,l1_norm,abs_mean,abs_l2_norm"`` (the collections file / hook-config spelling)."""
        red: list[str] = []
        norms: list[str] = []
        abs_red: list[str] = []
        abs_norms: list[str] = []
        for item in (x.strip() for x in str(s).split(",")):
            if not item:
                continue
            is_abs = item.startswith("abs_")
            base = item[4:] if is_abs else item
            if base.endswith("_norm"):
                (abs_norms if is_abs else norms).append(base[: -len("_norm")])
            elif base in ALLOWED_NORMS:
                (abs_norms if is_abs else norms).append(base)
            else:
                (abs_red if is_abs else red).append(base)
        return cls(red, abs_red, norms, abs_norms, save_raw_tensor=save_raw_tensor, save_shape=save_shape)

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any] | None) -> ReductionConfig | None:
        """Inverse of :meth:`to_json_dict`; ``None`` stays ``None``."""
        if d is None:
            return None
        if not isinstance(d, Mapping):
            raise ConfigurationError(f"ReductionConfig: expected an object, got {d!r}")
        unknown = set(d) - {"save_raw_tensor", "reductions", "save_shape"}
        if unknown:
            raise ConfigurationError(f"ReductionConfig: unknown key(s) {sorted(unknown)} in {dict(d)!r}")
        return cls.from_reductions_string(
            d.get("reductions", "") or "",
            save_raw_tensor=d.get("save_raw_tensor", False),
            save_shape=d.get("save_shape", False),
        )

    @classmethod
    def from_dict(cls, params: Mapping[str, Any] | None) -> ReductionConfig | None:
        """smdebug's spelling of :meth:`from_json_dict`."""
        return cls.from_json_dict(params)

    def to_json(self) -> str:
        """:meth:`to_json_dict` as a JSON string (what smdebug's ``ReductionConfig.to_json`` returns)."""
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_json(cls, json_str: str) -> ReductionConfig | None:
        """Inverse of :meth:`to_json`; also reads smdebug's strings."""
        try:
            d = json.loads(json_str)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"ReductionConfig.from_json: not valid JSON: {exc}") from exc
        return cls.from_json_dict(d)
