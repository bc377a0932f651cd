"""Creating a hook from a SageMaker DebugHookConfig JSON file, so no training-code change is needed.

File shape (SageMaker's ``DebugHookConfig``; every ``HookParameters`` /
``CollectionParameters`` value is a string, as SageMaker passes them)::

    {"S3OutputPath": "s3://bucket/prefix", "LocalPath": "/opt/ml/output/tensors",
     "HookParameters": {"save_interval": "10", "include_regex": "fc1.*,relu",
                        "reductions": "mean,abs_max,l2_norm", "save_raw_tensor": "true",
                        "train.save_interval": "5", "include_workers": "all"},
     "CollectionConfigurations": [
        {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "2"}}]}

Where the file is and where output goes: :mod:`tornasole.hooks.config_paths`
(``$TORNASOLE_CONFIG_FILE_PATH``, ``$SMDEBUG_CONFIG_FILE_PATH``, SageMaker's
path; ``LocalPath``, else ``<S3OutputPath>[/<TrainingJobName>/debug-output]``).
TensorBoard output: SageMaker's TensorBoardOutputConfig file when present,
else ``export_tensorboard`` / ``tensorboard_dir`` in ``HookParameters``.
A collection configured twice (the SDK sends a rule's and the user's) saves
every step either configuration asks for. Every error names the file and the field.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tornasole.core.config_constants import (  # noqa: F401 - smdebug.core.json_config exports them
    CONFIG_FILE_PATH_ENV_STR,
    DEFAULT_CONFIG_FILE_PATH,
    DEFAULT_RESOURCE_CONFIG_FILE,
)
from tornasole.core.reduction_config import ReductionConfig
from tornasole.core.save_config import SaveConfig, SaveConfigMode
from tornasole.exceptions import ConfigurationError
from tornasole.hooks.config_paths import (
    debug_output_dir,
    read_config_file,
    resolve_config_path,
    tensorboard_dir_from_config,
)
from tornasole.modes import ModeKeys

__all__ = ["HookConfig", "load_hook_config", "resolve_config_path", "apply_collection_configs"]

logger = logging.getLogger(__name__)

_SAVE_KEYS = ("save_interval", "start_step", "end_step", "save_steps")
_MODE_PREFIX = {
    "train.": ModeKeys.TRAIN,
    "eval.": ModeKeys.EVAL,
    "predict.": ModeKeys.PREDICT,
    "global.": ModeKeys.GLOBAL,
}
_HOOK_KEYS = {
    "include_regex",
    "reductions",
    "save_raw_tensor",
    "save_shape",
    "save_all",
    "include_workers",
    "export_tensorboard",
    "tensorboard_dir",
    "dry_run",
}
_KNOWN_IGNORED = {"save_histogram"}


@dataclass
class HookConfig:
    """What a DebugHookConfig file asks for: hook keyword arguments plus per-collection settings."""

    path: str
    out_dir: str
    hook_kwargs: dict[str, Any] = field(default_factory=dict)
    # (collection name, include_regex list, SaveConfig, ReductionConfig or None, save_histogram or None)
    collections: list[tuple[str, list[str], SaveConfig, ReductionConfig | None, bool | None]] = field(
        default_factory=list
    )


def _bool(where: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise ConfigurationError(f"{where}={value!r} is not a boolean (true/false)")


def _split(value: Any) -> list[str]:
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(x).strip() for x in items if str(x).strip()]


def _mode_settings(where: str, params: Mapping[str, Any]) -> dict[ModeKeys | None, dict[str, Any]]:
    """``{None: common settings, ModeKeys.TRAIN: train.* settings, ...}``, values parsed."""
    out: dict[ModeKeys | None, dict[str, Any]] = {}
    for key, value in params.items():
        mode, bare = None, key
        for prefix, m in _MODE_PREFIX.items():
            if key.startswith(prefix):
                mode, bare = m, key[len(prefix) :]
        if bare not in _SAVE_KEYS:
            continue
        try:
            parsed: Any = [int(s) for s in _split(value)] if bare == "save_steps" else int(str(value).strip())
        except ValueError:
            raise ConfigurationError(f"{where}.{key}={value!r} is not an integer") from None
        out.setdefault(mode, {})[bare] = parsed
    return out


def _save_config(where: str, params: Mapping[str, Any], base: dict[ModeKeys, dict[str, Any]]) -> SaveConfig:
    settings = _mode_settings(where, params)
    common = settings.get(None, {})
    modes = {m: {**base.get(m, {}), **common, **settings.get(m, {})} for m in ModeKeys}
    try:
        return SaveConfig(mode_save_configs={m: SaveConfigMode(**kw) for m, kw in modes.items()})
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from exc


def _reduction_config(where: str, params: Mapping[str, Any]) -> ReductionConfig | None:
    if "reductions" not in params and "save_shape" not in params:
        return None
    try:
        return ReductionConfig.from_reductions_string(
            str(params.get("reductions", "")),
            save_raw_tensor=_bool(f"{where}.save_raw_tensor", params.get("save_raw_tensor", False)),
            save_shape=_bool(f"{where}.save_shape", params.get("save_shape", False)),
        )
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}.reductions: {exc}") from exc


def _object(where: str, value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{where} must be an object, got {type(value).__name__}")
    return value


def load_hook_config(path: str | None = None) -> HookConfig:
    """Read and validate a DebugHookConfig file (see the module docstring).

    Examples
    --------
    >>> import json, tempfile
    >>> f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    >>> json.dump({"LocalPath": "/tmp/out", "HookParameters": {"save_interval": "7"}}, f); f.close()
    >>> cfg = load_hook_config(f.name)
    >>> cfg.out_dir, cfg.hook_kwargs["save_config"].get_save_config(ModeKeys.TRAIN).save_interval
    ('/tmp/out', 7)
    """
    file, doc = read_config_file(path)
    out_dir = debug_output_dir(file, doc)
    where = f"{file}: HookParameters"
    hp = _object(where, doc.get("HookParameters"))
    unknown = set(hp) - _HOOK_KEYS - _KNOWN_IGNORED
    unknown = {k for k in unknown if k.split(".", 1)[-1] not in _SAVE_KEYS}
    if unknown:
        logger.warning("%s: ignoring unknown parameter(s) %s", where, sorted(unknown))
    base = {m: kw for m, kw in _mode_settings(where, hp).items() if m is not None}
    common = _mode_settings(where, hp).get(None, {})
    kwargs: dict[str, Any] = {"save_config": _save_config(where, hp, {})}
    rc = _reduction_config(where, hp)
    if rc is not None:
        kwargs["reduction_config"] = rc
    if "include_regex" in hp:
        kwargs["include_regex"] = _split(hp["include_regex"])
    if "save_all" in hp:
        kwargs["save_all"] = _bool(f"{where}.save_all", hp["save_all"])
    if "include_workers" in hp:
        if hp["include_workers"] not in ("one", "all"):
            raise ConfigurationError(
                f"{where}.include_workers={hp['include_workers']!r} must be 'one' or 'all'"
            )
        kwargs["include_workers"] = hp["include_workers"]
    if "dry_run" in hp:
        kwargs["dry_run"] = _bool(f"{where}.dry_run", hp["dry_run"])
    tb_dir = tensorboard_dir_from_config()
    if tb_dir is not None:
        kwargs["tensorboard_dir"] = tb_dir
    else:
        if "export_tensorboard" in hp:
            kwargs["export_tensorboard"] = _bool(f"{where}.export_tensorboard", hp["export_tensorboard"])
        if hp.get("tensorboard_dir"):
            kwargs["tensorboard_dir"] = str(hp["tensorboard_dir"])
    cfg = HookConfig(path=file, out_dir=str(out_dir), hook_kwargs=kwargs)

    colls = doc.get("CollectionConfigurations") or []
    if not isinstance(colls, list):
        raise ConfigurationError(f"{file}: CollectionConfigurations must be a list")
    hook_modes = {m: {**common, **base.get(m, {})} for m in ModeKeys}
    for i, entry in enumerate(colls):
        cwhere = f"{file}: CollectionConfigurations[{i}]"
        entry = _object(cwhere, entry)
        name = entry.get("CollectionName")
        if not name or not isinstance(name, str):
            raise ConfigurationError(f"{cwhere}.CollectionName is missing")
        cwhere = f"{file}: CollectionConfigurations[{i}] ({name}).CollectionParameters"
        params = _object(cwhere, entry.get("CollectionParameters"))
        regex = _split(params["include_regex"]) if "include_regex" in params else []
        hist = (
            _bool(f"{cwhere}.save_histogram", params["save_histogram"])
            if "save_histogram" in params
            else None
        )
        cfg.collections.append(
            (name, regex, _save_config(cwhere, params, hook_modes), _reduction_config(cwhere, params), hist)
        )
    cfg.collections = _merge_duplicates(cfg.collections)
    if cfg.collections:
        kwargs["include_collections"] = [c[0] for c in cfg.collections]
    return cfg


def _merge_duplicates(
    entries: list[tuple[str, list[str], SaveConfig, ReductionConfig | None, bool | None]],
) -> list[tuple[str, list[str], SaveConfig, ReductionConfig | None, bool | None]]:
    """One entry per collection name, first-seen order: steps, regexes and reductions of all entries."""
    merged: dict[str, tuple[str, list[str], SaveConfig, ReductionConfig | None, bool | None]] = {}
    for name, regex, save_config, rc, hist in entries:
        prev = merged.get(name)
        if prev is None:
            merged[name] = (name, list(regex), save_config, rc, hist)
            continue
        _, p_regex, p_save, p_rc, p_hist = prev
        merged[name] = (
            name,
            p_regex + [r for r in regex if r not in p_regex],
            SaveConfig.union(p_save, save_config),
            _union_reductions(p_rc, rc),
            hist if p_hist is None else (p_hist if hist is None else p_hist or hist),
        )
    return list(merged.values())


def _union_reductions(a: ReductionConfig | None, b: ReductionConfig | None) -> ReductionConfig | None:
    if a is None or b is None:
        return a if b is None else b

    def both(x: tuple[str, ...], y: tuple[str, ...]) -> list[str]:
        return list(dict.fromkeys(x + y))

    return ReductionConfig(
        both(a.reductions, b.reductions),
        both(a.abs_reductions, b.abs_reductions),
        both(a.norms, b.norms),
        both(a.abs_norms, b.abs_norms),
        save_raw_tensor=a.save_raw_tensor or b.save_raw_tensor,
        save_shape=a.save_shape or b.save_shape,
    )


def apply_collection_configs(hook: Any, cfg: HookConfig) -> None:
    """Give the hook's collections the per-collection settings of ``cfg``."""
    for name, regex, save_config, reduction_config, hist in cfg.collections:
        coll = hook.get_collection(name)
        if regex:
            coll.include(regex)
        coll.save_config = save_config
        if reduction_config is not None:
            coll.reduction_config = reduction_config
        if hist is not None:
            coll.save_histogram = hist
