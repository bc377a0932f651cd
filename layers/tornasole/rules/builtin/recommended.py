"""The recommended rule set: what Tornasole registers when a job names no rules.

Rules whose parameters were calibrated on the project's detection benchmark (``bench/detection``:
tiny PyTorch runs labelled while they train by published criteria, never by the rules) and checked on a
held-out split evaluated once, then on model families (``bench/detection/families``). SageMaker's defaults
alarm on nearly every healthy run there; this set is meant to stay quiet on them. Why each parameter has
its value, with the numbers behind it, is in ``docs/RULES.md`` ("How the recommended set was
calibrated"); the current figures are in ``bench/RESULTS.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tornasole.rules.params import parse_params
from tornasole.rules.registry import get_rule

__all__ = [
    "recommended_rules",
    "recommended_rules_that_cannot_apply",
    "opt_in_rules",
    "RECOMMENDED",
    "OPT_IN",
]

#: ``(configuration name, rule, parameters)``; parameters as strings, as a rule configuration carries them.
RECOMMENDED: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("ExplodingTensor", "ExplodingTensor", {"skip_scaler_overflow": "True"}),
    (
        "VanishingGradient",
        "VanishingGradient",
        {
            "norm_ratio_threshold": "0.001",
            "loss_drop_percent": "80",
            "loss_window": "3",
            "skip_all_zero": "True",
            "bias_by_layer": "True",
            "persist_steps": "2",
            "persist_only_with_norm": "True",
        },
    ),
    ("DeadRelu", "DeadRelu", {"threshold_layer": "90", "min_samples": "64", "threshold_network": "60"}),
    (
        "SaturatedActivation",
        "SaturatedActivation",
        {
            "threshold_tanh_min": "-5",
            "threshold_tanh_max": "5",
            "threshold_sigmoid_min": "-5",
            "threshold_sigmoid_max": "5",
            "fraction_saturated": "50",
            "skip_output_layer": "True",
        },
    ),
    ("StalledLoss", "StalledLoss", {"max_weight_change_percent": "5"}),
    ("SlowConvergence", "SlowConvergence", {"train_tensor_regex": ".*epoch_acc(uracy)?$"}),
    ("Overfit", "Overfit", {"patience": "3", "ratio_threshold": "1.0", "min_difference": "0.3"}),
    (
        "UnchangedWeights",
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
    # issue 29: a window in which no weight moved made no update (accumulation, a warmup's first step at rate
    # 0); designed on the held-out diabetes_huber family (docs/RULES.md)
    (
        "WeightUpdateRatio",
        "WeightUpdateRatio",
        {
            "skip_frozen": "True",
            "fade_out_factor": "10",
            "fade_out_steps": "32",
            "skip_idle_model": "True",
            # as UnchangedWeights: a window under a rate below 1e-3 of its peak; designed on induction_tf
            "faded_lr_fraction": "0.001",
        },
    ),
    # issue 29: a swing counts only above 2 standard errors of an accuracy over the samples it counts (small
    # training sets); designed on the wine and iris families (docs/RULES.md). A run that saves a validation
    # accuracy must swing there too (mixup counts the training accuracy against mixed targets); designed on
    # mixup_cnn; the held-out cutmix_keras cannot judge it, as the rule reads no Keras run (docs/RULES.md)
    (
        "OscillatingAccuracy",
        "OscillatingAccuracy",
        {"noise_z": "2", "validation_regex": ".*acc(uracy)?$"},
    ),
    ("ZeroGradients", "ZeroGradients", {}),
    # issue 29: a classifier's pass that is a model leaving a plateau at chance is not judged, as in
    # ClassifierNoBetterThanPrior (rules/builtin/plateau_learning.py); designed on lstm and recall_gru
    (
        "ValidationLossNotDecreasing",
        "ValidationLossNotDecreasing",
        {
            "min_passes": "4",
            "min_improvement_percent": "2",
            "min_train_drop_percent": "1",
            "first_pass_below_start_percent": "30",
            "learning_z": "2",
            "learning_growth": "2",
            "learning_span": "3",
        },
    ),
    # issue 30's rules at their published defaults (docs/RULES.md, "How the recommended set was calibrated")
    ("NonFiniteOrigin", "NonFiniteOrigin", {}),
    ("LossScaleCollapse", "LossScaleCollapse", {}),
    ("LearningRateDiscontinuity", "LearningRateDiscontinuity", {}),
    ("ExpertImbalance", "ExpertImbalance", {}),
    ("AttentionEntropyCollapse", "AttentionEntropyCollapse", {}),
    # issue 30's remaining two: no alarm on the LM families' 30 healthy runs (bench/RESULTS.md)
    ("DataReplay", "DataReplay", {}),
    ("AttentionLogitGrowth", "AttentionLogitGrowth", {}),
    # issue 29: initialisation x8 (designed on the cnn and rnn families; docs/RULES.md); a squared error at
    # 2 x its targets' mean square with the same weights' gate (designed on the regression family)
    (
        "InitialLossTooHigh",
        "InitialLossTooHigh",
        {"factor": "1.4", "any_init_factor": "8", "init_scale": "3", "squared_error_factor": "2"},
    ),
    # issue 29: the loss's input read from the trial; designed on the cnn and transformer families
    ("SoftmaxBeforeCrossEntropy", "SoftmaxBeforeCrossEntropy", {}),
    # issue 29: a squared-error model worse than the targets' mean (validation R^2); designed on the
    # autoencoder family, a quarter of the targets' variance below the textbook R^2 <= 0 (docs/RULES.md)
    ("RegressionWorseThanMean", "RegressionWorseThanMean", {"max_r2": "-0.25"}),
    # issues 29/30: the language models' bad batch and gradient-norm spike, made safe for small batches;
    # designed on the lm and moe families and bench/detection's dev split (docs/RULES.md)
    ("LossSpike", "LossSpike", {"rise_factor": "5"}),
    # issue 29: a batch of half the others or less (the epoch's last, drop_last=False) is not judged: its norm
    # is its size's (BatchNorm on 2 samples); designed on the wine and iris families (docs/RULES.md)
    ("GradientNormSpike", "GradientNormSpike", {"reference": "max", "min_batch_fraction": "0.5"}),
    # issue 29: the model's inputs far off unit scale (DeepFD's input mutant); designed on the cnn and
    # regression families, the threshold above bench/detection's healthy unscaled inputs (docs/RULES.md)
    ("InputsNotNormalized", "InputsNotNormalized", {"threshold": "40"}),
    # issue 29: a cross-entropy classifier no better than the class prior (McFadden's pseudo-R^2); designed
    # on the binary family, 5% of the prior's entropy above the textbook pseudo-R^2 <= 0; a pass whose
    # predictions' information about its own labels (a permutation test) at least doubled since the pass
    # before, at z >= 2, is a plateau being left (designed on the lstm family; docs/RULES.md)
    (
        "ClassifierNoBetterThanPrior",
        "ClassifierNoBetterThanPrior",
        {"max_pseudo_r2": "0.05", "learning_z": "2", "learning_growth": "2", "learning_span": "3"},
    ),
    # issue 29: a cross-entropy that climbed to 2x chance in its first saved steps and then sat at chance for
    # three validation passes (Bengio 2012: the learning rate is too high); designed on the resmlp family and
    # bench/detection's run.py splits, judged on families built after it (docs/RULES.md)
    ("EarlyLossDivergence", "EarlyLossDivergence", {"stalled_passes": "2"}),
)


#: Calibrated as the set is, but not registered unless named: each one catches, on every benchmark, only
#: what a rule of the set already catches, and alarms on healthy runs the set is quiet on (docs/RULES.md).
#: A job that wants one passes its configuration (``opt_in_rules()``) among its rules.
OPT_IN: tuple[tuple[str, str, dict[str, str]], ...] = (
    # issue 29: left the set on 2026-11-30. On 16 model families (258 built-broken runs), the LM families and
    # bench/detection's splits it caught no broken run that no other rule of the set caught, and it was the
    # first alarm on 14 of the lstm family's 24 healthy runs (a recurrent net at chance for its first epochs)
    (
        "LossNotDecreasing",
        "LossNotDecreasing",
        {
            "mode": "TRAIN",
            "num_steps": "20",
            "window": "5",
            "reference": "first",
            "diff_percent": "5",
            "patience": "4",
            "increase_threshold_percent": "1000",
            "noise_sigmas": "2",
            # no decrease check while a saved learning rate still rises (a warmup from 0); designed on the
            # convbn_keras family (docs/RULES.md)
            "warmup_rise_percent": "1",
        },
    ),
)


def recommended_rules() -> list[dict[str, Any]]:
    """Rule configurations in ``DebugRuleConfigurations`` shape, every parameter value a string.

    One configuration per entry of :data:`RECOMMENDED`, in its order: ``RuleConfigurationName`` and
    ``RuleParameters`` (``rule_to_invoke`` and the entry's parameters). Each entry's parameters are
    parsed against its rule when called, so a typo in the set fails at once, naming the rule. Each
    choice and the numbers it was calibrated on: ``docs/RULES.md``, "How the recommended set was
    calibrated".

    Examples
    --------
    >>> configs = recommended_rules()
    >>> configs[0]["RuleParameters"]["rule_to_invoke"]
    'ExplodingTensor'
    """
    return _configurations(RECOMMENDED)


def opt_in_rules() -> list[dict[str, Any]]:
    """The configurations of :data:`OPT_IN`, in the shape of :func:`recommended_rules`: calibrated rules a
    job adds by naming them, e.g. ``rules=recommended_rules() + opt_in_rules()``.

    Examples
    --------
    >>> [c["RuleConfigurationName"] for c in opt_in_rules()]
    ['LossNotDecreasing']
    """
    return _configurations(OPT_IN)


def _configurations(entries: tuple[tuple[str, str, dict[str, str]], ...]) -> list[dict[str, Any]]:
    out = []
    for conf_name, rule, params in entries:
        parse_params(get_rule(rule), params)  # a typo here fails loudly, at import of the first caller
        out.append({"RuleConfigurationName": conf_name, "RuleParameters": {"rule_to_invoke": rule, **params}})
    return out


def recommended_rules_that_cannot_apply(hook_config: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The recommended rules a job saving what ``hook_config`` says gives nothing to read, one
    ``{RuleConfigurationName, Missing, Reason}`` each (:func:`tornasole.rules.inputs.unreadable_rules`).
    Empty without a hook configuration (what the job saves is then unknown).

    Why not drop them from the set: the set is calibrated as a whole, and a rule that cannot read
    anything ends ``NothingEvaluated``, which costs nothing and says what to save; this function says so
    before training instead.

    Examples
    --------
    >>> hook = {"CollectionConfigurations": [{"CollectionName": "weights"}]}
    >>> [r["RuleConfigurationName"] for r in recommended_rules_that_cannot_apply(hook)]
    ... # doctest: +NORMALIZE_WHITESPACE
    ['VanishingGradient', 'DeadRelu', 'SaturatedActivation', 'ZeroGradients', 'SoftmaxBeforeCrossEntropy',
     'RegressionWorseThanMean', 'InputsNotNormalized', 'ClassifierNoBetterThanPrior']
    """
    from tornasole.rules.inputs import unreadable_rules

    return unreadable_rules(((name, rule, params) for name, rule, params in RECOMMENDED), hook_config)
