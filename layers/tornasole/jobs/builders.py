"""``Rule.sagemaker`` / ``Rule.custom`` / ``CollectionConfig``: the SageMaker SDK's debugger builders.

Why mirror them: a user's estimator code (``rules=[Rule.sagemaker(rule_configs.vanishing_gradient())]``)
should port by changing only the import root. The builders produce SageMaker's
``DebugRuleConfigurations`` entries (``to_debugger_rule_config_dict``) and the
collections each rule needs (merged into ``DebugHookConfig`` at registration),
exactly as the SDK does before calling CreateTrainingJob.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tornasole.evaluator.models import debug_rule_configuration

__all__ = ["Rule", "CollectionConfig"]


@dataclass(frozen=True)
class CollectionConfig:
    """``sagemaker.debugger.CollectionConfig``: a collection name and its string parameters."""

    name: str
    parameters: dict[str, str] | None = None

    def to_request_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"CollectionName": self.name}
        if self.parameters:
            d["CollectionParameters"] = {k: str(v) for k, v in self.parameters.items()}
        return d

    _to_request_dict = to_request_dict  # the SDK's (private) name


def _collection_dict(c: Any) -> dict[str, Any]:
    if isinstance(c, CollectionConfig):
        return c.to_request_dict()
    if isinstance(c, dict):
        return dict(c)
    if hasattr(c, "_to_request_dict"):
        return c._to_request_dict()
    raise TypeError(f"not a collection configuration: {c!r}")


def _action_list(actions: Any) -> list[dict[str, Any]]:
    if actions is None:
        return []
    if isinstance(actions, str):
        parsed = json.loads(actions)
        return parsed if isinstance(parsed, list) else [parsed]
    if isinstance(actions, dict):
        return [dict(actions)]
    if isinstance(actions, (list, tuple)):
        return [d for a in actions for d in _action_list(a)]
    for attr in ("serialize", "to_json", "to_dict"):
        if hasattr(actions, attr):
            return _action_list(getattr(actions, attr)())
    raise TypeError(
        f"actions must be an ActionList, an action, a list of dicts or a JSON string, got {actions!r}"
    )


def _action_json(actions: Any) -> str | None:
    """``rule_configs.ActionList`` / an action / a list of dicts / a JSON string -> ``action_json``."""
    if isinstance(actions, str):
        return actions
    items = _action_list(actions)
    return json.dumps(items) if items else None


def _add_trials_and_actions(params: dict[str, str], other_trials: list[str] | None, actions: Any) -> None:
    """The reserved ``RuleParameters`` both builders add: ``other_trial_<i>`` and ``action_json``."""
    for i, path in enumerate(other_trials or ()):
        params[f"other_trial_{i}"] = path
    action = _action_json(actions)
    if action is not None:
        params["action_json"] = action


@dataclass
class Rule:
    """A debugger rule configuration, built like the SageMaker SDK's ``sagemaker.debugger.Rule``.

    Examples
    --------
    >>> r = Rule.custom(name="MyRule", source="s3://b/rules/my_rule.py", rule_to_invoke="MyRule",
    ...                 rule_parameters={"threshold": "0.5"})
    >>> r.to_debugger_rule_config_dict()["RuleParameters"]["source_s3_uri"]
    's3://b/rules/my_rule.py'
    """

    name: str
    image_uri: str = "tornasole"
    rule_parameters: dict[str, str] = field(default_factory=dict)
    collections_to_save: list[dict[str, Any]] = field(default_factory=list)
    instance_type: str | None = None  # a custom rule's resources, sent and described as the SDK does
    volume_size_in_gb: int | None = None

    @classmethod
    def sagemaker(
        cls,
        base_config: dict[str, Any],
        name: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials_s3_input_paths: list[str] | None = None,
        rule_parameters: dict[str, Any] | None = None,
        collections_to_save: list[Any] | None = None,
        actions: Any = None,
    ) -> Rule:
        """A built-in rule from a ``rule_configs`` function's result, with overrides (SDK semantics)."""
        conf = base_config.get("DebugRuleConfiguration", base_config)
        params = {k: str(v) for k, v in (conf.get("RuleParameters") or {}).items()}
        rule_name = conf.get("RuleConfigurationName") or params.get("rule_to_invoke")
        if not rule_name:
            raise ValueError(f"base_config has no rule name: {base_config!r}")
        params.setdefault("rule_to_invoke", rule_name)
        params.update({k: str(v) for k, v in (rule_parameters or {}).items()})
        _add_trials_and_actions(params, other_trials_s3_input_paths, actions)
        if collections_to_save is not None:
            colls = [_collection_dict(c) for c in collections_to_save]
        else:
            colls = [_collection_dict(c) for c in base_config.get("CollectionConfigurations", [])]
        return cls(name=name or rule_name, rule_parameters=params, collections_to_save=colls)

    @classmethod
    def custom(
        cls,
        name: str,
        image_uri: str | None = None,
        instance_type: str | None = None,
        volume_size_in_gb: int | None = None,
        source: str | None = None,
        rule_to_invoke: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials_s3_input_paths: list[str] | None = None,
        rule_parameters: dict[str, Any] | None = None,
        collections_to_save: list[Any] | None = None,
        actions: Any = None,
    ) -> Rule:
        """A custom rule: ``source`` (an ``s3://`` .py file) defines class ``rule_to_invoke``."""
        params = {k: str(v) for k, v in (rule_parameters or {}).items()}
        params["rule_to_invoke"] = rule_to_invoke or name
        if source:
            params["source_s3_uri"] = source
        _add_trials_and_actions(params, other_trials_s3_input_paths, actions)
        return cls(
            name=name,
            image_uri=image_uri or "tornasole",
            rule_parameters=params,
            collections_to_save=[_collection_dict(c) for c in collections_to_save or ()],
            instance_type=instance_type,
            volume_size_in_gb=volume_size_in_gb,
        )

    def to_debugger_rule_config_dict(self) -> dict[str, Any]:
        """The ``DebugRuleConfigurations`` entry (the SDK's method name)."""
        return debug_rule_configuration(
            self.name, self.image_uri, self.rule_parameters, self.instance_type, self.volume_size_in_gb
        )
