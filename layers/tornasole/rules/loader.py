"""Load a custom rule class from a source file (local path or ``s3://``), smdebug imports included.

Why: users bring rules written for smdebug. A file saying ``from
smdebug.rules import Rule`` must load unchanged, yet installing a global
``smdebug`` module would shadow a real smdebug install and leak into every
other module. So the file is compiled and executed in its own module whose
``__builtins__`` carries an ``__import__`` wrapper: inside that file (and the
functions it defines, which share its globals) ``smdebug`` and
``smdebug.<x>`` resolve to ``tornasole`` / ``tornasole.<x>`` (plus a few
renamed modules, :data:`SMDEBUG_MODULES`); everywhere else imports are
untouched and ``sys.modules`` never gets an ``smdebug`` entry. The module is
registered under a private name (``_tornasole_custom_rule_<hash>``) so
pickling and dataclasses work.

Errors are :class:`~tornasole.exceptions.RuleLoadError` naming the file (and
line): file missing, syntax error, an exception while executing it, an
smdebug module Tornasole does not provide, no class of that name, a class that
is not a :class:`~tornasole.rules.Rule`. Parameter problems are
:class:`~tornasole.exceptions.RuleParameterError` naming rule and parameter.
"""

from __future__ import annotations

import builtins
import hashlib
import inspect
import sys
import traceback
import types
from typing import Any

from tornasole.exceptions import RuleLoadError, RuleParameterError
from tornasole.profiler.smdebug_modules import PROFILER_READING_MODULES
from tornasole.rules.actions import parse_actions
from tornasole.rules.rule import Rule

__all__ = ["SMDEBUG_MODULES", "load_rule_class", "create_custom_rule", "load_rule", "map_module_name"]

#: smdebug modules whose Tornasole counterpart has another name; others map ``smdebug.x`` -> ``tornasole.x``.
SMDEBUG_MODULES = {
    "smdebug.core.modes": "tornasole.modes",
    "smdebug.core.collection": "tornasole.core.collection",
    "smdebug.rules.rule_invoker": "tornasole.rules.rule_invoker",
    "smdebug.rules.action": "tornasole.rules.actions",
}


def map_module_name(name: str) -> str | None:
    """The Tornasole module for an smdebug module name, or None if ``name`` is not smdebug's.

    Examples
    --------
    >>> map_module_name("smdebug.rules"), map_module_name("smdebug.core.modes"), map_module_name("numpy")
    ('tornasole.rules', 'tornasole.modes', None)
    """
    if name != "smdebug" and not name.startswith("smdebug."):
        return None
    mapped = SMDEBUG_MODULES.get(name) or PROFILER_READING_MODULES.get(name)
    return mapped or "tornasole" + name[len("smdebug") :]


def _scoped_import(source: str):
    real_import = builtins.__import__

    def _import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 - __import__'s signature
        target = map_module_name(name) if level == 0 else None
        if target is None:
            return real_import(name, globals, locals, fromlist, level)
        try:
            return real_import(target, globals, locals, fromlist, level)
        except ImportError as exc:
            raise ImportError(f"{name} (mapped to {target}) is not provided by Tornasole: {exc}") from exc

    return _import


