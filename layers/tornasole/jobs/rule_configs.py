"""``rule_configs``: the rule configuration dictionaries of SageMaker's ``smdebug_rulesconfig``.

``rule_configs.vanishing_gradient()`` returns the same dict as
``smdebug_rulesconfig.vanishing_gradient()``::

    {"DebugRuleConfiguration": {"RuleConfigurationName": "VanishingGradient",
                                "RuleParameters": {"rule_to_invoke": "VanishingGradient"}},
     "CollectionConfigurations": [{"CollectionName": "gradients",
                                   "CollectionParameters": {"save_interval": "500"}}]}

As in ``smdebug_rulesconfig``, ``RuleParameters`` holds only ``rule_to_invoke``:
the defaults live in the rule class (``PARAMETERS``), so a configuration and
the rule can never disagree. Keyword arguments are validated against the rule
and added as strings (``vanishing_gradient(threshold=1e-5)`` gives
``"threshold": "1e-05"``); ``CollectionConfigurations`` is left out for rules
that bundle no collection, as ``smdebug_rulesconfig`` does.

Actions (``ActionList``, ``StopTraining``, ``Email``, ``SMS``) build the
``action_json`` string of RULES.md "Actions" (names in lower case, as
``smdebug_rulesconfig`` writes them; serialised with ``json.dumps``, where
``smdebug_rulesconfig`` writes backslash-escaped quotes: the rules accept both).
``get_collection`` and ``is_valid_action_object`` are ``smdebug_rulesconfig``'s
helpers of the same names (the SageMaker SDK calls them). Builders of rules
that ``smdebug_rulesconfig`` does not know (``oscillating_loss``, ``oscillating_accuracy``,
``stalled_loss``, ``slow_convergence``, ``zero_gradients``, ``validation_loss_not_decreasing``, and issue
30's ``loss_spike``, ``gradient_norm_spike``, ``non_finite_origin``, ``loss_scale_collapse``,
``learning_rate_discontinuity``, ``expert_imbalance``, ``attention_entropy_collapse``; issue 29's
``initial_loss_too_high``, ``early_loss_divergence``) follow the same shape.
"""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Any

from tornasole.exceptions import ConfigurationError
from tornasole.format.capture_request import (
    DEFAULT_CAPTURE_STEPS,
    CaptureRequestError,
    parse_collections,
    parse_steps,
)
from tornasole.rules.params import parse_params
from tornasole.rules.registry import get_rule

__all__ = [
    "vanishing_gradient",
    "exploding_tensor",
    "weight_update_ratio",
    "dead_relu",
    "poor_weight_initialization",
    "saturated_activation",
    "tensor_variance",
    "all_zero",
    "class_imbalance",
    "confusion",
    "loss_not_decreasing",
    "overfit",
    "overtraining",
    "similar_across_runs",
    "stalled_training_rule",
    "unchanged_tensor",
    "check_input_images",
    "nlp_sequence_ratio",
    "feature_importance_overweight",
    "tree_depth",
    "create_xgboost_report",
    "oscillating_loss",
    "oscillating_accuracy",
    "stalled_loss",
    "slow_convergence",
    "zero_gradients",
    "validation_loss_not_decreasing",
    "loss_spike",
    "gradient_norm_spike",
    "non_finite_origin",
    "loss_scale_collapse",
    "learning_rate_discontinuity",
    "expert_imbalance",
    "attention_entropy_collapse",
    "data_replay",
    "attention_logit_growth",
    "initial_loss_too_high",
    "softmax_before_cross_entropy",
    "early_loss_divergence",
    "get_collection",
    "is_valid_action_object",
    "Action",
    "ActionList",
    "StopTraining",
    "Capture",
    "Email",
    "SMS",
    "to_param_string",
]


