"""The moto releases the local mode's patches were checked against, and what happens on any other.

Each patch reaches into moto's private code, which any release may change. So
the patches are applied only on a release they were checked against: the
correctness patches on those of ``CHECKED_MOTO``, each speed patch on those
``CHECKED_SPEED_PATCHES`` lists for it (``make check-moto-versions`` runs the
local mode's unit and integration tests on a release; the ``local`` extra in
``pyproject.toml`` allows exactly ``CHECKED_MOTO``'s range, a unit test keeps
both in step). On any other moto:

- the speed patches stay off, said in one log line: moto answers as it does,
  only slower;
- the correctness patches refuse (:class:`UnsupportedMotoError`, naming the
  installed and the checked versions and the install line), because without
  them the local mode would lose writes or hand one message to two workers.

``TORNASOLE_MOTO_SPEED_PATCHES=0`` turns the speed patches off on a checked
moto too. ``TORNASOLE_MOTO_UNCHECKED=1`` applies the correctness patches on an
unchecked moto: how a new release is checked (``make test-moto-newest``), not
how to run.
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import PackageNotFoundError, version

from tornasole import config
from tornasole.exceptions import TornasoleError

__all__ = [
    "CHECKED_MOTO",
    "CHECKED_SPEED_PATCHES",
    "FAILED_MOTO",
    "UnsupportedMotoError",
    "check_correctness_patches",
    "installed_moto",
    "is_checked",
    "moto_requirement",
    "speed_patch_checked",
    "speed_patches_enabled",
]

log = logging.getLogger(__name__)

#: Every moto release the correctness patches were checked against (the local mode's unit and
#: integration tests passed on it: ``make check-moto-versions``), oldest first. The ``local``
#: extra allows ``>=`` the first, ``<=`` the last, minus ``FAILED_MOTO``: every release PyPI serves
#: between the two is in one table or the other.
CHECKED_MOTO: tuple[str, ...] = ("5.1.22", "5.2.1", "5.2.2", "5.2.3", "5.2.4", "5.2.5")
#: Releases in that range on which the local mode fails, and why.
FAILED_MOTO: dict[str, str] = {
    "5.2.0": "BatchWriteItem of an item with a binary attribute fails (bytes not JSON serializable): "
    "local up --state-dir cannot restore its table",
}
#: The table: each speed patch -> the releases it was checked against (a subset of ``CHECKED_MOTO``).
CHECKED_SPEED_PATCHES: dict[str, tuple[str, ...]] = {
    "dynamodb_transaction_rollback": CHECKED_MOTO,
    "dynamodb_partition_query": CHECKED_MOTO,
    "dynamodb_expression_cache": CHECKED_MOTO,
    "dynamodb_answer_serializer": CHECKED_MOTO,
    "repeated_work_cache": CHECKED_MOTO,
    "model_registry": CHECKED_MOTO,
    "dynamodb_stream_reader": CHECKED_MOTO,
    # moto.core.request.Request.from_primitives, which it calls, appeared in 5.2.4.
    "in_process_transport": ("5.2.4", "5.2.5"),
}

_OFF = {"0", "false", "no", "off"}
_ON = {"1", "true", "yes", "on"}
_logged: set[str] = set()  # versions whose speed patches were already said to be off


class UnsupportedMotoError(TornasoleError, RuntimeError):
    """The installed moto is not one the local mode's correctness patches were checked against."""

    def __init__(self, installed: str) -> None:
        self.installed = installed
        failed = FAILED_MOTO.get(installed)
        why = f" (moto {installed} fails it: {failed})" if failed else ""
        super().__init__(
            "the local mode needs a moto it was checked against: this environment has "
            f"moto {installed}{why}, "
            f"the local mode's correctness patches (one DynamoDB request at a time, one SQS receiver per "
            f"message, one S3 request at a time) were checked against moto {', '.join(CHECKED_MOTO)}. "
            "Install a checked one: "
            f"pip install '{moto_requirement()}' (or reinstall 'tornasole[local]'). To check this moto "
            f"instead, set {config.MOTO_UNCHECKED}=1 and run the local-mode tests (make test-moto-newest)."
        )


def moto_requirement() -> str:
    """The requirement the ``local`` extra states for moto: the checked range, the failed releases out."""
    excluded = "".join(f",!={v}" for v in sorted(FAILED_MOTO, key=_release))
    return f"moto[server]>={CHECKED_MOTO[0]}{excluded},<={CHECKED_MOTO[-1]}"


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def installed_moto() -> str:
    """The installed moto's version (``"not installed"`` without one)."""
    try:
        return version("moto")
    except PackageNotFoundError:
        return "not installed"


def is_checked(moto_version: str | None = None) -> bool:
    """Whether ``moto_version`` (default: the installed one) is a release the patches were checked on."""
    return (installed_moto() if moto_version is None else moto_version) in CHECKED_MOTO


def check_correctness_patches(moto_version: str | None = None) -> None:
    """Raise :class:`UnsupportedMotoError` unless the correctness patches may be applied to this moto."""
    found = installed_moto() if moto_version is None else moto_version
    if is_checked(found) or os.environ.get(config.MOTO_UNCHECKED, "").strip().lower() in _ON:
        return
    raise UnsupportedMotoError(found)


def speed_patches_enabled(moto_version: str | None = None) -> bool:
    """Whether to apply speed patches at all: a checked moto, and not turned off by the environment."""
    if os.environ.get(config.MOTO_SPEED_PATCHES, "").strip().lower() in _OFF:
        return False
    found = installed_moto() if moto_version is None else moto_version
    if is_checked(found):
        return True
    if found not in _logged:
        _logged.add(found)
        log.warning(
            "moto %s is not one the local mode's speed patches were checked against (%s): they are off, "
            "the local mode runs slower",
            found,
            ", ".join(CHECKED_MOTO),
        )
    return False


def speed_patch_checked(name: str, moto_version: str | None = None) -> bool:
    """Whether the speed patch ``name`` was checked against ``moto_version`` (default: the installed one)."""
    found = installed_moto() if moto_version is None else moto_version
    return found in CHECKED_SPEED_PATCHES[name]
