"""Optional features and the pip extra that brings each: one line telling the user what to install.

The core library (hooks, trials, rules on local files) needs only numpy,
protobuf and google-crc32c. Everything else is an extra named by what a user
wants to do; code that needs one calls :func:`require` before its first
import of the optional package, so a missing extra fails at once with the
exact ``pip install`` line instead of a bare ``No module named ...`` deep in a
stack. To add an extra, add its ``[project.optional-dependencies]`` entry in
``pyproject.toml`` and one row to ``EXTRAS`` (a unit test keeps both in step).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from tornasole.exceptions import TornasoleError

__all__ = ["CPU_TORCH_HINT", "EXTRAS", "Extra", "MissingExtraError", "missing_modules", "require"]


@dataclass(frozen=True)
class Extra:
    """One pip extra: the top-level modules it must provide and what it is for (used in the message)."""

    name: str
    modules: tuple[str, ...]
    purpose: str

    @property
    def install_line(self) -> str:
        return f"pip install 'tornasole[{self.name}]'"


EXTRAS: dict[str, Extra] = {
    e.name: e
    for e in (
        Extra("local", ("boto3", "moto", "flask", "flask_cors", "aws_lambda_powertools"), "the local mode"),
        Extra("s3", ("boto3",), "s3:// paths"),
        Extra("pytorch", ("torch",), "the PyTorch hook"),
        Extra("plot", ("matplotlib",), "plots"),
        Extra("demo", ("boto3", "moto", "flask", "aws_lambda_powertools", "torch", "matplotlib"), "the demo"),
        Extra("lambda", ("boto3", "aws_lambda_powertools"), "the Lambda handlers"),
        Extra("tensorflow", ("tensorflow", "keras"), "the TensorFlow hook"),
        Extra("keras", ("keras",), "the Keras hook"),
        Extra("xgboost", ("xgboost",), "the XGBoost hook"),
        Extra("notebook", ("pandas",), "PandasFrame (smdebug's profiler data frames)"),
        Extra("gpu", ("pynvml",), "the profiler's GPU metrics (NVML)"),
    )
}
# Aliases kept for existing install lines (``tornasole[torch]``).
EXTRA_ALIASES = {"torch": "pytorch"}


#: Said when torch is missing: pip's torch for Linux is the CUDA build, gigabytes a CPU machine never uses.
CPU_TORCH_HINT = (
    " (on a machine without a GPU, first install the CPU build of torch, a fraction of the size: "
    "pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)


class MissingExtraError(TornasoleError, ImportError):
    """An optional package is not installed; the message is the one line that fixes it."""

    def __init__(self, extra: Extra, feature: str, missing: tuple[str, ...]) -> None:
        self.extra = extra
        self.missing = missing
        super().__init__(
            f"{feature} needs the '{extra.name}' extra (missing: {', '.join(missing)}): run "
            f"{extra.install_line}{CPU_TORCH_HINT if 'torch' in missing else ''}"
        )


def missing_modules(extra: str) -> tuple[str, ...]:
    """The modules of ``extra`` that cannot be imported here (empty when the extra is installed)."""
    spec = EXTRAS[EXTRA_ALIASES.get(extra, extra)]
    return tuple(m for m in spec.modules if importlib.util.find_spec(m) is None)


def require(extra: str, feature: str | None = None) -> None:
    """Raise :class:`MissingExtraError` (``feature`` names what needed it) unless ``extra`` is installed."""
    spec = EXTRAS[EXTRA_ALIASES.get(extra, extra)]
    missing = missing_modules(spec.name)
    if missing:
        raise MissingExtraError(spec, feature or spec.purpose, missing)
