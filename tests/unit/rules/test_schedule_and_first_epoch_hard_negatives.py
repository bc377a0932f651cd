"""Issue 29's audit: patterns normal in some model family that two rules of the recommended set read as
faults. SGDR's warm restarts (LearningRateDiscontinuity's "rise after the peak") and a model that
generalises within its first epoch (ValidationLossNotDecreasing's "no pass beat the first"); the faults
each rule exists for still fire."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hook_trials import epochs
from rules_helpers import torch_lrs

from tornasole.exceptions import RuleParameterError
from tornasole.rules import create_rule, invoke_rule
from tornasole.rules.generic import ValidationLossNotDecreasing


def _first_firing(rule, steps) -> int | None:
    for s in steps:
        if rule.evaluate(s).fired:
            return s
    return None


def _torch_lrs(scheduler: str, steps: int, peak: float = 1e-2) -> list[float]:
    """SGDR (cycles of 30 steps, doubling) or one-cycle over ``steps``, as PyTorch sets them."""
    import torch

    sched = torch.optim.lr_scheduler
    if scheduler == "sgdr":
        return torch_lrs(lambda opt: sched.CosineAnnealingWarmRestarts(opt, T_0=30, T_mult=2), steps, peak)
    return torch_lrs(lambda opt: sched.OneCycleLR(opt, max_lr=peak, total_steps=steps), steps, peak)


def _lr_trial(trial_factory, lrs: list[float], every: int = 1):
    return trial_factory({s: {"scalar/lr/0": np.float32(v)} for s, v in enumerate(lrs) if s % every == 0})


@pytest.mark.parametrize("every", [1, 4])
def test_sgdr_warm_restarts_and_one_cycle_are_quiet(trial_factory, every):
    # SGDR: cycles of 30, 60, 120 steps, each annealed to 0 and restarted at the peak (steps 30, 90)
    for lrs in (_torch_lrs("sgdr", 200), _torch_lrs("onecycle", 200)):
        trial = _lr_trial(trial_factory, lrs, every)
        steps = [s for s in range(len(lrs)) if s % every == 0]
        assert _first_firing(create_rule("LearningRateDiscontinuity", trial), steps) is None


def test_sgdr_restart_fires_with_the_warm_restart_reading_off(trial_factory):
    trial = _lr_trial(trial_factory, _torch_lrs("sgdr", 100))
    rule = create_rule("LearningRateDiscontinuity", trial, restart_below="0")
    assert _first_firing(rule, range(100)) == 30
    assert rule.evaluate(30).values["criterion"] == "rise"


def test_a_jump_back_to_the_peak_mid_decay_still_fires(trial_factory):
    # a resume that lost the scheduler's state while the cosine was at a fifth of its peak (above
    # restart_below 0.1): the same rise as a restart, from a rate no cycle ends at
    peak = 1e-3
    cos = [peak * 0.5 * (1 + math.cos(math.pi * s / 100)) for s in range(100)]
    at = next(s for s, v in enumerate(cos) if v < 0.2 * peak)
    lrs = cos[:at] + cos[: 100 - at]
    rule = create_rule("LearningRateDiscontinuity", _lr_trial(trial_factory, lrs))
    assert _first_firing(rule, range(100)) == at
    assert rule.evaluate(at).values["criterion"] == "rise"
    # a jump above the earlier peak is no restart either, even from the bottom of a cycle
    lrs = cos + [2 * peak] * 3
    rule = create_rule("LearningRateDiscontinuity", _lr_trial(trial_factory, lrs))
    assert _first_firing(rule, range(103)) == 100


def _sgdr_to_a_floor(steps: int, peak: float = 3e-3) -> list[float]:
    """SGDR with cycles of 190 steps annealed to a tenth of the peak (``eta_min``), after a 30-step warmup:
    the held-out text LM family's restarts, whose cycle is longer than the evaluator's 64 loaded steps."""
    import torch

    sched = torch.optim.lr_scheduler
    warm = [peak * (s + 1) / 30 for s in range(30)]
    return warm + torch_lrs(
        lambda opt: sched.CosineAnnealingWarmRestarts(opt, T_0=190, eta_min=0.1 * peak), steps - 30, peak
    )


@pytest.mark.parametrize("window", [64, 100])
def test_a_warm_restart_from_a_floor_above_a_tenth_of_the_peak_is_quiet(trial_factory, window):
    # the floor (0.1 of the peak) is not under restart_below of the peak, and through 64 loaded steps the
    # window's highest rate is 0.59 of the peak; the cosine's last falls before the restart are near 0
    lrs = _sgdr_to_a_floor(600)
    rule = create_rule("LearningRateDiscontinuity", _lr_trial(trial_factory, lrs), window=str(window))
    assert _first_firing(rule, range(600)) is None
    off = create_rule("LearningRateDiscontinuity", _lr_trial(trial_factory, lrs), restart_below="0")
    assert _first_firing(off, range(600)) == 220  # the first restart (30 + 190), with the reading off


@pytest.mark.parametrize("window", [64, 100])
def test_jumps_that_are_no_restart_from_a_flat_bottom_still_fire(trial_factory, window):
    peak = 3e-3
    sgdr = _sgdr_to_a_floor(220, peak)
    # a resume that lost the scheduler's state mid-cycle (the rate at half its range, still falling steeply)
    mid = next(s for s in range(120, 220) if sgdr[s] < 0.55 * peak)
    lrs = sgdr[:mid] + sgdr[30:]
    rule = create_rule("LearningRateDiscontinuity", _lr_trial(trial_factory, lrs), window=str(window))
    assert _first_firing(rule, range(len(lrs))) == mid
    # a blow-up at the bottom of the cycle: far above any rate the schedule had
    lrs = sgdr[:219] + [100 * peak] * 3
    rule = create_rule("LearningRateDiscontinuity", _lr_trial(trial_factory, lrs), window=str(window))
    assert _first_firing(rule, range(len(lrs))) == 219
    # a step schedule (gamma 0.3 at step 40) set back to its initial rate: the decline is one fall
    step = [peak * 0.3 ** (s // 40) for s in range(60)] + [peak] * 3
    rule = create_rule("LearningRateDiscontinuity", _lr_trial(trial_factory, step), window=str(window))
    assert _first_firing(rule, range(len(step))) == 60
    # a linear decay set back to its start: its falls stay as steep as ever
    linear = [peak * (1 - 0.8 * s / 100) for s in range(100)] + [peak] * 3
    rule = create_rule("LearningRateDiscontinuity", _lr_trial(trial_factory, linear), window=str(window))
    assert _first_firing(rule, range(len(linear))) == 100


def test_restart_below_must_not_be_negative(trial_factory):
    trial = _lr_trial(trial_factory, [1e-3] * 3)
    with pytest.raises(RuleParameterError, match="restart_below"):
        create_rule("LearningRateDiscontinuity", trial, restart_below="-1")


def _run(path, train_means, val_means, batches=4):
    """Epochs of ``batches`` TRAIN steps (+-0.02 around the epoch's mean), then a 2-batch validation pass."""
    train = [
        [{"loss": np.float32(m + (0.02 if b % 2 else -0.02))} for b in range(batches)] for m in train_means
    ]
    return epochs(path, train, [[{"loss": np.float32(v)}] * 2 for v in val_means])


# the families benchmark's softmax MLP under SGDR with no warmup (seed 1): 97% validation accuracy after
# the first epoch (validation loss 0.11 against a first training phase of 0.51), then a warm restart's bump
FIRST_EPOCH_TRAIN = [0.512, 0.034, 0.204, 0.016, 0.038]
FIRST_EPOCH_VAL = [0.114, 0.125, 0.195, 0.124, 0.116]


def test_quiet_on_a_model_that_generalised_in_its_first_epoch(tmp_path):
    trial = _run(str(tmp_path / "a"), FIRST_EPOCH_TRAIN, FIRST_EPOCH_VAL)
    assert invoke_rule(ValidationLossNotDecreasing(trial)).fired == []
    # with the first-epoch reading off, the same run is flagged at its fifth pass (the rule before issue 29)
    off = ValidationLossNotDecreasing(trial, generalised_percent="101")
    assert invoke_rule(off).first_step == 29


def test_a_first_pass_near_the_first_phase_is_still_judged(tmp_path):
    # permuted labels: the first pass sits at the first phase's loss (chance), the model then memorises
    trial = _run(str(tmp_path / "a"), [1.79, 1.73, 1.70, 1.68, 1.60], [1.765, 1.785, 1.815, 1.845, 1.835])
    assert invoke_rule(ValidationLossNotDecreasing(trial)).first_step == 29
    # a first pass 40% below the first phase (under generalised_percent 50) is judged too
    trial = _run(str(tmp_path / "b"), [2.0, 1.0, 0.8, 0.7, 0.6], [1.2, 1.22, 1.25, 1.3, 1.28])
    assert invoke_rule(ValidationLossNotDecreasing(trial)).first_step == 29


def test_a_model_that_generalised_then_memorises_is_still_flagged(tmp_path):
    # the families benchmark's Keras binary classifier fed inputs x100 (seed 1): its first pass is 86% below
    # the first phase (which the unscaled inputs inflate), then the validation loss rises while the
    # training loss falls: UMLAUT's overfitting symptom at the fifth pass
    train = [1.262, 0.12, 0.10, 0.08, 0.06]
    trial = _run(str(tmp_path / "a"), train, [0.179, 0.304, 0.176, 0.204, 0.211])
    assert invoke_rule(ValidationLossNotDecreasing(trial)).first_step == 29


def test_generalised_percent_must_not_be_negative(tmp_path):
    trial = _run(str(tmp_path / "a"), FIRST_EPOCH_TRAIN, FIRST_EPOCH_VAL)
    with pytest.raises(RuleParameterError, match="generalised_percent"):
        ValidationLossNotDecreasing(trial, generalised_percent="-1")