def _read_source(source: str, storage: Any = None) -> str:
    try:
        if storage is not None:
            data = storage.read(source)
        elif source.startswith("s3://"):
            from tornasole.storage import get_storage

            data = get_storage(source).read(source)
        else:
            with open(source, "rb") as fh:
                data = fh.read()
    except FileNotFoundError as exc:
        raise RuleLoadError(f"{source}: rule file not found") from exc
    except OSError as exc:
        raise RuleLoadError(f"{source}: cannot read the rule file: {exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RuleLoadError(f"{source}: the rule file is not UTF-8 text ({exc})") from exc


def _line_in(source: str, exc: BaseException) -> str:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == source:
            return f", line {frame.lineno}"
    return ""


def load_rule_class(source: str, class_name: str, storage: Any = None) -> type:
    """Execute the rule file ``source`` in a private module and return its class ``class_name``.

    Parameters
    ----------
    source : str
        Local path or ``s3://bucket/key.py``.
    class_name : str
        The rule class (``rule_to_invoke``).
    storage : Storage, optional
        Read the file through this storage (the rule sandbox's, holding job-scoped credentials)
        instead of the process-wide one for its scheme.

    Raises
    ------
    RuleLoadError

    Examples
    --------
    >>> # cls = load_rule_class("s3://bucket/rules/my_rule.py", "CustomGradientRule")
    """
    text = _read_source(source, storage)
    try:
        code = compile(text, source, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise RuleLoadError(f"{source}, line {exc.lineno}: syntax error: {exc.msg}") from exc
    digest = hashlib.sha1(f"{source}\0{text}".encode()).hexdigest()[:12]
    module = types.ModuleType(f"_tornasole_custom_rule_{digest}")
    module.__file__ = source
    module.__dict__["__builtins__"] = dict(builtins.__dict__, __import__=_scoped_import(source))
    sys.modules[module.__name__] = module
    try:
        exec(code, module.__dict__)  # noqa: S102 - running the user's rule file is the point
    except Exception as exc:
        sys.modules.pop(module.__name__, None)
        raise RuleLoadError(
            f"{source}{_line_in(source, exc)}: loading the rule file raised {type(exc).__name__}: {exc}"
        ) from exc
    cls = module.__dict__.get(class_name)
    if cls is None:
        defined = sorted(
            n for n, v in module.__dict__.items() if isinstance(v, type) and v.__module__ == module.__name__
        )
        raise RuleLoadError(f"{source}: no class {class_name!r} in the rule file; classes defined: {defined}")
    if not (isinstance(cls, type) and issubclass(cls, Rule)):
        raise RuleLoadError(f"{source}: {class_name!r} is not a subclass of tornasole.rules.Rule")
    return cls


def create_custom_rule(
    source: str,
    class_name: str,
    base_trial: Any,
    other_trials: list | None = None,
    *,
    source_storage: Any = None,
    **params: Any,
) -> Rule:
    """Load ``class_name`` from ``source`` and build it with (string) parameters.

    ``rule_to_invoke`` is ignored; ``action_json`` is passed on if the constructor takes it, else
    attached to the rule after construction. ``other_trials`` is passed only to constructors that
    accept it. A parameter the constructor does not take is a ``RuleParameterError`` listing the
    ones it does. ``source_storage`` reads the source (see :func:`load_rule_class`'s ``storage``).

    Examples
    --------
    >>> # rule = create_custom_rule("rules/custom.py", "CustomGradientRule", trial, threshold="0.5")
    """
    cls = load_rule_class(source, class_name, source_storage)
    params = {k: v for k, v in params.items() if k != "rule_to_invoke"}
    if getattr(cls, "PARAMETERS", None) is not None and "PARAMETERS" in vars(cls):
        return cls(base_trial, other_trials=other_trials, **params)
    sig = inspect.signature(cls.__init__)
    takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    names = [n for n in sig.parameters if n not in ("self", "base_trial")]
    action = None
    if "action_json" in params and "action_json" not in names and not takes_any:
        action = params.pop("action_json")
    unknown = [k for k in params if k not in names and not takes_any]
    if unknown:
        valid = ", ".join(n for n in names if n != "other_trials") or "(none)"
        raise RuleParameterError(
            class_name,
            unknown[0],
            f"is not a parameter of this rule's constructor; valid parameters: {valid}",
        )
    kwargs = dict(params)
    if other_trials is not None:
        if "other_trials" not in names and not takes_any:
            raise RuleParameterError(class_name, "other_trials", "this rule does not take other trials")
        kwargs["other_trials"] = other_trials
    try:
        rule = cls(base_trial, **kwargs)
    except (TypeError, ValueError) as exc:
        raise RuleParameterError(class_name, None, f"constructing the rule failed: {exc}") from exc
    if action is not None:
        rule.actions = parse_actions(rule.rule_name, action)
    return rule


def load_rule(
    source: str,
    class_name: str,
    base_trial: Any,
    other_trials: list | None = None,
    params: dict[str, Any] | None = None,
) -> Rule:
    """:func:`create_custom_rule` with the parameters as one dict (the ``tornasole invoke`` CLI's call).

    Examples
    --------
    >>> # rule = load_rule("rules/custom.py", "CustomGradientRule", trial, params={"threshold": "0.5"})
    """
    return create_custom_rule(source, class_name, base_trial, other_trials=other_trials, **(params or {}))
