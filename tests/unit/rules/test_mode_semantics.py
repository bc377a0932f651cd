"""Rules compare like with like: TRAIN with TRAIN, EVAL with EVAL, on trials with a validation phase.

Each test writes a trial with the numpy ``tornasole.Hook`` the way a training loop with one validation
pass per epoch does, and checks the behaviour that mixing modes used to get wrong.
"""

from __future__ import annotations

import numpy as np
import pytest
from hook_trials import epochs

from tornasole.exceptions import RuleParameterError
from tornasole.rules import invoke_rule
from tornasole.rules.generic import (
    ClassImbalance,
    DeadRelu,
    LossNotDecreasing,
    Overfit,
    Overtraining,
    PoorWeightInitialization,
    UnchangedTensor,
    WeightUpdateRatio,
)

RNG = np.random.default_rng(0)


def _w(k: int) -> np.ndarray:
    return np.full((3, 3), 1.0 + 0.05 * k, dtype=np.float32)


def test_weight_update_ratio_never_compares_eval_weights_with_the_next_train_step(tmp_path):
    # weights move 5% per TRAIN step; at EVAL steps (and the next TRAIN step) they equal the last TRAIN's
    train, evals, k = [], [], 0
    for _ in range(3):
        train.append([{"weights/fc.weight": _w(k + i)} for i in range(3)])
        k += 3
        evals.append([{"weights/fc.weight": _w(k - 1)} for _ in range(2)])
    trial = epochs(str(tmp_path / "t"), train, evals)
    assert invoke_rule(WeightUpdateRatio(trial)).fired == []


def test_weight_update_ratio_still_fires_on_frozen_weights_between_train_steps(tmp_path):
    train = [[{"weights/fc.weight": _w(0)} for _ in range(3)] for _ in range(2)]
    evals = [[{"weights/fc.weight": _w(0)}] for _ in range(2)]
    summary = invoke_rule(WeightUpdateRatio(epochs(str(tmp_path / "t"), train, evals)))
    first = summary.fired[0]
    assert (first.step, first.mode, first.mode_step) == (1, "TRAIN", 1)
    assert "||w_1 - w_0|| / ||w_0|| = 0 < small_threshold 1e-08" in first.details
    assert first.values["previous_step"] == 0
    assert first.values["threshold"] == 1e-08


def test_weight_update_ratio_num_steps_counts_train_steps(tmp_path):
    # TRAIN mode steps 0..5 at global 0,1,2 | EVAL 3 | 4,5,6; num_steps=3 compares TRAIN 3 with TRAIN 0
    train = [
        [{"weights/fc.weight": _w(i)} for i in range(3)],
        [{"weights/fc.weight": _w(i)} for i in (3, 4, 5)],
    ]
    evals = [[{"weights/fc.weight": _w(2)}], []]
    trial = epochs(str(tmp_path / "t"), train, evals)
    summary = invoke_rule(WeightUpdateRatio(trial, num_steps="3", large_threshold="0.1"))
    assert summary.fired_steps == [4, 5, 6]
    assert summary.fired[0].values["previous_step"] == 0


def _loss(v: float) -> dict:
    return {"loss": np.float32(v)}


def test_overfit_uses_phase_means_not_the_last_training_batch(tmp_path):
    # healthy epoch: batch losses fall 1.0 -> 0.2 (mean 0.6); validation 0.55: below the train mean
    train = [[_loss(v) for v in (1.0, 0.8, 0.6, 0.4, 0.2)]]
    evals = [[_loss(0.55), _loss(0.55)]]
    assert invoke_rule(Overfit(epochs(str(tmp_path / "a"), train, evals))).fired == []
    # overfitted epoch: validation mean 0.9 is 50% over the train mean 0.6
    evals = [[_loss(0.8), _loss(1.0)]]
    summary = invoke_rule(Overfit(epochs(str(tmp_path / "b"), train, evals)))
    # EVAL step 5: mean so far 0.8 (33% over); step 6: mean 0.9
    assert summary.fired_steps == [5, 6]
    outcome = summary.fired[1]
    assert outcome.mode == "EVAL"
    assert outcome.values["train_loss"] == pytest.approx(0.6)
    assert "mean EVAL loss 0.9 over steps 5..6 - mean TRAIN loss 0.6 over steps 0..4" in outcome.details


def test_overfit_patience_counts_validation_phases(tmp_path):
    train = [[_loss(1.0)] * 2, [_loss(0.8)] * 2, [_loss(0.6)] * 2]
    evals = [[_loss(1.0)] * 2, [_loss(1.0)] * 2, [_loss(1.0)] * 2]
    trial = epochs(str(tmp_path / "t"), train, evals)
    # phase ratios: 0, 0.25, 0.667 -> two phases in a row above 0.1 first in epoch 3 (global 10, 11),
    # whose phase is judged once, whole, at its last step
    assert invoke_rule(Overfit(trial, patience="2")).fired_steps == [11]


