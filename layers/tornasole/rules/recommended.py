"""The recommended rule set: what Tornasole registers when a job names no rules.

Calibrated on the project's detection benchmark (``bench/detection``: 120 tiny
PyTorch runs, 40 cases x 3 seeds, labelled by the published criteria of
AUTOTRAINER, DeepDiagnosis, DeepLocalize, UMLAUT and TrainCheck while they
train). Parameters were chosen on the 63 calibration runs (27 labelled broken,
36 healthy) only; the 57 held-out runs (25 broken, 32 healthy) were evaluated
afterwards.

=================== =========================== ===========================
                    SageMaker's defaults         this set
=================== =========================== ===========================
calibration         recall 27/27, false alarms  recall 26/27, false alarms
                    36/36 healthy runs (100%)   0/36 (0%)
held-out            recall 25/25, false alarms  recall 25/25, false alarms
                    32/32 (100%)                10/32 (31%)
=================== =========================== ===========================

SageMaker's defaults "catch" everything because LossNotDecreasing, Overfit and
Overtraining fire on every run, healthy or not: an alarm that always rings.
Held-out false alarms: 7 healthy runs that start slowly (LossNotDecreasing's
check at TRAIN step 40 cannot tell a slow start from a stall, and the
calibration split holds no slow starter), and 3 runs built broken that no
published criterion labels (a collapse, a validation-loss spike, a memorising
net). See ``bench/README.md``.
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
            "num_steps": "20",
            "window": "5",
            "reference": "first",
            "diff_percent": "5",
            "patience": "4",
            "increase_threshold_percent": "1000",
        },
    ),
    ("OscillatingLoss", "OscillatingLoss", {}),
    ("Overfit", "Overfit", {"patience": "3", "ratio_threshold": "1.0", "min_difference": "0.05"}),
    ("UnchangedWeights", "UnchangedTensor", {"collection_names": "weights", "num_steps": "3"}),
    ("WeightUpdateRatio", "WeightUpdateRatio", {}),
)


def recommended_rules() -> list[dict[str, Any]]:
    """Rule configurations in ``DebugRuleConfigurations`` shape, every parameter value a string.

    Each choice, with its calibration numbers (runs fired on / precision / recall on the runs
    labelled with the problems it targets / false alarms on healthy runs; 63 runs):

    * ``ExplodingTensor`` (defaults): 5 / 1.00 / 4 of 4 NaN runs / 0. Nothing to tune.
    * ``VanishingGradient`` with ``norm_ratio_threshold=0.001`` (AUTOTRAINER's first/last
      gradient-norm ratio, first norm < 1e-4): 11 / 1.00 / 3 of 3 / 0.
    * ``DeadRelu`` with ``threshold_layer=90``: 10 / 1.00 / 6 of 7 / 0. SageMaker's 50: 3 false
      alarms; the published 70 and 80: 1 each (a healthy net with biases at -0.5), same recall.
    * ``SaturatedActivation`` with bounds +-5 and ``fraction_saturated=50`` (DeepDiagnosis):
      3 / 1.00 / 3 of 3 / 0. SageMaker's thresholds catch none of the 3.
    * ``LossNotDecreasing`` on TRAIN, ``num_steps=20``, ``window=5`` saved steps,
      ``reference=first``, ``diff_percent=5`` (the mean training loss has not come down 5% since
      the start, at any evaluation point so far): 17 / 1.00 / 15 of 18 slow or frozen runs / 0,
      first checked at TRAIN step 40, before the labels' slow-convergence onset (epoch 3).
      ``num_steps=40``, ``window=10``: 1 false alarm and 85% of detections within one save
      interval (96% with 20 and 5). Comparing single batch losses 40 steps apart: 25 false
      alarms; EVAL losses one epoch apart: 25-28; means of 10 saved steps against the previous
      interval: 10 (a converged run stops decreasing too). The rebound check is kept out of the
      way (``increase_threshold_percent=1000``): calibration never exercised it.
    * ``OscillatingLoss`` (defaults: phase means of the validation loss): 0 / - / 0 of 5 / 0. It
      fires on none of the calibration runs (their oscillation labels come with exploding losses
      or overfitting the other rules catch) and costs no false alarm; it is the only rule aimed
      at a loss that swings. On the training loss (``mode=TRAIN``, closer to the label, which
      reads the training accuracy): 5 false alarms (a converged loss near 0 jiggles by more than
      10% of itself). Swings relative to the loss value instead of its range: 2-4 false alarms.
    * ``Overfit`` with ``patience=3`` validation phases, ``ratio_threshold=1.0``,
      ``min_difference=0.05``: 4 / 1.00 / 2 of 5 / 0. SageMaker's (0.1, patience 1): 34 false
      alarms; patience 2, ratio 0.5: 4 of 5 but 5 false alarms.
    * ``UnchangedTensor`` on ``weights``, 3 saved steps (DeepDiagnosis "unchanged", TrainCheck's
      frozen layers): 8 / 1.00 / 8 of 8 / 0.
    * ``WeightUpdateRatio`` (defaults, now TRAIN with TRAIN): 9 / 1.00 / 9 of 12 / 0.

    Left out: ``PoorWeightInitialization`` (28 / 0.64 / 10 false alarms) catches no run the set
    misses; ``Overtraining`` (61 / 0.44 / 34 false alarms) catches the one it misses (an overfitting
    run) at the price of an alarm on every healthy run.

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