def to_param_string(value: Any) -> str:
    """How a typed parameter is written into ``RuleParameters`` (everything there is a string).

    Examples
    --------
    >>> to_param_string(True), to_param_string([0, 1]), to_param_string(1e-05)
    ('True', '0,1', '1e-05')
    """
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return ",".join(to_param_string(v) for v in value)
    if isinstance(value, re.Pattern):
        return value.pattern
    if isinstance(value, (ActionList, Action)):
        return value.serialize()
    if isinstance(value, Enum):
        return value.name
    return str(value)


def _config(name: str, overrides: dict[str, Any]) -> dict[str, Any]:
    cls = get_rule(name)
    parse_params(cls, overrides)  # validate now, with the rule's own error messages
    params = {"rule_to_invoke": name}
    params.update({k: to_param_string(v) for k, v in overrides.items()})
    config: dict[str, Any] = {
        "DebugRuleConfiguration": {"RuleConfigurationName": name, "RuleParameters": params}
    }
    if cls.COLLECTIONS:
        config["CollectionConfigurations"] = [
            {"CollectionName": coll, "CollectionParameters": dict(cparams)}
            for coll, cparams in cls.COLLECTIONS
        ]
    return config


def vanishing_gradient(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.VanishingGradient`."""
    return _config("VanishingGradient", rule_parameters)


def exploding_tensor(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.ExplodingTensor`."""
    return _config("ExplodingTensor", rule_parameters)


def weight_update_ratio(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.WeightUpdateRatio`."""
    return _config("WeightUpdateRatio", rule_parameters)


def dead_relu(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.DeadRelu`."""
    return _config("DeadRelu", rule_parameters)


def poor_weight_initialization(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.PoorWeightInitialization`."""
    return _config("PoorWeightInitialization", rule_parameters)


def saturated_activation(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.SaturatedActivation`."""
    return _config("SaturatedActivation", rule_parameters)


def tensor_variance(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.TensorVariance`."""
    return _config("TensorVariance", rule_parameters)


def all_zero(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.AllZero`."""
    return _config("AllZero", rule_parameters)


def class_imbalance(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.ClassImbalance`."""
    return _config("ClassImbalance", rule_parameters)


def confusion(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.Confusion`."""
    return _config("Confusion", rule_parameters)


def loss_not_decreasing(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.LossNotDecreasing`."""
    return _config("LossNotDecreasing", rule_parameters)


def overfit(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.Overfit`."""
    return _config("Overfit", rule_parameters)


def overtraining(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.Overtraining`."""
    return _config("Overtraining", rule_parameters)


def similar_across_runs(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.SimilarAcrossRuns`."""
    return _config("SimilarAcrossRuns", rule_parameters)


def stalled_training_rule(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.StalledTrainingRule`."""
    return _config("StalledTrainingRule", rule_parameters)


def unchanged_tensor(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.UnchangedTensor`."""
    return _config("UnchangedTensor", rule_parameters)


def check_input_images(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.CheckInputImages`."""
    return _config("CheckInputImages", rule_parameters)


def nlp_sequence_ratio(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.NLPSequenceRatio`."""
    return _config("NLPSequenceRatio", rule_parameters)


def feature_importance_overweight(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.FeatureImportanceOverweight`."""
    return _config("FeatureImportanceOverweight", rule_parameters)


def tree_depth(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.TreeDepth`."""
    return _config("TreeDepth", rule_parameters)


def create_xgboost_report(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.CreateXgboostReport`."""
    return _config("CreateXgboostReport", rule_parameters)


def oscillating_loss(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.OscillatingLoss` (Tornasole's own rule)."""
    return _config("OscillatingLoss", rule_parameters)


def oscillating_accuracy(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.OscillatingAccuracy` (Tornasole's own rule)."""
    return _config("OscillatingAccuracy", rule_parameters)


def stalled_loss(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.StalledLoss` (Tornasole's own rule)."""
    return _config("StalledLoss", rule_parameters)


def slow_convergence(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.SlowConvergence` (Tornasole's own rule)."""
    return _config("SlowConvergence", rule_parameters)


def zero_gradients(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.ZeroGradients` (Tornasole's own rule)."""
    return _config("ZeroGradients", rule_parameters)


def validation_loss_not_decreasing(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.ValidationLossNotDecreasing` (Tornasole's own
    rule)."""
    return _config("ValidationLossNotDecreasing", rule_parameters)


def loss_spike(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.LossSpike` (Tornasole's own rule)."""
    return _config("LossSpike", rule_parameters)


def gradient_norm_spike(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.GradientNormSpike` (Tornasole's own rule)."""
    return _config("GradientNormSpike", rule_parameters)


def non_finite_origin(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.NonFiniteOrigin` (Tornasole's own rule)."""
    return _config("NonFiniteOrigin", rule_parameters)


def loss_scale_collapse(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.LossScaleCollapse` (Tornasole's own rule)."""
    return _config("LossScaleCollapse", rule_parameters)


def learning_rate_discontinuity(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.LearningRateDiscontinuity` (Tornasole's)."""
    return _config("LearningRateDiscontinuity", rule_parameters)


def expert_imbalance(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.ExpertImbalance` (Tornasole's own rule)."""
    return _config("ExpertImbalance", rule_parameters)


def attention_entropy_collapse(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.AttentionEntropyCollapse` (Tornasole's)."""
    return _config("AttentionEntropyCollapse", rule_parameters)


def data_replay(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.DataReplay` (Tornasole's own rule)."""
    return _config("DataReplay", rule_parameters)


def attention_logit_growth(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.AttentionLogitGrowth` (Tornasole's)."""
    return _config("AttentionLogitGrowth", rule_parameters)


def initial_loss_too_high(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.InitialLossTooHigh` (Tornasole's own rule)."""
    return _config("InitialLossTooHigh", rule_parameters)


def softmax_before_cross_entropy(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.SoftmaxBeforeCrossEntropy` (Tornasole's)."""
    return _config("SoftmaxBeforeCrossEntropy", rule_parameters)


def regression_worse_than_mean(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.RegressionWorseThanMean` (Tornasole's)."""
    return _config("RegressionWorseThanMean", rule_parameters)


def classifier_no_better_than_prior(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.ClassifierNoBetterThanPrior` (Tornasole's)."""
    return _config("ClassifierNoBetterThanPrior", rule_parameters)


def early_loss_divergence(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.EarlyLossDivergence` (Tornasole's own rule)."""
    return _config("EarlyLossDivergence", rule_parameters)


def inputs_not_normalized(**rule_parameters: Any) -> dict[str, Any]:
    """Rule configuration of :class:`~tornasole.rules.generic.InputsNotNormalized` (Tornasole's)."""
    return _config("InputsNotNormalized", rule_parameters)


#: ``smdebug_rulesconfig``'s collection table, as it ships it (``relu_output``/``relu_input`` without the
#: ``CollectionName`` wrapper, exactly as there).
_COLLECTION_TABLE: dict[str, dict[str, Any]] = {
    "weights": {"CollectionName": "weights", "CollectionParameters": {"save_interval": "500"}},
    "gradients": {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}},
    "losses": {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}},
    "input_image": {
        "CollectionName": "input_image",
        "CollectionParameters": {"include_regex": ".*hybridsequential0_input_0", "save_interval": "500"},
    },
    "relu_output": {"include_regex": ".*relu_output", "save_interval": "500"},
    "relu_input": {"include_regex": ".*relu_input", "save_interval": "500"},
    "input_sequence": {
        "CollectionName": "input_sequence",
        "CollectionParameters": {"include_regex": ".*embedding0_input_0", "save_interval": "500"},
    },
}


def get_collection(collection_name: str) -> dict[str, Any] | None:
    """``smdebug_rulesconfig.get_collection``: the collection configuration of that name, or None.

    Examples
    --------
    >>> get_collection("losses")
    {'CollectionName': 'losses', 'CollectionParameters': {'save_interval': '500'}}
    >>> get_collection("nope") is None
    True
    """
    found = _COLLECTION_TABLE.get(collection_name)
    return None if found is None else json.loads(json.dumps(found))


def is_valid_action_object(actions: Any) -> bool:
    """``smdebug_rulesconfig.is_valid_action_object``: an :class:`Action` or an :class:`ActionList`."""
    return isinstance(actions, (Action, ActionList))


# -- actions -------------------------------------------------------------------------------------------


class Action:
    """One action; ``serialize()`` gives its JSON object."""

    def __init__(self, **parameters: str | None) -> None:
        self.action_parameters = {"name": type(self).__name__.lower()}
        self.action_parameters.update({k: v for k, v in parameters.items() if v is not None})

    def serialize(self) -> str:
        return json.dumps(self.action_parameters)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.action_parameters})"


class StopTraining(Action):
    """Stop the training job when the rule fires (``training_job_prefix`` None: the watched job).

    Examples
    --------
    >>> StopTraining("my-job").serialize()
    '{"name": "stoptraining", "training_job_prefix": "my-job"}'
    """

    def __init__(self, training_job_prefix: str | None = None) -> None:
        self.use_default_training_job_prefix = training_job_prefix is None
        super().__init__(training_job_prefix=training_job_prefix)

    def update_training_job_prefix_if_not_specified(self, training_job_name: str) -> None:
        if self.use_default_training_job_prefix:
            self.action_parameters["training_job_prefix"] = training_job_name


class Email(Action):
    """Send an e-mail (through the stack's alert topic) when the rule fires."""

    def __init__(self, email_address: str) -> None:
        if not isinstance(email_address, str) or not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", email_address):
            raise ConfigurationError(f"Email: {email_address!r} is not an e-mail address")
        super().__init__(endpoint=email_address)


class SMS(Action):
    """Send an SMS when the rule fires; the number is ``+`` and 10 to 15 digits."""

    def __init__(self, phone_number: str) -> None:
        if not isinstance(phone_number, str) or not re.fullmatch(r"\+\d{10,15}", phone_number):
            raise ConfigurationError(f"SMS: {phone_number!r} is not a phone number (+ and 10-15 digits)")
        super().__init__(endpoint=phone_number)


class Capture(Action):
    """Ask the training job for full tensors of ``collections`` at its next ``steps`` steps when the rule
    first fires (Tornasole's addition; docs/RULES.md "Actions"). Bounds are checked here, as at registration.

    Examples
    --------
    >>> Capture(20, "weights,gradients").serialize()
    '{"name": "capture", "steps": "20", "collections": "gradients,weights"}'
    """

    def __init__(
        self, steps: int | str = DEFAULT_CAPTURE_STEPS, collections: str | list[str] | None = None
    ) -> None:
        try:
            parsed_steps = parse_steps(steps, "Capture")
            parsed = parse_collections(collections, "Capture")
        except CaptureRequestError as exc:
            raise ConfigurationError(str(exc)) from exc
        super().__init__(steps=str(parsed_steps), collections=",".join(parsed))


class ActionList:
    """Actions of one rule; ``serialize()`` is the ``action_json`` string.

    Examples
    --------
    >>> ActionList(StopTraining("job"), Email("a@b.co")).serialize()
    '[{"name": "stoptraining", "training_job_prefix": "job"}, {"name": "email", "endpoint": "a@b.co"}]'
    """

    def __init__(self, *actions: Action) -> None:
        if not all(isinstance(a, Action) for a in actions):
            raise TypeError("ActionList takes Action objects (StopTraining, Email, SMS, Capture)")
        self.actions = actions

    def update_training_job_prefix_if_not_specified(self, training_job_name: str) -> None:
        for a in self.actions:
            if isinstance(a, StopTraining):
                a.update_training_job_prefix_if_not_specified(training_job_name)

    def serialize(self) -> str:
        return json.dumps([a.action_parameters for a in self.actions])
