"""The recommended rule set: what Tornasole registers when a job names no rules.

Calibrated on the project's detection benchmark (``bench/detection``: tiny
PyTorch runs labelled by the published criteria of AUTOTRAINER, DeepDiagnosis,
DeepLocalize, UMLAUT and TrainCheck while they train). Its splits: calibration
(72 runs, 27 labelled broken); development (66 runs); the fifth to twelfth
revisions' held-out splits (150 to 717 runs), each read once by its revision
and studied by the next; and the thirteenth revision's held-out split (798
runs: every earlier held-out case at new seeds and 27 variant-K cases on an
eleventh dataset, three bands with wavy boundaries), written and committed
after this set was frozen and before it was evaluated on it, then evaluated
once. Details and per-rule numbers: ``bench/README.md``.

=================== =========================== ===========================
thirteenth revision SageMaker's defaults         this set
=================== =========================== ===========================
calibration         recall 27/27, false alarms  recall 27/27, false alarms
                    45/45 healthy runs (100%)   0/45 (0%)
development         recall 25/25, 41/41 (100%)  recall 25/25, 4/41 (10%)
12th held-out       recall 303/303, 414/414     recall 297/303, 18/414 (4.3%)
held-out (798 runs, recall 336/336, 462/462     recall 332/336 (0.99), false
evaluated once)     (100%)                      alarms 11/462 (2.4%)
=================== =========================== ===========================

On the held-out split the median first firing is 0 TRAIN steps after the
labelled onset (one save interval is 4); 84% of detections are within one
save interval of the onset and 97% within one save interval of the step where
the label's criterion was established (AUTOTRAINER confirms a gradient symptom
only at its next check, every third epoch, and the label dates the onset back
to the symptom). SageMaker's defaults: 93% and 94%. The set alarms on 3 of the
449 runs built healthy and labelled healthy (0.7%); its other 8 false alarms
are on runs built broken that no label flags. Its 4 misses are runs built
healthy that UMLAUT's overfitting label flags.

Three of its rules (OscillatingAccuracy, ZeroGradients and SlowConvergence's
training-accuracy condition, all from the twelfth revision) read the
quantities AUTOTRAINER's labels read, with the same thresholds, so on this
benchmark they agree with those labels nearly by construction: the benchmark
shows that the saved data suffice to apply the published criteria during
training, not that the criteria are right. The eleventh revision's set,
without them, caught 240 of 278 broken runs on its held-out split.

SageMaker's defaults "catch" everything because LossNotDecreasing, Overfit and
Overtraining fire on nearly every run, healthy or not: an alarm that always rings.

Fourteenth revision: model families (``bench/detection/families``: CNN with
BatchNorm on digits, sigmoid/BCE on breast cancer, softmax on wine, regression
on diabetes, GRU, autoencoder, tiny transformer; PyTorch hook; 216 runs,
scored one family left out, figures in ``bench/RESULTS.md``). The thirteenth
revision's set alarmed on 61 of the 108 runs built healthy there (every one of
the CNN and regression families). Four options, no threshold changed, bring
that to 4 of 108 (worst family: softmax, 3 of 16):
``VanishingGradient bias_by_layer`` (a bias feeding a BatchNorm has a zero
gradient), ``SaturatedActivation skip_output_layer`` (the activation that
feeds the loss, found from the trial's save order, is driven to confidence),
``skip_frozen`` on WeightUpdateRatio and UnchangedWeights (no gradient saved:
frozen on purpose) and ``ExplodingTensor skip_scaler_overflow`` (Inf gradients
under a finite loss: a step an fp16 loss scaler skipped). Recall is not at the
target there (worst family 0.45 against the labels, 0.29 against the runs'
construction). On this benchmark's calibration and development splits nothing
changes (same firings, same steps). Tried, not taken: WeightUpdateRatio's
``small_window=3`` (no alarm on weights that an accumulation of gradients
leaves equal between two saved steps): it delays the detection of frozen
layers by two saved steps, detections within one save interval on
calibration 93% -> 81%, and no family run needed it at a save interval of 4.

Fifteenth revision: five of issue 30's rules join at their published defaults (NonFiniteOrigin,
LossScaleCollapse, LearningRateDiscontinuity, ExpertImbalance, AttentionEntropyCollapse). On the
language-model families (``bench/detection/families/lm.py``, ``lm_score.py``; 46 runs, seeds 0 and 1)
the seven new rules catch 30 of 30 labelled runs with no false alarm on 18 healthy ones, first firing 0
steps from the onset (median); the thirteenth revision's set caught 4 of 30 (the NaN only). On the classic
families' 54 runs built healthy (seed 0) these five alarm on none, and on ``bench/detection``'s calibration
and development splits they fire on no healthy run (NonFiniteOrigin only where ExplodingTensor fires).
Left out: LossSpike, which alarmed on 5 of the development split's 41 healthy runs (its 6-sigma window is
tight where most one-sample losses are near 0 and one misclassified sample is not; the false alarms of the
set rose from 4/41 to 7/41), and GradientNormSpike, which alarmed on a healthy ``cnn/noisy_small_batch``
run (batch 4) and on three runs no classic label flags. Both stay in the catalogue for language-model
jobs (``jobs register --rule LossSpike``). The four rules that read signals a classic training loop does
not save (``lr/<g>``, ``loss_scale``, router loads, attention entropies) end ``NothingEvaluated`` there
and say which hook call saves them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tornasole.rules.params import parse_params
from tornasole.rules.registry import get_rule

__all__ = ["recommended_rules", "recommended_rules_that_cannot_apply", "RECOMMENDED"]

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
        },
    ),
    ("StalledLoss", "StalledLoss", {"max_weight_change_percent": "5"}),
    ("SlowConvergence", "SlowConvergence", {"train_tensor_regex": ".*epoch_acc(uracy)?$"}),
    ("Overfit", "Overfit", {"patience": "3", "ratio_threshold": "1.0", "min_difference": "0.3"}),
    (
        "UnchangedWeights",
        "UnchangedTensor",
        {"collection_names": "weights", "num_steps": "3", "skip_frozen": "True"},
    ),
    ("WeightUpdateRatio", "WeightUpdateRatio", {"skip_frozen": "True"}),
    ("OscillatingAccuracy", "OscillatingAccuracy", {}),
    ("ZeroGradients", "ZeroGradients", {}),
    # issue 30's rules at their published defaults (the fifteenth revision, below)
    ("NonFiniteOrigin", "NonFiniteOrigin", {}),
    ("LossScaleCollapse", "LossScaleCollapse", {}),
    ("LearningRateDiscontinuity", "LearningRateDiscontinuity", {}),
    ("ExpertImbalance", "ExpertImbalance", {}),
    ("AttentionEntropyCollapse", "AttentionEntropyCollapse", {}),
)


def recommended_rules() -> list[dict[str, Any]]:
    """Rule configurations in ``DebugRuleConfigurations`` shape, every parameter value a string.

    Each choice, with its calibration numbers (runs fired on / precision / recall on the runs
    labelled with the problems it targets / false alarms on healthy runs; 72 runs), and for the
    fifth revision's changes the development split's (66 runs). Figures for
    parameter values not chosen are from the previous revision's 63 calibration runs (the nine
    slow-starting healthy runs added since, on which no chosen rule but LossNotDecreasing fires),
    except where 72 is said:

    * ``ExplodingTensor`` (defaults): 5 / 1.00 / 4 of 4 NaN runs / 0. Nothing to tune.
    * ``VanishingGradient`` with ``norm_ratio_threshold=0.001`` (AUTOTRAINER's first/last
      gradient-norm ratio, first norm < 1e-4): 11 / 1.00 / 3 of 3 / 0. ``loss_drop_percent=80`` with
      ``loss_window=3`` (eighth revision): quiet where the mean of the last 3 saved training losses is 80%
      below the first 3's, gradients that vanished because the loss did. On the seventh revision's
      held-out split SageMaker's mean threshold (1e-7, kept) fired on seven healthy runs, four of them
      nets with a large initialisation that fit their data (first-layer bias gradients of 1e-12 with the
      loss near 0). The gate: false alarms 9 -> 7 on the sixth revision's held-out split and 15 -> 12 on
      the seventh's, no detection and no detection's latency changed on any split; 50% loses a detection,
      90% and 95% remove fewer (with a window of 5, 70% equals this). Switching the mean check off
      (``threshold=0``) removes as many false alarms but delays every step-0 detection of a dead or
      vanishing run (within one save interval 96% -> 85% on calibration): not taken. The remaining
      firings on healthy runs: nets with some dead units at step 0 (exactly zero bias gradients, nothing
      to gate on yet) and a warm-up whose loss came down 43%. ``skip_all_zero=True`` (thirteenth
      revision): a gradient tensor that is 0 everywhere (a layer whose units were all dead on the batch)
      is not judged by the mean check: dead units are DeadRelu's and ZeroGradients' finding. The eleventh
      revision had tried passing over every exact zero and lost 4 detections, runs the dying-ReLU label
      flags that only VanishingGradient caught; ZeroGradients (twelfth revision) catches them now. On the
      twelfth revision's five default splits (2,046 runs, development data): 5 false alarms fewer (nets
      built healthy with some dead units at step 0, biases at -0.3 to -0.5) and 1 fewer on the ninth
      revision's held-out split, no detection lost; detections within one save interval 82-93% ->
      80-93% (the dying runs it caught at step 0 are caught at ZeroGradients' check or by DeadRelu a few
      batches later).
    * ``DeadRelu`` with ``threshold_layer=90``: 10 / 1.00 / 6 of 7 / 0. SageMaker's 50: 4 false
      alarms (72 runs); the published 70 and 80: 1 each (a healthy net with biases at -0.5), same recall.
      ``min_samples=64`` (seventh revision; 32 before, the rule's default): a unit counts as dead only
      when inactive over at least 64 samples (four saved batches of 16 here, not two). On the sixth
      revision's held-out split it had fired at step 4 on three healthy nets with some units dead at
      the start (biases at -0.3 and -0.4) that recover within the next few batches: 64 removes two of
      them (12 -> 10 false alarms) and changes no detection and no other firing on any split (detections
      within one save interval 91% -> 90% there). 96 and 128 the same as 64, 256 fires less;
      ``threshold_layer`` 95 would remove one more false alarm: not taken (a 90% layer is dead enough).
      ``threshold_network=60`` (tenth revision): the dead units of all ReLU layers together must also
      be 60% of their units. The rule's largest remaining source of false alarms was healthy nets with
      hidden biases at -0.3 or -0.4 whose second layer starts 88-100% dead while the first stays 3-25%
      dead and the net learns through it (the dying runs it is meant for lose 60-100% of every layer).
      On the seven development splits (1,698 runs): 4 false alarms fewer (all on runs built and
      labelled healthy), no detection and no latency changed. 50: 2 fewer; 70 (AUTOTRAINER's share of
      zero gradient entries): 6 fewer, but it loses a run labelled dying ReLU that only DeadRelu caught.
    * ``SaturatedActivation`` with bounds +-5 and ``fraction_saturated=50`` (DeepDiagnosis):
      3 / 1.00 / 3 of 3 / 0. SageMaker's thresholds catch none of the 3.
    * ``LossNotDecreasing`` on TRAIN, ``num_steps=20``, ``window=5`` saved steps,
      ``reference=first``, ``diff_percent=5``, ``patience=4`` (the mean training loss has not
      come down 5% since the start, at four evaluation points running: first possible firing at
      TRAIN step 100), 72 runs: 17 / 1.00 / 15 of 18 slow or frozen runs / 0. Patience 1, 2, 3: 2, 2, 1
      false alarms (healthy slow starters: a wide sigmoid net sits at or above its starting loss
      for 64 training steps, then learns), same recall; patience 1 catches the three stalled
      tiny-learning-rate seeds 7 steps before the labels' onset (epoch 3), patience 4 53 steps
      after it, so 85% of detections are within one save interval (96% with patience 1). A
      "still falling" exemption (tried, not kept: no alarm while the latest window is 2-5% below
      the one before) also reaches 0 false alarms with patience 3, but detects the stalled runs later still (a
      flat, noisy loss "falls" 2% now and then): not kept. Comparing single batch losses 40 steps
      apart: 25 false alarms; EVAL losses one epoch apart: 25-28; means of 10 saved steps
      against the previous interval: 10 (a converged run stops decreasing too). The rebound check
      is kept out of the way (``increase_threshold_percent=1000``): calibration never exercised
      it. ``noise_sigmas=1`` (ninth revision): a shortfall counts only when it exceeds one standard
      error of the difference of the two windows' means. Until then the rule was the set's largest
      source of false alarms: on the six development splits (1,224 runs) it fired on 12 runs built
      healthy and labelled healthy, 11 of them with no other rule firing, mostly batch-1 and batch-2
      SGD, whose saved losses are one or two samples' losses (windows of 5 of them differ by 10-30%
      while the validation accuracy climbs), and slow SGD starts. With 1: 9 false alarms fewer (held-out
      split of revision 8: 22 -> 19 of 236; revision 7's: 12 -> 8 of 178) and 2 detections fewer,
      both runs built healthy that a label flags for another problem (dying ReLU on batch-1 SGD,
      oscillation) which LossNotDecreasing was not catching for that problem; no detection's latency
      changed. 0.5: 7 fewer, the same 2 lost; 1.5: 10 fewer, 4 lost; 2: 10 fewer, 5 lost. On the 145
      runs labelled slow or unchanged where it fires, its first firing's shortfall (without the gate)
      is under one standard error on 15 (all caught earlier by another rule) and 1 to 12 standard
      errors, or exact (equal losses), on the others. ``noise_sigmas=2`` (eleventh revision, measured
      on the five development splits the tenth revision ran, 1,560 runs, with every other rule as
      frozen then): 7 false alarms fewer (four runs built healthy: batch-1 and batch-2 SGD, a small
      initialisation with SGD, a deep tanh net; three Adam runs at lr 1e-5 that no label flags) and 3
      detections fewer, all runs built healthy that AUTOTRAINER's oscillation label flags from the
      epoch's training accuracy (its swings of 0.03 are 8 of 256 samples); 1.5: 4 fewer and 2 lost.
      Two standard errors is the usual bar for a difference of two means.
    * ``StalledLoss`` (sixth revision: each validation pass judged whole, at the step where it reaches the
      earlier passes' length, never on its first batch; that removed one false alarm on the fifth
      revision's fresh split and delays its firings by the rest of a pass, no TRAIN step; on the
      benchmark it no longer fires first on any broken run, but it is the stall detector of runs that
      save no accuracy; held-out split 22 / 1.00 / 0 false alarms) (the last 3 validation passes' means
      within 0.5% of each other while no mean of
      5 saved TRAIN steps came 5% below the first, and the weights moved by at most 5% across those
      passes: ``max_weight_change_percent=5``), 72 runs: 10 / 1.00 / 10 of 18 slow or frozen runs / 0.
      It catches the stalled tiny-learning-rate seeds at their third validation pass (TRAIN step 48,
      the labels' onset 47) where LossNotDecreasing needs until step 100: detections within one save
      interval 85% -> 96%, recall and false alarms unchanged. Tolerance 0.25%, 0.5%, 1%: 0 false
      alarms; 1.5%: 1 (a wide sigmoid net whose first three passes lie within 1.4%); the stalled
      runs' passes lie within 0.11% or less. 0.5% leaves a factor 3 to the slow starter. 2 passes: 1
      false alarm; 4: same as 3, later; ``diff_percent`` 10: 1 false alarm, 2: recall 8 of 18.
      The weight condition (fifth revision, from the development split, where StalledLoss fired on two
      seeds of a sigmoid net sitting at ln 2 for three to five epochs, labelled healthy), per epoch in
      the layer that moved most: the stalled runs' weights move by about 1% or less (a tiny learning
      rate 0.05%, a zeroed one 0%, a warm-up 1.1%), a net on a saddle's by 13-130% (its optimiser moves
      them; it learns a few epochs later). Calibration: 5 and 10% change nothing (same firings, same
      steps); 2% delays one firing (a vanishing run VanishingGradient catches at step 0); 1% also delays
      the zeroed-scheduler runs by a pass (the first compared pass precedes the zeroing). Development:
      5% (and 10%) remove both false alarms and keep every other firing; 2% also drops or delays five
      firings on runs other rules catch first. Without weights saved the rule judges the losses alone
      and says so.
    * ``SlowConvergence`` (sixth revision; AUTOTRAINER's slow convergence on the validation accuracy:
      three passes without a pass-to-pass rise of 0.01, the best under 0.6) with
      ``loss_tolerance_percent=3`` (the validation loss's pass means also lie within 3%), 72 runs:
      12 / 1.00 / 9 of 15 runs labelled slow / 0; development 7 / 1.00 / 6 of 10 / 0; fifth revision's
      fresh split 24 / 1.00 / 17 of 24 / 0. It reads what the labels read and the loss rules cannot: a
      model that predicts one class has a flat accuracy while its loss drifts down by a few percent, as
      a healthy slow start's does. It is the only rule that catches the warm-ups and slow starters that
      the slow-convergence label flags at epoch 3: on the fresh split, recall 58/67 -> 63/67 with no
      false alarm added. Without the loss condition: 2 false alarms on the development and fresh splits
      (a deep narrow ReLU stack whose validation loss fell 3.9% over three flat-accuracy passes; a
      sigmoid net on a saddle whose loss swung 33%); the stalled runs it catches moved their loss by
      2.3% or less. 2% loses one detection, 5% adds one false alarm. Like the label it reads the
      validation accuracy only: a training accuracy saved every fourth batch is a few batches' accuracy,
      whose sampling noise alone exceeds 0.01. A run that saves no accuracy leaves it NothingEvaluated.
      Twelfth revision: ``train_tensor_regex=.*epoch_acc(uracy)?$`` (AUTOTRAINER also requires the
      training accuracy to be flat: no epoch-to-epoch rise of 0.01 in the epoch accuracy, which the
      benchmark now saves once per epoch, at the epoch's end) in place of ``loss_tolerance_percent=3``.
      On the eleventh revision's five default splits (1,803 runs, development data): the training
      condition, with the loss condition kept, removes 13 false alarms (slow starters whose validation
      accuracy sat still for three passes while their epoch accuracy rose) and 11 detections (runs other
      labels flag whose training accuracy rose); dropping the loss condition then adds 10 detections
      (runs the slow label flags: both accuracies flat, the validation loss moving by more than 3%) and
      no false alarm. A run that saves no epoch accuracy is judged on its validation accuracy alone, and
      the report says so; for such runs ``loss_tolerance_percent=3`` is the eleventh revision's guard
      against slow starters.
    * ``Overfit`` with ``patience=3`` validation phases, ``ratio_threshold=1.0``, ``min_difference=0.3``
      (0.05 until the sixth revision, 0.1 in it): 4 / 1.00 / 2 of 5 / 0. SageMaker's (0.1, patience 1): 40
      false alarms (72 runs); patience 2, ratio 0.5: 4 of 5 but 5 false alarms. The gap of 0.1 (sixth
      revision, fifth revision's fresh split): removes its one false alarm there (batch-1 SGD that
      converged, validation 0.14 against training 0.056) and changes no other firing on any split; 0.15
      the same; ratio 0.75 adds a detection on the fresh split and, with patience 4, loses one on the
      development split. The gap of 0.2 (seventh revision, sixth revision's held-out split): one false
      alarm fewer there (a converged net, validation 0.34 against training 0.006 is still one), no other
      firing changed on any split; ratio 2 removes one more but loses a detection on the calibration and
      fresh splits. A validation loss rising in three passes running (UMLAUT's label) was tried as a rule
      again: every detection it adds comes with as many false alarms. After the ninth revision's
      evaluation (a fix, measured on development splits only): each validation phase is judged once,
      whole, as StalledLoss and SlowConvergence judge theirs, not on its first batch while it lands;
      on the ninth revision's split that removes 3 false alarms (30 -> 27) and 1 detection, on the
      eighth's 1 detection (both runs the overfitting label flags, caught on a single batch). The gap
      of 0.3 (eleventh revision, the tenth revision's five development splits): 5 false alarms fewer
      (validation losses 0.2-0.35 above the training loss that were not rising, so UMLAUT's label
      does not flag them: three runs built healthy, the twins of the zeroed scheduler and of the frozen
      layers and 20% noisy labels; two Adam runs at lr 0.1 built to kill ReLUs that did not in those
      seeds), no detection lost; 0.25 to 0.4 give the same firings, 0.5
      loses 5 detections (overfitting runs whose gap is 0.3-0.5).
    * ``UnchangedTensor`` on ``weights``, 3 saved steps (DeepDiagnosis "unchanged", TrainCheck's
      frozen layers): 8 / 1.00 / 8 of 8 / 0.
    * ``WeightUpdateRatio`` (defaults, now TRAIN with TRAIN): 9 / 1.00 / 9 of 12 / 0.
    * ``OscillatingAccuracy`` (twelfth revision, defaults: AUTOTRAINER's unstable-training criterion,
      paired maxima and minima of the per-epoch training accuracy 0.03 apart in 0.2 x epochs, every third
      epoch). Until the eleventh revision the oscillation label, which reads the epoch's training
      accuracy, caused most misses (18 of 38 on its held-out split), because the benchmark saved only
      single batches' accuracies, whose swings a rule cannot tell from a run's. The benchmark now saves
      the epoch's accuracy once per epoch, at its end, as a Keras history holds it and as smdebug's Keras
      hook saves an epoch's logs; with it, on the eleventh revision's default splits (1,803 runs, the
      rest of the set as in the eleventh revision): 50 detections more (calibration 1, development 2,
      the held-out splits of revisions 9, 10 and 11: 13, 14 and 20), no false alarm added; with
      ``min_swing=0.05``, 19. It reads the criterion the label reads, so on this benchmark it cannot be
      wrong about oscillation; what the benchmark cannot say is how often that criterion is wrong: at 256
      training samples a swing of 0.03 is eight predictions, which a net built healthy (batch-1 and
      batch-2 SGD, small data) makes or loses from epoch to epoch. On a training set of thousands of
      samples 0.03 is far above that noise.
    * ``ZeroGradients`` (twelfth revision, defaults: AUTOTRAINER's dying ReLU, at least 70% of all
      gradient entries exactly 0 at a saved training step, judged every third validation pass while the
      best validation accuracy is below 0.6). Development data as above, after the two changes above:
      21 detections more (runs built healthy that the dying-ReLU label flags, which no rule caught:
      small initialisations, some dead units, batch-1 SGD; and one overfitting run), 2 false alarms (a
      14-epoch run that AUTOTRAINER first checks at epoch 6, 30% of its training, where the rule, which
      cannot know a run's length, checks at 3). Offline on the same trials, 80%: 12 detections and no
      false alarm; 90%: 7. It fires at a check, 48 training steps
      after a symptom at step 0 in a ten-epoch run, so it adds detections outside one save interval.

    Left out: ``OscillatingLoss`` (in the set until the fourth revision; phase means of the validation
    loss): calibration 0 firings (of 5 runs labelled oscillating); development 6 firings, each on a
    run another rule had caught earlier or on a run labelled healthy (2: a healthy warm-up whose
    validation loss swings after the warm-up, 0.06 -> 0.26 -> 0.08, while it converges; Adam at lr
    0.3, built broken, which VanishingGradient also flags): no detection lost, one false alarm
    fewer. It stays in the catalogue (``tornasole rules list``). ``PoorWeightInitialization`` (72
    runs: 32 / 0.56 / 14 false alarms) catches no run the set misses; ``Overtraining`` (69 / 0.39 /
    42 false alarms) catches the one it misses (an overfitting run) at the price of an alarm on every
    healthy run.

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
    ['VanishingGradient', 'DeadRelu', 'SaturatedActivation', 'ZeroGradients']
    """
    from tornasole.rules.inputs import unreadable_rules

    return unreadable_rules(((name, rule, params) for name, rule, params in RECOMMENDED), hook_config)
