"""Regular expressions a data writer or a job file may give: checked to run in bounded time (pure).

Why: a collections file's ``include_regex`` and a rule's ``tensor_regex`` come from whoever can
write to the trial, and Python's ``re`` backtracks. ``(a|a)+$`` against a 40-character tensor
name runs for minutes while holding the GIL, so no watchdog thread and no ``join(timeout)``
ever gets to run; in Lambda that is the function's timeout, three times, on every re-drive.

The check refuses what makes backtracking super-linear, before anything is compiled:

* a repeat inside a repeat (``(a+)+``, ``(\\w*x)*``): exponential;
* an alternation or a lookaround inside a repeat (``(a|a)+``): exponential;
* a backreference (``(a*)\\1``): not a regular language, no bound at all;
* more than ``MAX_UNBOUNDED_REPEATS`` repeats in one pattern, a trailing ``.*`` not counted (it
  never backtracks): ``.*a.*a.*b`` is O(n^4) under ``re.search``, 8 s on a 256-character name; the
  branches of a top-level alternation are counted one by one (``.*tanh_input.*|.*relu_output.*``
  passes: branches are tried in turn, their times add up);
* a pattern longer than ``MAX_PATTERN_LENGTH``.

With tensor names capped when an index file is read (``format.index.MAX_TENSOR_NAME_LENGTH``, 512),
what passes is at worst cubic in the name's length: measured on a 512-character name, 0.27 s for
``[a-z]*[a-z]*[0-9]$``, 20 ms for ``.*a.*b``, under 1 ms for the usual shapes. smdebug's own
collection patterns (``.*relu_output``, ``gradients/.*``, ``fc1.*``, ``.*relu.*``) all pass.
Why a validator and not ``google-re2`` (linear time): no native dependency in the Lambda layer,
and an unsafe pattern becomes an error naming it, where the user typed it.
"""

from __future__ import annotations

import re
from typing import Any

try:  # the parser behind re.compile: 3.11+ names it re._parser, earlier versions sre_parse
    from re import _constants as _sre_constants  # type: ignore[attr-defined]
    from re import _parser as _sre_parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _sre_constants  # type: ignore[no-redef]
    import sre_parse as _sre_parser  # type: ignore[no-redef]

__all__ = [
    "MAX_PATTERN_LENGTH",
    "MAX_UNBOUNDED_REPEATS",
    "UnsafeRegex",
    "compile_safe",
    "regex_problem",
]

#: A pattern longer than this is refused (patterns in smdebug's and SageMaker's configurations are short).
MAX_PATTERN_LENGTH = 512
#: Repeats (``*``, ``+``, ``{m,n}`` with n > 1) one pattern may hold: each multiplies the worst case by n.
MAX_UNBOUNDED_REPEATS = 2

_REPEATS = {_sre_constants.MAX_REPEAT, _sre_constants.MIN_REPEAT}
if hasattr(_sre_constants, "POSSESSIVE_REPEAT"):
    _REPEATS.add(_sre_constants.POSSESSIVE_REPEAT)
_BACKREFS = {_sre_constants.GROUPREF, _sre_constants.GROUPREF_EXISTS}
_LOOKAROUNDS = {_sre_constants.ASSERT, _sre_constants.ASSERT_NOT}
_ATOMIC = getattr(_sre_constants, "ATOMIC_GROUP", None)


class UnsafeRegex(ValueError):
    """A pattern that is invalid or could run in super-linear time."""


def _children(op: Any, arg: Any) -> list[Any]:
    """The sub-patterns of one parsed node (``SubPattern`` objects)."""
    if op in _REPEATS:
        return [arg[2]]
    if op is _sre_constants.SUBPATTERN:
        return [arg[-1]]
    if op is _sre_constants.BRANCH:
        return list(arg[1])
    if op in _LOOKAROUNDS:
        return [arg[1]]
    if _ATOMIC is not None and op is _ATOMIC:
        return [arg]
    return []


def _walk(sub: Any, inside_repeat: bool, counts: list[int]) -> str | None:
    for op, arg in sub:
        if op in _BACKREFS:
            return "backreferences are not allowed"
        repeats = op in _REPEATS and arg[1] > 1
        if repeats:
            counts[0] += 1
            if inside_repeat:
                return "a repeat inside a repeat (as in '(a+)+') can take exponential time"
        if inside_repeat and (op is _sre_constants.BRANCH or op in _LOOKAROUNDS):
            return "an alternation or lookaround inside a repeat (as in '(a|a)+') can take exponential time"
        for child in _children(op, arg):
            problem = _walk(child, inside_repeat or repeats, counts)
            if problem:
                return problem
    return None


def _ends_with_any_repeat(parsed: Any) -> bool:
    """Whether the pattern's last node (before a final ``$``) is ``.*`` / ``.*?`` / ``.+``."""
    nodes = list(parsed)
    while nodes and nodes[-1][0] is _sre_constants.AT:
        nodes.pop()
    if not nodes:
        return False
    op, arg = nodes[-1]
    if op not in _REPEATS or arg[1] <= 1 or len(arg[2]) != 1:
        return False
    return arg[2][0][0] is _sre_constants.ANY


def regex_problem(pattern: Any) -> str | None:
    """Why ``pattern`` may not be used (invalid, or super-linear), or None when it is safe.

    Examples
    --------
    >>> regex_problem(".*relu_output") is None
    True
    >>> regex_problem("(a|a)+$")
    "an alternation or lookaround inside a repeat (as in '(a|a)+') can take exponential time"
    """
    if not isinstance(pattern, str):
        return f"a pattern must be text, got {type(pattern).__name__}"
    if len(pattern) > MAX_PATTERN_LENGTH:
        return f"the pattern is {len(pattern)} characters long; the limit is {MAX_PATTERN_LENGTH}"
    try:
        parsed = _sre_parser.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"not a valid regular expression: {exc}"
    top = [node for node in parsed if node[0] is not _sre_constants.AT]
    # a top-level 'a.*b|c.*d': the branches are tried one after another, so their times add up and the
    # worst branch bounds the exponent (each is counted on its own, its own trailing '.*' too)
    branches = list(top[0][1][1]) if len(top) == 1 and top[0][0] is _sre_constants.BRANCH else [parsed]
    worst = 0
    for branch in branches:
        counts = [0]
        problem = _walk(branch, False, counts)
        if problem:
            return problem
        if _ends_with_any_repeat(branch):
            counts[0] -= 1  # a trailing '.*' (as in smdebug's '.*relu.*') matches at once: no backtracking
        worst = max(worst, counts[0])
    if worst > MAX_UNBOUNDED_REPEATS:
        return (
            f"{worst} repeats; at most {MAX_UNBOUNDED_REPEATS} are allowed (each multiplies the "
            "time a match can take by the name's length)"
        )
    return None


def compile_safe(pattern: Any, what: str) -> re.Pattern[str]:
    """``re.compile(pattern)``, or ``UnsafeRegex`` naming ``what`` and the pattern when it is unsafe."""
    problem = regex_problem(pattern)
    if problem:
        raise UnsafeRegex(f"{what} {str(pattern)[:80]!r}: {problem}")
    return re.compile(pattern)
