"""Exit codes of the ``tornasole`` command and the one-line message of an error.

Exit codes: one table for every sub-command and for ``python -m tornasole.rules.rule_invoker``.

====  ==========================================================================================
code  meaning
====  ==========================================================================================
0     done, nothing to report
1     issues found, where the command was asked to report them (``invoke`` and ``rule_invoker``
      always; ``jobs status --fail-on-issues``)
2     usage error or invalid input, whatever the command: a bad option or option value
      (``--timeout -5``, a ``--regex`` that does not compile), an unknown or misspelt built-in
      rule, a bad rule parameter (``collection_names=a;b``), a malformed file, a job already
      registered with other rules (``jobs register`` without ``--update``), a missing AWS region
      or credentials, a rule that ended in ``Error`` at registration, a failed registration
      (``jobs status``)
3     something named does not exist: a job, a rule of a job (``jobs logs --rule``), a trial
      path, a bucket, a file; or a wait for it ran out (``--timeout``, ``--idle-timeout``)
====  ==========================================================================================

The same mistake exits with the same code in every command: a misspelt rule is 2 for ``invoke``,
``jobs register`` (options or ``--from-request``), ``rules list --name`` and ``rule_invoker``; a
bucket or a ``--rule-file`` that is not there is 3 for ``invoke`` and ``jobs register`` alike.

Why one place: a script calling the CLI must be able to tell "your rules fired" from "you typed it
wrong" from "it is not there" without parsing text, and every command must agree.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "EXIT_ISSUES",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_USAGE",
    "NotFoundError",
    "did_you_mean",
    "exit_code_for",
    "hint",
    "one_line",
]

EXIT_OK, EXIT_ISSUES, EXIT_USAGE, EXIT_NOT_FOUND = 0, 1, 2, 3

# AWS error codes that mean "the thing you named is not there".
_AWS_NOT_FOUND = {"NoSuchBucket", "NoSuchKey", "404", "NotFound", "ResourceNotFoundException"}


class NotFoundError(LookupError):
    """Something the user named (job, rule, trial, bucket) does not exist; the message names it."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'X'?)"`` for the closest of ``choices``, or ``""`` when none is close.

    Examples
    --------
    >>> did_you_mean("VanishingGradiant", ["VanishingGradient", "DeadRelu"])
    " (did you mean 'VanishingGradient'?)"
    """
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = [lowered[name.lower()]] if name.lower() in lowered else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def _aws_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", "")) or None
    return None


def exit_code_for(exc: BaseException) -> int:
    """``EXIT_NOT_FOUND`` for "not there" errors, ``EXIT_USAGE`` for everything else a user can fix."""
    from tornasole.exceptions import MissingCollectionFiles, TensorUnavailable

    # LookupError covers NotFoundError, unknown rules and JobNotFoundError (a KeyError)
    not_found = (LookupError, FileNotFoundError, TimeoutError, TensorUnavailable, MissingCollectionFiles)
    if isinstance(exc, not_found) or _aws_code(exc) in _AWS_NOT_FOUND:
        return EXIT_NOT_FOUND
    return EXIT_USAGE


def one_line(exc: BaseException) -> str:
    """The whole message of ``exc`` on one line (never cut: a user must see every valid choice)."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    if isinstance(exc, KeyError) and len(exc.args) == 1 and text.startswith(("'", '"')):
        text = text[1:-1]  # KeyError's str() quotes its message
    return text or type(exc).__name__


def hint(exc: BaseException) -> str:
    """What to check, for the AWS errors whose own text does not say (unreachable endpoint, no
    credentials, no table)."""
    import os

    from tornasole import config

    if type(exc).__name__ in ("EndpointConnectionError", "ConnectTimeoutError"):
        where = os.environ.get("AWS_ENDPOINT_URL")
        target = (
            f"is `tornasole local up` running at {where}?" if where else "is the network or region right?"
        )
        return f" ({target})"
    if type(exc).__name__ == "NoCredentialsError":
        return (
            " (set AWS credentials: AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws; for the "
            "local mode, run in this shell the `export` lines `tornasole local up` printed)"
        )
    if _aws_code(exc) == "ResourceNotFoundException":
        from tornasole.evaluator.store.state_table import StateTable

        table = StateTable(os.environ.get(config.STATE_TABLE)).name
        return (
            f" (state table {table!r} or another resource is missing: deploy the stack, start "
            f"`tornasole local up`, or set {config.STATE_TABLE} / --table)"
        )
    return ""
