"""Where a zero-code-change hook finds its configuration and where it writes.

SageMaker writes two files into the training container and sets variables that
smdebug reads; Tornasole reads the same ones, so a job moved off SageMaker (or
a container built for it) keeps working:

* the ``DebugHookConfig`` file: the ``path`` argument, else
  ``$TORNASOLE_CONFIG_FILE_PATH``, else ``$SMDEBUG_CONFIG_FILE_PATH`` (what
  SageMaker sets), else ``/opt/ml/input/config/debughookconfig.json``;
* the ``TensorBoardOutputConfig`` file: ``$TENSORBOARD_CONFIG_FILE_PATH``, else
  ``/opt/ml/input/config/tensorboardoutputconfig.json``;
* the output directory: ``LocalPath`` when given (SageMaker syncs it to S3);
  else ``S3OutputPath``, extended to ``<S3OutputPath>/<TrainingJobName>/debug-output``
  when a training job name is known (``$TRAINING_JOB_NAME`` or the file's
  ``TrainingJobName``), which is where SageMaker puts it and where the SDK's
  ``latest_job_debugger_artifacts_path()`` looks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from tornasole.config import (
    HOOK_CONFIG_PATH,
    SAGEMAKER_HOOK_CONFIG_PATH,
    SAGEMAKER_TENSORBOARD_CONFIG_PATH,
    SMDEBUG_HOOK_CONFIG_PATH,
    TENSORBOARD_CONFIG_PATH,
    TRAINING_JOB_NAME,
)
from tornasole.exceptions import ConfigurationError

__all__ = [
    "HookConfigNotFound",
    "resolve_config_path",
    "read_config_file",
    "config_file_path",
    "debug_output_dir",
    "tensorboard_dir_from_config",
    "DEBUG_OUTPUT_SUFFIX",
]

DEBUG_OUTPUT_SUFFIX = "debug-output"
_DEFAULT_ORIGIN = "SageMaker's default path"


class HookConfigNotFound(ConfigurationError, FileNotFoundError):
    """No hook configuration file where one was looked for (``get_hook`` then answers ``None``).

    ``named`` is true when the file was named (the path argument or a variable such as
    ``$SMDEBUG_CONFIG_FILE_PATH``) rather than SageMaker's default path: a named file that is
    missing is a mistake to report, a missing default only means "not on SageMaker".
    """

    def __init__(self, message: str, *, file: str = "", named: bool = False) -> None:
        super().__init__(message)
        self.file = file
        self.named = named


def resolve_config_path(path: str | None = None) -> tuple[str, str]:
    """``(file, where it came from)``: the argument, an environment variable, or SageMaker's path."""
    if path:
        return str(path), "the path argument"
    for var in (HOOK_CONFIG_PATH, SMDEBUG_HOOK_CONFIG_PATH):
        value = os.environ.get(var)
        if value:
            return value, f"${var}"
    return SAGEMAKER_HOOK_CONFIG_PATH, _DEFAULT_ORIGIN


def config_file_path() -> str | None:
    """The DebugHookConfig file this process should use, or ``None`` when none is named and SageMaker's
    path holds none (the Keras hook's zero-code-change check: no file, no hook)."""
    for var in (HOOK_CONFIG_PATH, SMDEBUG_HOOK_CONFIG_PATH):
        if os.environ.get(var):
            return os.environ[var]  # named explicitly: a missing file is an error, reported on load
    return SAGEMAKER_HOOK_CONFIG_PATH if os.path.exists(SAGEMAKER_HOOK_CONFIG_PATH) else None


def read_config_file(path: str | None = None) -> tuple[str, Mapping[str, Any]]:
    """``(file, parsed JSON object)``; a missing file raises :class:`HookConfigNotFound` naming the tries."""
    file, origin = resolve_config_path(path)
    try:
        with open(file, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise HookConfigNotFound(
            f"hook configuration file {file} ({origin}) does not exist; pass its path, or set "
            f"{HOOK_CONFIG_PATH} or {SMDEBUG_HOOK_CONFIG_PATH} (default {SAGEMAKER_HOOK_CONFIG_PATH})",
            file=file,
            named=origin != _DEFAULT_ORIGIN,
        ) from None
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{file}: not valid JSON: {exc}") from exc
    except OSError as exc:
        raise ConfigurationError(f"{file}: cannot read the hook configuration: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise ConfigurationError(f"{file} must hold a JSON object, got {type(doc).__name__}")
    return file, doc


def debug_output_dir(file: str, doc: Mapping[str, Any]) -> str:
    """The trial directory a DebugHookConfig asks for (see the module docstring).

    Examples
    --------
    >>> debug_output_dir("f", {"S3OutputPath": "s3://b/p", "TrainingJobName": "job-1"})
    's3://b/p/job-1/debug-output'
    >>> debug_output_dir("f", {"S3OutputPath": "s3://b/p/job-1/debug-output", "TrainingJobName": "job-1"})
    's3://b/p/job-1/debug-output'
    """
    local = doc.get("LocalPath")
    if local:
        return str(local)
    s3 = doc.get("S3OutputPath") or doc.get("S3Path")
    if not s3:
        raise ConfigurationError(f"{file}: neither 'LocalPath' nor 'S3OutputPath' is set")
    s3 = str(s3).rstrip("/")
    job = doc.get("TrainingJobName") or os.environ.get(TRAINING_JOB_NAME)
    if not job:
        return s3
    job = str(job).strip("/")
    if not job or "/" in job:
        raise ConfigurationError(f"{file}: training job name {job!r} is not a valid path segment")
    tail = f"/{job}/{DEBUG_OUTPUT_SUFFIX}"
    return s3 if s3.endswith(tail) else s3 + tail


def tensorboard_dir_from_config() -> str | None:
    """The ``LocalPath`` (else ``S3OutputPath``) of SageMaker's TensorBoardOutputConfig file, if there is one.

    The file is ``$TENSORBOARD_CONFIG_FILE_PATH`` or SageMaker's default path; an
    explicitly named file that does not exist is an error, a missing default is not.
    """
    explicit = os.environ.get(TENSORBOARD_CONFIG_PATH)
    file = explicit or SAGEMAKER_TENSORBOARD_CONFIG_PATH
    try:
        with open(file, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        if explicit:
            raise ConfigurationError(
                f"TensorBoard output configuration {file} (${TENSORBOARD_CONFIG_PATH}) does not exist"
            ) from None
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"{file}: cannot read the TensorBoard output configuration: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise ConfigurationError(f"{file} must hold a JSON object, got {type(doc).__name__}")
    out = doc.get("LocalPath") or doc.get("S3OutputPath")
    if not out:
        raise ConfigurationError(f"{file}: neither 'LocalPath' nor 'S3OutputPath' is set")
    return str(out)