def test_overfit_judges_a_later_validation_phase_whole_not_on_its_first_batch(tmp_path):
    # Every pass has 3 batches. The third pass's first batch holds a misclassified sample (loss 2.0), but
    # the pass's mean (0.8) is the same as the earlier passes': the model did not pull away.
    train = [[_loss(0.6)] * 2] * 3
    evals = [[_loss(0.8)] * 3, [_loss(0.8)] * 3, [_loss(2.0), _loss(0.2), _loss(0.2)]]
    trial = epochs(str(tmp_path / "t"), train, evals)
    assert invoke_rule(Overfit(trial, ratio_threshold="1.0")).fired == []
    # A pass that is high throughout fires, at its last step, with the whole pass's mean.
    evals[2] = [_loss(2.0)] * 3
    summary = invoke_rule(Overfit(epochs(str(tmp_path / "u"), train, evals), ratio_threshold="1.0"))
    assert summary.fired_steps == [14]
    assert "mean EVAL loss 2 over steps 12..14" in summary.fired[0].details


def test_overtraining_delta_is_relative_for_small_losses(tmp_path):
    falling = [0.0153, 0.012, 0.0098, 0.0081, 0.0069, 0.0058]
    trial = epochs(str(tmp_path / "a"), [[_loss(v) for v in falling]])
    assert invoke_rule(Overtraining(trial, patience_train="5")).fired == []
    flat = [2.0, 1.999, 1.998, 1.997, 1.996, 1.995]
    summary = invoke_rule(Overtraining(epochs(str(tmp_path / "b"), [[_loss(v) for v in flat]])))
    assert summary.fired_steps == [5]
    assert summary.fired[0].values["threshold"] == 0.01


def test_loss_not_decreasing_checks_the_training_loss_with_one_validation_per_epoch(tmp_path):
    # 5 epochs of 10 TRAIN steps with a flat loss, one validation step per epoch: fewer than num_steps
    # EVAL steps, so only the TRAIN loss can be checked, and it must be
    train = [[_loss(1.0)] * 10 for _ in range(5)]
    evals = [[_loss(1.0 - 0.1 * e)] for e in range(5)]
    summary = invoke_rule(LossNotDecreasing(epochs(str(tmp_path / "t"), train, evals)))
    assert summary.fired
    assert {o.mode for o in summary.fired} == {"TRAIN"}
    assert summary.fired[0].mode_step == 10
    assert "loss (TRAIN step 10)=1 is not 0.1% below 1 at step 0" in summary.fired[0].details


def test_poor_weight_initialization_counts_train_steps_and_compares_mean_losses(tmp_path):
    # noisy but falling training loss: single batches rise (0.9 -> 1.0), the means fall
    noisy = [1.2, 1.0, 1.1, 0.9, 1.0, 0.8, 0.9, 0.7, 0.8, 0.6]
    train = [[_loss(v) for v in noisy[:5]], [_loss(v) for v in noisy[5:]]]
    evals = [[_loss(5.0)] * 3, [_loss(5.0)] * 3]  # validation losses are never compared with training
    trial = epochs(str(tmp_path / "a"), train, evals)
    assert invoke_rule(PoorWeightInitialization(trial, patience="2")).fired == []
    flat = [[_loss(1.0)] * 5, [_loss(1.0)] * 5]
    summary = invoke_rule(PoorWeightInitialization(epochs(str(tmp_path / "b"), flat, evals), patience="2"))
    # judged from TRAIN 3 (2 * patience losses) to TRAIN 9: the first 10 TRAIN steps, though 3 EVAL
    # steps lie between them; EVAL steps are never judged
    assert [(o.mode, o.mode_step) for o in summary.fired] == [("TRAIN", m) for m in range(3, 10)]
    capped = invoke_rule(
        PoorWeightInitialization(epochs(str(tmp_path / "c"), flat, evals), patience="2", steps="4")
    )
    assert [o.mode_step for o in capped.fired] == [3]


def test_poor_weight_initialization_counts_only_train_steps_that_hold_its_tensors(tmp_path):
    # a flat loss over 10 TRAIN steps, and after every second one a TRAIN step that saved only an
    # epoch-end metric (5 of them): those neither use up the first 10 steps nor are judged
    train, flat_steps = [], []
    for k in range(10):
        train.append(_loss(1.0))
        flat_steps.append(len(train) - 1)
        if k % 2 == 1:
            train.append({"epoch_accuracy": np.float32(0.5)})
    summary = invoke_rule(PoorWeightInitialization(epochs(str(tmp_path / "a"), [train]), patience="2"))
    # judged from the 4th loss step (2 * patience losses) to the 10th, the metric-only steps skipped
    assert [o.mode_step for o in summary.fired] == flat_steps[3:]
    # a 12th and 13th loss step lie past the first 10 steps that hold its tensors
    longer = train + [_loss(1.0), _loss(1.0)]
    summary = invoke_rule(PoorWeightInitialization(epochs(str(tmp_path / "b"), [longer]), patience="2"))
    assert [o.mode_step for o in summary.fired] == flat_steps[3:]


