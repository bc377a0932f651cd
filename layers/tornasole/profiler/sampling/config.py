"""What the profiler records and where: one parsed :class:`ProfilerConfig`, whichever way it was asked for.

Four ways in, one object out (:func:`resolve_profiler_config`, first match wins):

1. the hook's ``profiler=`` argument: a :class:`ProfilerConfig`, ``True``/``False``, or a dict in either
   the snake-case shape of this class's fields or SageMaker's shape (below);
2. ``$TORNASOLE_PROFILER``: ``1``/``true``/``yes``/``on`` (defaults), ``0``/``false``/``no``/``off``, or a
   JSON object in either shape;
3. SageMaker's ``profilerconfig.json``, at ``$SMPROFILER_CONFIG_PATH`` (smdebug's variable) or
   ``/opt/ml/input/config/profilerconfig.json``: SageMaker writes it only when the job's profiler is on;
4. otherwise off: the profiler costs nothing unless asked for.

SageMaker's shape is the one its training container gets and the SDK's ``ProfilerConfig`` request payload
(``{"S3OutputPath": ..., "ProfilingIntervalInMilliseconds": 500, "ProfilingParameters": {...}}``); its
keys are case-insensitive and its values may be strings, as smdebug's ``ProfilerConfigParser`` accepts
them. Unknown keys are logged and ignored, as the hook's DebugHookConfig file treats them; a value of the
wrong type or range raises :class:`~tornasole.exceptions.ConfigurationError` naming the key and the source.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from tornasole import config as env_names
from tornasole.exceptions import ConfigurationError

__all__ = [
    "ProfilerConfig",
    "resolve_profiler_config",
    "load_profiler_config_file",
    "DEFAULT_INTERVAL_MS",
    "DEFAULT_MAX_FILE_SIZE",
    "DEFAULT_CLOSE_INTERVAL_S",
    "DEFAULT_FILE_OPEN_FAIL_THRESHOLD",
]

logger = logging.getLogger(__name__)

#: SageMaker's defaults (smdebug's ``profiler_constants``): sample every 500 ms, close a file every 60 s or
#: at 10 MiB, give up after 50 failed file writes.
DEFAULT_INTERVAL_MS = 500
DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024
DEFAULT_CLOSE_INTERVAL_S = 60.0
DEFAULT_FILE_OPEN_FAIL_THRESHOLD = 50
#: Trace events held in memory between two writes, at most; more are dropped (and counted), never queued.
DEFAULT_MAX_PENDING_EVENTS = 100_000

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")

# SageMaker's keys, lower-cased (its container lower-cases the file before reading it, as smdebug does).
_TOP_KEYS = {
    "profilingparameters",
    "profilingintervalinmilliseconds",
    "s3outputpath",
    "disableprofiler",
}
_TOP_IGNORED = {"traininjobname", "trainingjobname"}
_PARAM_KEYS = {
    "profilerenabled": "enabled",
    "localpath": "output_path",
    "rotatemaxfilesizeinbytes": "rotate_max_file_size_bytes",
    "rotatefilecloseintervalinseconds": "rotate_file_close_interval_s",
    "fileopenfailthreshold": "file_open_fail_threshold",
    "dataloaderprofilingconfig": "dataloader",
}
# Detailed (autograd), Python (cProfile) and SMDataParallel profiling: accepted, not recorded (logged once).
_PARAM_NOT_RECORDED = {
    "detailedprofilingconfig",
    "pythonprofilingconfig",
    "smdataparallelprofilingconfig",
    "horovodprofilingconfig",
    "disableframeworkmetrics",
}


@dataclass(frozen=True)
class ProfilerConfig:
    """The profiler's settings; the defaults are SageMaker's.

    ``output_path`` is the profiler root (files go to ``<output_path>/system/...`` and
    ``<output_path>/framework/...``): SageMaker's ``LocalPath``, or
    ``<S3OutputPath>[/<job>]/profiler-output``;
    ``None`` puts it next to the hook's trial, ``<out_dir>/profiler-output``.
    """

    enabled: bool = True
    output_path: str | None = None
    interval_ms: int = DEFAULT_INTERVAL_MS
    rotate_max_file_size_bytes: int = DEFAULT_MAX_FILE_SIZE
    rotate_file_close_interval_s: float = DEFAULT_CLOSE_INTERVAL_S
    file_open_fail_threshold: int = DEFAULT_FILE_OPEN_FAIL_THRESHOLD
    system_metrics: bool = True
    framework_metrics: bool = True
    dataloader: bool = True
    gpu: bool = True
    max_pending_events: int = DEFAULT_MAX_PENDING_EVENTS

    def __post_init__(self) -> None:
        self.validate("ProfilerConfig")

    def validate(self, source: str) -> None:
        """Raise :class:`ConfigurationError` naming ``source`` and the field for any value out of range."""
        _check_int(source, "interval_ms", self.interval_ms, 10, 3_600_000)
        _check_int(source, "rotate_max_file_size_bytes", self.rotate_max_file_size_bytes, 1024, 2**40)
        _check_int(source, "file_open_fail_threshold", self.file_open_fail_threshold, 1, 10**6)
        _check_int(source, "max_pending_events", self.max_pending_events, 1, 10**8)
        interval = self.rotate_file_close_interval_s
        if (
            isinstance(interval, bool)
            or not isinstance(interval, (int, float))
            or not 0.1 <= interval <= 86_400
        ):
            raise ConfigurationError(
                f"{source}: rotate_file_close_interval_s={interval!r} must be seconds in [0.1, 86400]"
            )
        for name in ("enabled", "system_metrics", "framework_metrics", "dataloader", "gpu"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(f"{source}: {name}={getattr(self, name)!r} must be true or false")
        if self.output_path is not None and (not isinstance(self.output_path, str) or not self.output_path):
            raise ConfigurationError(f"{source}: output_path={self.output_path!r} must be a non-empty path")

    @property
    def interval_s(self) -> float:
        return self.interval_ms / 1000.0

    @classmethod
    def parse(
        cls, value: Any, *, source: str = "profiler", env: Mapping[str, str] | None = None
    ) -> ProfilerConfig:
        """A config from any of the accepted shapes (module docstring); ``source`` names it in errors,
        ``env`` gives ``$TRAINING_JOB_NAME`` for an ``S3OutputPath`` (default: this process's)."""
        if isinstance(value, ProfilerConfig):
            return value
        if isinstance(value, bool):
            return cls(enabled=value)
        if isinstance(value, str):
            return _parse_text(value, source, env)
        if isinstance(value, Mapping):
            if any(str(key).lower() in _TOP_KEYS for key in value):
                return _parse_sagemaker(value, source, env=env)
            return _parse_fields(value, source)
        raise ConfigurationError(
            f"{source}: expected a ProfilerConfig, a bool or a dict, got {type(value).__name__}"
        )


def resolve_profiler_config(
    argument: Any = None, env: Mapping[str, str] | None = None
) -> ProfilerConfig | None:
    """The config the hook runs with, or ``None`` when the profiler is off (module docstring's order)."""
    env = os.environ if env is None else env
    if argument is not None:
        parsed = ProfilerConfig.parse(argument, source="Hook(profiler=...)", env=env)
    elif (env.get(env_names.PROFILER) or "").strip():
        parsed = ProfilerConfig.parse(env[env_names.PROFILER], source=f"${env_names.PROFILER}", env=env)
    else:
        path = env.get(env_names.SMPROFILER_CONFIG_PATH) or env_names.SAGEMAKER_PROFILER_CONFIG_PATH
        if not os.path.isfile(path):
            return None
        parsed = load_profiler_config_file(path, env=env)
    return parsed if parsed.enabled else None


def load_profiler_config_file(path: str, *, env: Mapping[str, str] | None = None) -> ProfilerConfig:
    """SageMaker's ``profilerconfig.json`` at ``path``; errors name the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(1_000_001)
    except OSError as error:
        raise ConfigurationError(f"{path}: cannot read the profiler config ({error})") from None
    if len(text) > 1_000_000:
        raise ConfigurationError(f"{path}: the profiler config is larger than 1 MB")
    try:
        body = json.loads(text)
    except ValueError as error:
        raise ConfigurationError(f"{path}: the profiler config is not JSON ({error})") from None
    if not isinstance(body, Mapping):
        raise ConfigurationError(f"{path}: the profiler config must be a JSON object")
    return _parse_sagemaker(body, path, env=env)


def _parse_text(text: str, source: str, env: Mapping[str, str] | None) -> ProfilerConfig:
    stripped = text.strip()
    if stripped.lower() in _TRUE:
        return ProfilerConfig()
    if stripped.lower() in _FALSE:
        return ProfilerConfig(enabled=False)
    try:
        body = json.loads(stripped)
    except ValueError:
        raise ConfigurationError(
            f"{source}: {text[:80]!r} is neither one of {'/'.join(_TRUE + _FALSE[:-1])} nor a JSON object"
        ) from None
    if not isinstance(body, Mapping):
        raise ConfigurationError(f"{source}: a JSON value must be an object, got {type(body).__name__}")
    return ProfilerConfig.parse(body, source=source, env=env)


def _parse_fields(body: Mapping[str, Any], source: str) -> ProfilerConfig:
    known = {f.name for f in fields(ProfilerConfig)}
    unknown = sorted(str(key) for key in body if key not in known)
    if unknown:
        logger.warning("%s: ignoring unknown profiler setting(s) %s", source, unknown)
    return _replace(source, {}, **{key: val for key, val in body.items() if key in known})


def _unchecked_default() -> ProfilerConfig:
    return ProfilerConfig()


def _parse_sagemaker(
    body: Mapping[str, Any], source: str, *, env: Mapping[str, str] | None = None
) -> ProfilerConfig:
    env = os.environ if env is None else env
    top = {str(key).lower(): (str(key), value) for key, value in body.items()}
    unknown = sorted(name for low, (name, _) in top.items() if low not in _TOP_KEYS | _TOP_IGNORED)
    if unknown:
        logger.warning("%s: ignoring unknown profiler key(s) %s", source, unknown)
    values: dict[str, Any] = {}
    keys: dict[str, str] = {"interval_ms": "ProfilingIntervalInMilliseconds"}
    if _to_bool(source, "DisableProfiler", top.get("disableprofiler", ("", False))[1]):
        return _replace(source, {}, enabled=False)
    if "profilingintervalinmilliseconds" in top:
        values["interval_ms"] = _to_int(
            source, "ProfilingIntervalInMilliseconds", top["profilingintervalinmilliseconds"][1]
        )
    params_entry = top.get("profilingparameters")
    params = params_entry[1] if params_entry is not None else None
    if params_entry is not None and not isinstance(params, Mapping):
        raise ConfigurationError(f"{source}: ProfilingParameters must be an object")
    if not params and "s3outputpath" not in top:
        # smdebug: no (or empty) ProfilingParameters means the user turned the profiler off
        return _replace(source, {}, enabled=False)
    for key, value in (params or {}).items():
        low = str(key).lower()
        where = f"ProfilingParameters.{key}"
        if low in _PARAM_NOT_RECORDED:
            logger.info(
                "%s: %s is accepted but not recorded (Tornasole records system and step metrics)", source, key
            )
            continue
        target = _PARAM_KEYS.get(low)
        keys[target or ""] = where
        if target is None:
            logger.warning("%s: ignoring unknown profiler key %s", source, where)
        elif target == "enabled":
            values["enabled"] = _to_bool(source, where, value)
        elif target == "output_path":
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError(f"{source}: {where} must be a non-empty path")
            values["output_path"] = value.strip()
        elif target == "rotate_file_close_interval_s":
            values[target] = _to_float(source, where, value)
        elif target == "dataloader":
            values["dataloader"] = _dataloader_enabled(source, where, value)
        else:
            values[target] = _to_int(source, where, value)
    if "output_path" not in values and "s3outputpath" in top:
        s3 = top["s3outputpath"][1]
        if not isinstance(s3, str) or not s3.startswith("s3://") or len(s3) <= len("s3://"):
            raise ConfigurationError(f"{source}: S3OutputPath={s3!r} must be an s3://bucket[/prefix] URL")
        job = (env.get(env_names.TRAINING_JOB_NAME) or "").strip()
        base = s3.rstrip("/") + (f"/{job}" if job else "")
        values["output_path"] = base + "/profiler-output"
    return _replace(source, keys, **values)


def _replace(source: str, keys: Mapping[str, str], **values: Any) -> ProfilerConfig:
    """A config with ``values``; an error names ``source`` and the key the user wrote (``keys``)."""
    try:
        return replace(_unchecked_default(), **values)
    except ConfigurationError as error:
        detail = str(error).split(": ", 1)[-1]
        field_name = detail.split("=", 1)[0]
        key = keys.get(field_name)
        raise ConfigurationError(f"{source}: {key + ': ' if key else ''}{detail}") from None


def _dataloader_enabled(source: str, where: str, value: Any) -> bool:
    """SageMaker passes ``DataloaderProfilingConfig`` as a JSON string (``{"StartStep": 5, ...}``)."""
    if isinstance(value, Mapping):
        return True
    if isinstance(value, str):
        if not value.strip():
            return True
        try:
            body = json.loads(value)
        except ValueError:
            raise ConfigurationError(f"{source}: {where} must be a JSON object (as a string)") from None
        if isinstance(body, Mapping):
            return not _to_bool(
                source, f"{where}.Disabled", body.get("Disabled", body.get("disabled", False))
            )
    raise ConfigurationError(f"{source}: {where} must be a JSON object")


def _to_bool(source: str, where: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigurationError(f"{source}: {where}={value!r} must be true or false")


def _to_int(source: str, where: str, value: Any) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
        if number != int(number):
            raise ValueError
        return int(number)
    except (TypeError, ValueError, OverflowError):
        raise ConfigurationError(f"{source}: {where}={value!r} must be an integer") from None


def _to_float(source: str, where: str, value: Any) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{source}: {where}={value!r} must be a number") from None


def _check_int(source: str, name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigurationError(f"{source}: {name}={value!r} must be an integer in [{low}, {high}]")
