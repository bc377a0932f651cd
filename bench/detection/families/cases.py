"""The families benchmark's cases: per family, healthy runs (the recipe trained to the end, longer, and
hard negatives: noisy, slow, frozen on purpose, gradient accumulation, an fp16 step the loss scaler
skipped) and faults re-implemented from the published taxonomies (not copied):

* DeepFD (Cao et al., ICSE'22) mutation operators: change the learning rate (x100, x1e-4), the
  activation function (deep sigmoid stacks), the weight initialisation (x8), the loss (softmax before the
  cross-entropy), drop the input normalisation (inputs x100).
* AUTOTRAINER (Zhang et al., ICSE'21) symptoms: vanishing/exploding gradients, dying ReLU, oscillating
  loss, slow convergence (the learning-rate and initialisation mutants produce them).
* DeepDiagnosis (Wardat et al., ICSE'22) / TrainCheck (OSDI'25) silent errors: parameters that never reach
  the optimiser, a scheduler that zeroes the learning rate, training labels permuted (a data bug only an
  accuracy shows).

``CASES`` maps ``<family>/<case>`` to ``(kind, family, FamilySpec)``; ``kind`` is what the case was built to
be, the label of each run still comes from the published criteria measured while it trains (per seed).
The families of :data:`families.keras_training.KERAS_FAMILIES` run again in Keras as ``<family>_keras``
(every case but the fp16 step a loss scaler skipped); ``SCORED_FAMILIES`` lists every family scored.
"""

from __future__ import annotations

from dataclasses import replace

from families.keras_training import KERAS_FAMILIES
from families.training import FAMILIES, FamilySpec

CASES: dict[str, tuple[str, str, FamilySpec]] = {}
#: Keras cannot make one chosen step overflow its loss scale (see :mod:`families.keras_training`).
_NOT_IN_KERAS = {"fp16_skipped_step"}

#: Families whose inputs are real-valued features an unscaled pipeline could feed raw.
_SCALED_INPUTS = {"cnn", "binary", "softmax", "regression", "rnn", "autoencoder"}
_MLPS = {"binary", "softmax", "regression", "autoencoder"}
_CLASSIFIERS = {"cnn", "binary", "softmax", "rnn", "transformer"}
_MULTICLASS = {"cnn", "softmax", "rnn", "transformer"}


def _cases_of(family: str) -> dict[str, tuple[str, FamilySpec]]:
    base = FamilySpec(family)
    epochs = FAMILIES[family].epochs
    high = 50.0 if FAMILIES[family].opt == "sgd" else 100.0
    out: dict[str, tuple[str, FamilySpec]] = {
        # healthy: the recipe to the end, and trained twice as long (confident outputs)
        "healthy": ("healthy", base),
        "healthy_long": ("healthy", replace(base, epochs=2 * epochs)),
        # hard negatives
        "noisy_small_batch": ("healthy", replace(base, batch=4, lr_mult=0.5)),
        "slow_warmup": ("healthy", replace(base, lr_mult=0.3, warmup_epochs=3)),
        "frozen_first_on_purpose": ("healthy", replace(base, freeze_first=True)),
        "grad_accumulation": ("healthy", replace(base, accumulate=4)),
        "fp16_skipped_step": ("healthy", replace(base, skip_step=8)),
        # faults
        "lr_too_high": ("broken", replace(base, lr_mult=high)),
        "lr_too_low": ("broken", replace(base, lr_mult=1e-4)),
        "init_too_large": ("broken", replace(base, weight_scale=8.0)),
        "first_layer_not_optimised": ("broken", replace(base, optimizer_skips_first=True)),
        "scheduler_zeroes_lr": ("broken", replace(base, lr_zero_after_epoch=0)),
    }
    if family in _CLASSIFIERS:
        out["noisy_labels"] = ("healthy", replace(base, label_noise=0.2))
        out["labels_shuffled"] = ("broken", replace(base, shuffle_labels=True))
    if family in _MULTICLASS:
        out["softmax_before_cross_entropy"] = ("broken", replace(base, double_softmax=True))
    if family in _SCALED_INPUTS:
        out["inputs_not_normalised"] = ("broken", replace(base, input_scale=100.0))
    if family in _MLPS:
        out["deep_sigmoid"] = ("broken", replace(base, hidden_act="sigmoid", depth=6, width=16))
    return out


for _family in FAMILIES:
    for _name, (_kind, _spec) in _cases_of(_family).items():
        CASES[f"{_family}/{_name}"] = (_kind, _family, _spec)
for _family in KERAS_FAMILIES:
    for _name, (_kind, _spec) in _cases_of(_family).items():
        if _name not in _NOT_IN_KERAS:
            CASES[f"{_family}_keras/{_name}"] = (_kind, f"{_family}_keras", replace(_spec, framework="keras"))

SCORED_FAMILIES: tuple[str, ...] = (*FAMILIES, *(f"{f}_keras" for f in KERAS_FAMILIES))
