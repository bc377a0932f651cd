"""Built-in rules by name: an explicit map, so ``rule_to_invoke`` strings resolve to classes.

The map is written out (no scanning, no import-time registration, as in
pylint's checker registry) and resolved lazily: looking up ``"DeadRelu"``
imports only ``tornasole.rules.builtin.dead_relu``. Names are the class names,
which are SageMaker's rule names (``rule_to_invoke``).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from tornasole.exceptions import RuleParameterError

__all__ = [
    "ALIASES",
    "BUILTIN_RULES",
    "alias_names",
    "create_rule",
    "get_rule",
    "other_trial_paths",
    "resolve_alias",
    "rule_names",
]

#: Rule name -> module under ``tornasole.rules.builtin``.
BUILTIN_RULES: dict[str, str] = {
    "VanishingGradient": "vanishing_gradient",
    "ExplodingTensor": "exploding_tensor",
    "WeightUpdateRatio": "weight_update_ratio",
    "DeadRelu": "dead_relu",
    "PoorWeightInitialization": "poor_weight_initialization",
    "SaturatedActivation": "saturated_activation",
    "TensorVariance": "tensor_variance",
    "AllZero": "all_zero",
    "ClassImbalance": "class_imbalance",
    "Confusion": "confusion",
    "LossNotDecreasing": "loss_not_decreasing",
    "Overfit": "overfit",
    "Overtraining": "overtraining",
    "SimilarAcrossRuns": "similar_across_runs",
    "StalledTrainingRule": "stalled_training_rule",
    "UnchangedTensor": "unchanged_tensor",
    "CheckInputImages": "check_input_images",
    "NLPSequenceRatio": "nlp_sequence_ratio",
    "FeatureImportanceOverweight": "feature_importance_overweight",
    "TreeDepth": "tree_depth",
    "CreateXgboostReport": "create_xgboost_report",
    "OscillatingLoss": "oscillating_loss",
    "OscillatingAccuracy": "oscillating_accuracy",
    "StalledLoss": "stalled_loss",
    "SlowConvergence": "slow_convergence",
    "ZeroGradients": "zero_gradients",
    "ValidationLossNotDecreasing": "validation_loss_not_decreasing",
    # issue 29: a badly scaled initialisation, read from the first loss (Karpathy's "verify loss @ init")
    "InitialLossTooHigh": "initial_loss_too_high",
    # issue 29: a loss that climbs far above its start early on (Bengio 2012: the learning rate too high)
    "EarlyLossDivergence": "early_loss_divergence",
    # today's training failures (issue 30): signals named in tornasole.core.llm_signals
    "LossSpike": "loss_spike",
    "GradientNormSpike": "gradient_norm_spike",
    "NonFiniteOrigin": "non_finite_origin",
    "LossScaleCollapse": "loss_scale_collapse",
    "LearningRateDiscontinuity": "learning_rate_discontinuity",
    "ExpertImbalance": "expert_imbalance",
    "AttentionEntropyCollapse": "attention_entropy_collapse",
    "DataReplay": "data_replay",
    "AttentionLogitGrowth": "attention_logit_growth",
    # issue 29: the loss's input read from the trial (DeepFD's loss mutation)
    "SoftmaxBeforeCrossEntropy": "softmax_before_cross_entropy",
    # issue 29: a squared-error model no better than the targets' mean (R^2 <= 0) on validation data
    "RegressionWorseThanMean": "regression_worse_than_mean",
    # issue 29: the model's inputs far off unit scale (DeepFD's "drop the input normalisation")
    "InputsNotNormalized": "inputs_not_normalized",
    # issue 29: a cross-entropy classifier no better than the class prior (McFadden's pseudo-R^2 <= 0)
    "ClassifierNoBetterThanPrior": "classifier_no_better_than_prior",
}

#: Names that stand for a built-in rule with preset parameters: ``name -> (rule, {parameter: value})``.
#: Why: the recommended set names its ``UnchangedTensor`` on the weights ``UnchangedWeights``, and
#: ``jobs status`` shows that name; ``invoke``, ``register`` and ``rules list --name`` must accept what
#: the user reads there. Parameters given with the alias override its presets.
ALIASES: dict[str, tuple[str, dict[str, str]]] = {
    "UnchangedWeights": (
        "UnchangedTensor",
        {
            "collection_names": "weights",
            "num_steps": "3",
            "skip_frozen": "True",
            "fade_out_factor": "10",
            "fade_out_steps": "32",
            # a schedule decayed below 1e-3 of its peak (docs/RULES.md); designed on resmlp and digits_keras
            "faded_lr_fraction": "0.001",
            # a tail too slow per saved step to see, not a stop (docs/RULES.md); designed on induction_tf
            "fade_out_drift": "True",
        },
    ),
}

_OTHER_TRIAL_KEY = re.compile(r"^other_trials?(_\d+)?$")


def rule_names() -> list[str]:
    """Names of every built-in rule, sorted."""
    return sorted(BUILTIN_RULES)


def alias_names() -> list[str]:
    """Names of the aliases (:data:`ALIASES`), sorted."""
    return sorted(ALIASES)


def resolve_alias(name: str, params: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """``(rule, parameters)`` for ``name``: an alias's rule with its presets under ``params``, or
    ``name`` and ``params`` unchanged.

    Examples
    --------
    >>> resolve_alias("UnchangedWeights", {"num_steps": "5"})[1]["num_steps"]
    '5'
    """
    given = dict(params or {})
    if name in ALIASES:
        target, presets = ALIASES[name]
        return target, {**presets, **given}
    return name, given


def get_rule(name: str) -> type:
    """The built-in rule class called ``name``.

    Raises
    ------
    RuleParameterError
        Unknown name; the message lists the known ones.

    Examples
    --------
    >>> get_rule("VanishingGradient").__name__
    'VanishingGradient'
    """
    module = BUILTIN_RULES.get(ALIASES[name][0] if name in ALIASES else name)
    if module is None:
        raise RuleParameterError(
            name, None, f"unknown built-in rule {name!r}; known rules: {', '.join(rule_names())}"
        )
    target = ALIASES[name][0] if name in ALIASES else name
    return getattr(importlib.import_module(f"tornasole.rules.builtin.{module}"), target)


def other_trial_paths(params: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Split ``other_trials``/``other_trial_N`` entries (paths; ``;`` or ``,`` separated) from the rest.

    The SageMaker SDK sends other trials as ``other_trial_0``, ``other_trial_1``...; the 2019 format
    used ``other-trials-paths``. Returns ``(paths in key order, remaining parameters)``.
    """
    paths: list[str] = []
    rest: dict[str, Any] = {}
    for key in sorted(params, key=lambda k: (len(k), k)):
        value = params[key]
        if _OTHER_TRIAL_KEY.match(key) or key in ("other-trials-paths", "other_trials_paths"):
            items = value if isinstance(value, (list, tuple)) else re.split(r"[;,]", str(value))
            paths.extend(str(p).strip() for p in items if str(p).strip())
        else:
            rest[key] = value
    return paths, rest


def create_rule(name: str, base_trial: Any, other_trials: list | None = None, **params: Any) -> Any:
    """Build the built-in rule ``name`` on ``base_trial`` from string (or typed) parameters.

    ``other_trials``/``other_trial_N`` parameters holding trial paths are turned into trials with
    :func:`tornasole.trials.create_trial` when ``other_trials`` is not given.

    Examples
    --------
    >>> # rule = create_rule("VanishingGradient", trial, threshold="0.0001")
    """
    target, params = resolve_alias(name, params)
    cls = get_rule(target)
    paths, rest = other_trial_paths(params)
    if other_trials is None and paths:
        from tornasole.trials import create_trial

        other_trials = [create_trial(p) for p in paths]
    rule = cls(base_trial, other_trials=other_trials, **rest)
    if target != name:
        rule.rule_name = name  # what the user asked for, as jobs status shows it
    return rule
