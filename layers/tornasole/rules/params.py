"""Rule parameters: declared once per rule class, parsed once, from strings or typed values.

Why: a rule configuration (SageMaker ``RuleParameters``, the CLI, the 2019
``RuntimeConfigurations``) delivers every value as a string, while notebook
users pass Python values. Each built-in rule declares ``PARAMETERS`` (a tuple
of :class:`Param`); :func:`parse_params` turns either form into typed values,
fills defaults, and fails with a :class:`~tornasole.exceptions.RuleParameterError`
that names the rule and the parameter.

Choices:

* ``bool`` accepts ``true/false``, ``1/0``, ``yes/no``, ``on/off`` in any case
  (smdebug's configs use ``"True"``/``"False"``).
* list kinds accept a comma-separated string (``"0,1"``), a JSON list string
  (``'["a", "b"]'``) or a Python list/tuple; ``""`` is the empty list. A ``;`` in a
  string list is refused: smdebug splits on commas only, so ``"weights;gradients"``
  would silently name one collection that does not exist.
* For a parameter whose default is ``None`` the strings ``""`` and ``"None"``
  (any case) mean "not set".
* ``regex`` values are compiled here, once; ``mode`` values become
  :class:`~tornasole.modes.ModeKeys`.
* ``rule_to_invoke`` (SageMaker's own key) and other-trial paths
  (``other_trials``, ``other_trial_0``..., ``other-trials-paths``: opened by
  ``create_rule``) are ignored, ``action_json`` is parsed by
  :mod:`tornasole.rules.actions` for every rule; any other unknown key is an
  error that lists the valid ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tornasole.exceptions import RuleParameterError
from tornasole.modes import ModeKeys
from tornasole.safe_regex import regex_problem

__all__ = ["Param", "KINDS", "parse_params", "parse_value", "META_KEYS"]

#: Parameter kinds understood by :func:`parse_value`.
KINDS = ("str", "float", "int", "bool", "regex", "mode", "str_list", "float_list", "int_list")

#: Keys every rule accepts besides its declared parameters.
META_KEYS = ("rule_to_invoke", "action_json")

_OTHER_TRIAL_KEY = re.compile(r"^other[_-]trials?(_\d+|[_-]paths)?$")

_TRUE = {"true", "1", "yes", "y", "on", "t"}
_FALSE = {"false", "0", "no", "n", "off", "f"}


@dataclass(frozen=True)
class Param:
    """Declaration of one rule parameter.

    Parameters
    ----------
    name : str
        As it appears in ``RuleParameters`` (``"threshold"``).
    kind : str
        One of :data:`KINDS`.
    default : str or None
        The default written as a configuration would write it (``"0.0000001"``);
        ``None`` means "not set".
    help : str
        One sentence shown by the CLI and in errors.
    required : bool
        The configuration must give a value.

    Examples
    --------
    >>> p = Param("threshold", "float", "0.0000001", "mean |gradient| below this fires")
    >>> p.kind, p.default
    ('float', '0.0000001')
    """

    name: str
    kind: str
    default: str | None = None
    help: str = ""
    required: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"parameter {self.name!r}: unknown kind {self.kind!r}; expected one of {KINDS}")


def _fail(rule: str, p: Param, raw: Any, what: str) -> RuleParameterError:
    return RuleParameterError(rule, p.name, f"value {raw!r} {what}")


def _split(raw: Any) -> list:
    if isinstance(raw, (list, tuple)):
        return list(raw)
    text = str(raw).strip()
    if not text:
        return []
    if text.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, list):
            return data
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_value(rule: str, p: Param, raw: Any) -> Any:
    """Parse one raw value (string or typed) for parameter ``p`` of rule ``rule``.

    Examples
    --------
    >>> parse_value("R", Param("flag", "bool"), "True")
    True
    >>> parse_value("R", Param("ids", "int_list"), "0, 3")
    [0, 3]
    """
    if raw is None or (
        p.default is None and isinstance(raw, str) and raw.strip().lower() in ("", "none", "null")
    ):
        return None
    k = p.kind
    if k == "str":
        return str(raw)
    if k == "bool":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, int) and raw in (0, 1):
            return bool(raw)
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise _fail(rule, p, raw, "is not a boolean (use true/false)")
    if k == "float":
        if isinstance(raw, bool):
            raise _fail(rule, p, raw, "is not a float")
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise _fail(rule, p, raw, "is not a float") from None
    if k == "int":
        return _int(rule, p, raw)
    if k == "regex":
        if isinstance(raw, re.Pattern):
            return raw
        problem = regex_problem(str(raw))  # a job file's or a registrant's text: bounded time only
        if problem:
            invalid = problem.startswith("not a valid")
            raise _fail(rule, p, raw, f"is {problem}" if invalid else f"is refused as a pattern: {problem}")
        return re.compile(str(raw))
    if k == "mode":
        if isinstance(raw, ModeKeys):
            return raw
        try:
            return ModeKeys.from_name(str(raw))
        except ValueError:
            raise _fail(rule, p, raw, "is not a mode (TRAIN, EVAL, PREDICT, GLOBAL)") from None
    items = _split(raw)
    if k == "str_list":
        names = [str(x).strip() for x in items]
        if any(";" in n for n in names):  # smdebug splits on commas only: 'a;b' would be one name
            fixed = ",".join(n.strip() for part in names for n in part.split(";") if n.strip())
            raise _fail(rule, p, raw, f"separates its items with ';': separate them with commas ({fixed!r})")
        return names
    if k == "float_list":
        try:
            return [float(x) for x in items]
        except (TypeError, ValueError):
            raise _fail(rule, p, raw, "is not a comma-separated list of floats") from None
    # int_list
    return [_int(rule, p, x, whole=raw) for x in items]


def _int(rule: str, p: Param, raw: Any, whole: Any = None) -> int:
    shown = raw if whole is None else whole
    if isinstance(raw, bool):
        raise _fail(rule, p, shown, "is not an integer")
    if isinstance(raw, int):
        return raw
    try:
        f = float(raw)
    except (TypeError, ValueError):
        raise _fail(rule, p, shown, "is not an integer") from None
    if not f.is_integer():
        raise _fail(rule, p, shown, "is not an integer")
    return int(f)


def parse_params(
    rule_cls: type | str, raw: Mapping[str, Any] | None, params: tuple[Param, ...] | None = None
) -> dict[str, Any]:
    """Parse a rule's raw parameters into a ``{name: typed value}`` dict with every declared name.

    Parameters
    ----------
    rule_cls : type or str
        The rule class (its ``PARAMETERS`` and name are used) or a rule name with ``params``.
    raw : mapping
        Values as strings (configuration) or typed Python values. ``action_json`` is returned as
        given (see :func:`tornasole.rules.actions.parse_actions`); ``rule_to_invoke`` is dropped.
    params : tuple of Param, optional
        Overrides ``rule_cls.PARAMETERS``.

    Raises
    ------
    RuleParameterError
        Unknown key (lists the valid ones), missing required parameter, unparsable value.

    Examples
    --------
    >>> from tornasole.rules.generic import VanishingGradient
    >>> parse_params(VanishingGradient, {"threshold": "0.001"})["threshold"]
    0.001
    """
    name = rule_cls if isinstance(rule_cls, str) else rule_cls.__name__
    declared = tuple(params if params is not None else getattr(rule_cls, "PARAMETERS", ()))
    by_name = {p.name: p for p in declared}
    raw = dict(raw or {})
    out: dict[str, Any] = {}
    for key in list(raw):
        if key not in by_name and _OTHER_TRIAL_KEY.match(key):
            del raw[key]  # trial paths: opened by create_rule, not a parameter of the rule itself
            continue
        if key not in by_name and key not in META_KEYS:
            valid = ", ".join(sorted(by_name)) or "(none)"
            raise RuleParameterError(name, key, f"is not a parameter of this rule; valid parameters: {valid}")
    for p in declared:
        if p.name in raw:
            value = parse_value(name, p, raw[p.name])
            if value is None and p.required:
                raise RuleParameterError(name, p.name, "is required and cannot be empty")
        elif p.required:
            raise RuleParameterError(name, p.name, f"is required but missing ({p.help})")
        else:
            value = parse_value(name, p, p.default) if p.default is not None else None
        out[p.name] = value
    if "action_json" in raw:
        out["action_json"] = raw["action_json"]
    return out