def test_dead_relu_pools_samples_at_batch_size_one(tmp_path):
    # batch 1: each step only some units are on, yet every unit is on for some inputs
    steps = []
    for i in range(40):
        v = np.zeros((1, 8), np.float32)
        v[0, i % 8] = 1.0
        steps.append({"fc1_relu_output": v})
    trial = epochs(str(tmp_path / "a"), [steps])
    assert invoke_rule(DeadRelu(trial)).fired == []
    dead = [
        {"fc1_relu_output": np.concatenate([s["fc1_relu_output"][:, :2], np.zeros((1, 6))], 1)} for s in steps
    ]
    summary = invoke_rule(DeadRelu(epochs(str(tmp_path / "b"), [dead])))
    # 6 of 8 units never on over the first 32 samples (steps 0..31): fires once 32 samples exist
    assert summary.first_step == 31
    assert summary.fired[0].values["samples"] == 32
    assert "75% of the 8 ReLUs in fc1_relu_output" in summary.fired[0].details


def test_loss_not_decreasing_window_and_first_reference(tmp_path):
    # a healthy run: steep descent, then a plateau with batch noise
    values = [1.0 - 0.09 * i for i in range(10)] + [0.2 + (0.03 if i % 2 else -0.03) for i in range(20)]
    trial = epochs(str(tmp_path / "a"), [[_loss(v) for v in values]])
    # single batch losses 2 steps apart "rise" on the plateau (SageMaker's reading)
    assert invoke_rule(LossNotDecreasing(trial, num_steps="2")).fired
    # means over 4 steps against the run's first 4: far below the start, never fires (and a rebound
    # check at 100% ignores the plateau's noise)
    first = LossNotDecreasing(
        trial,
        num_steps="2",
        window="4",
        reference="first",
        diff_percent="5",
        increase_threshold_percent="100",
    )
    assert invoke_rule(first).fired == []
    # a run that never learns: 2% down from its start after 30 steps
    stuck = epochs(str(tmp_path / "b"), [[_loss(1.0 - 0.0007 * i) for i in range(30)]])
    summary = invoke_rule(
        LossNotDecreasing(stuck, num_steps="4", window="4", reference="first", diff_percent="5")
    )
    outcome = summary.fired[0]
    # the first evaluation point whose window (steps 5..8) does not overlap the first window (0..3)
    assert outcome.step == 8
    assert "mean loss over 4 saved steps (TRAIN step 8)" in outcome.details
    assert outcome.values["previous_step"] == 3


def test_loss_not_decreasing_rejects_an_unknown_reference(trial_factory):
    trial = trial_factory({0: {"loss": np.float32(1)}})
    with pytest.raises(RuleParameterError, match="reference"):
        LossNotDecreasing(trial, reference="last")


def test_overfit_min_difference_ignores_ratios_of_near_zero_losses(tmp_path):
    train = [[_loss(0.0001)] * 2 for _ in range(3)]
    evals = [[_loss(0.0004)] * 2 for _ in range(3)]
    trial = epochs(str(tmp_path / "a"), train, evals)
    assert invoke_rule(Overfit(trial)).fired  # 300% "over" by ratio alone
    assert invoke_rule(Overfit(trial, min_difference="0.05")).fired == []


def test_unchanged_tensor_compares_within_a_mode_and_skips_parameters_outside_training(tmp_path):
    # weights change every TRAIN step; during validation they are constant, as they must be
    train = [[{"weights/fc.weight": _w(3 * e + i)} for i in range(3)] for e in range(2)]
    evals = [[{"weights/fc.weight": _w(3 * e + 2)} for _ in range(4)] for e in range(2)]
    trial = epochs(str(tmp_path / "a"), train, evals)
    assert invoke_rule(UnchangedTensor(trial, collection_names="weights", num_steps="3")).fired == []
    frozen = [[{"weights/fc.weight": _w(0)} for _ in range(3)] for _ in range(2)]
    summary = invoke_rule(
        UnchangedTensor(epochs(str(tmp_path / "b"), frozen, evals), collection_names="weights", num_steps="3")
    )
    assert {o.mode for o in summary.fired} == {"TRAIN"}
    assert summary.fired[0].step == 2


def test_class_imbalance_counts_the_labels_of_the_evaluated_mode(tmp_path):
    # balanced training labels; a validation set of one class must not make training look imbalanced
    balanced = np.tile(np.arange(3), 4).astype(np.float32)
    train = [[{"labels": balanced, "predictions": balanced}] for _ in range(2)]
    evals = [
        [{"labels": np.zeros(12, np.float32), "predictions": np.zeros(12, np.float32)}] for _ in range(2)
    ]
    trial = epochs(str(tmp_path / "a"), train, evals)
    summary = invoke_rule(ClassImbalance(trial, samples="12", threshold_imbalance="2"))
    assert summary.fired == []
