"""A schedule's tail that moves the weights too slowly per saved step to see, not a stop (issue #29,
families benchmark: induction_tf's cosine to 0 at batch 4).

UnchangedWeights' ``fade_out_drift``: a tensor whose every change between saved steps in the fade-out
look-back was within the allclose tolerance, but which moved beyond it over the look-back, is passed over.
WeightUpdateRatio's ``faded_lr_fraction``: a small ratio over a window in which every saved rate stayed at
or below that fraction of its peak is not judged (as UnchangedWeights already did). Each option is shown
firing without it on the same trace, and the faults it must not hide still fire at the step they did.

Traces of TRAIN steps 0, 4, 8 ... written with the numpy API: a float32 LayerNorm-like scale (32 entries
near 1) and, where a rate is saved, ``scalar/lr/0`` as both hooks save it. Parameters: the recommended
set's.
"""

from __future__ import annotations

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.modes import TRAIN
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.recommended import RECOMMENDED
from tornasole.rules.generic import UnchangedTensor, WeightUpdateRatio

UNCHANGED = dict(next(p for name, _, p in RECOMMENDED if name == "UnchangedWeights"))
UPDATE_RATIO = dict(next(p for name, _, p in RECOMMENDED if name == "WeightUpdateRatio"))
PEAK = 5e-3
RTOL = 1e-5


def _trial(trial_factory, changes: list[float], rates: list[float] | None, second: bool = False):
    """Saved TRAIN steps 4 i of a weight each of whose entries moves by ``changes[i - 1]`` x its allclose
    tolerance between saved steps i - 1 and i, up or down at random (Adam's noisy normalised steps: a random
    walk, as the families' LayerNorm weights move at a schedule's tail); ``rates[i]`` saved as the rate
    (None: no rate). ``second``: a second weight, moving at the peak's pace throughout (WeightUpdateRatio's
    model is then not idle)."""
    rng = np.random.default_rng(0)
    w = (1.0 + 0.05 * rng.normal(size=32)).astype(np.float64)
    other = rng.normal(size=32)
    steps = {}
    for i in range(len(changes) + 1):
        if i:
            w = w + changes[i - 1] * RTOL * np.abs(w) * np.sign(rng.normal(size=32))
            other = other + 1e-2 * rng.normal(size=32)
        values = {"weights/norm.weight": w.astype(np.float32)}
        if second:
            values["weights/proj.weight"] = other.astype(np.float32)
        if rates is not None:
            values["scalar/lr/0"] = np.float32(rates[i])
        steps[4 * i] = (TRAIN, 4 * i, values)
    return trial_factory(steps, collections={"weights": ["^weights/"], "scalars": ["^scalar/"]})


def _unchanged(trial, **overrides):
    return invoke_rule(UnchangedTensor(trial, **{**UNCHANGED, **overrides})).fired_steps


def _ratio(trial, **overrides):
    return invoke_rule(WeightUpdateRatio(trial, **{**UPDATE_RATIO, **overrides})).fired_steps


# A tail at 2e-3 of the peak rate: visible updates, then 60 saved steps of changes a third of the
# tolerance each (each pair allclose; over the 32 saved steps of the look-back, a random walk of about
# sqrt(32) / 3 ~ 1.9 tolerances per entry).
TAIL = [3.0] * 10 + [0.33] * 60
TAIL_RATES = [PEAK] * 11 + [2e-3 * PEAK] * 60


def test_the_recommended_set_turns_both_options_on():
    assert UNCHANGED["fade_out_drift"] == "True"
    assert float(UPDATE_RATIO["faded_lr_fraction"]) == 1e-3


def test_a_weight_drifting_below_the_tolerance_per_step_is_passed_over(trial_factory):
    trial = _trial(trial_factory, TAIL, TAIL_RATES)
    assert _unchanged(trial) == []
    before = _unchanged(trial, fade_out_drift="False")
    assert before  # the rate is 2e-3 of its peak, above faded_lr_fraction: judged, and it fired
    assert before[0] > 4 * (10 + 32)  # once the look-back held only allclose changes


def test_a_weight_that_stopped_still_fires_at_the_same_step(trial_factory):
    # full-size updates (above fade_out_factor x the tolerance), then none: a rate a bug set to 0 while the
    # saved rate stays live, judged as without the option
    trial = _trial(trial_factory, [30.0] * 10 + [0.0] * 50, [PEAK] * 61)
    fired = _unchanged(trial)
    assert fired
    assert fired == _unchanged(trial, fade_out_drift="False")
    assert fired[0] == 4 * 12  # the first window of three equal saved steps


def test_a_weight_that_never_moved_still_fires(trial_factory):
    trial = _trial(trial_factory, [0.0] * 20, [PEAK] * 21)
    fired = _unchanged(trial)
    assert fired
    assert fired == _unchanged(trial, fade_out_drift="False")
    assert fired[0] == 8


def test_a_drift_that_ended_is_judged_once_the_look_back_is_still(trial_factory):
    # updates fading to a drift (within fade_out_factor x the tolerance), then still for longer than the
    # look-back (32 saved steps): a stop after all
    changes = [3.0] * 5 + [0.33] * 40 + [0.0] * 40
    trial = _trial(trial_factory, changes, [PEAK] * 86)
    fired = _unchanged(trial)
    assert fired
    assert 4 * 45 < fired[0] <= 4 * (45 + 32 + 3)
    before = _unchanged(trial, fade_out_drift="False")
    assert before
    assert before[0] < 4 * 45  # without the option: during the drift


def test_update_ratio_passes_over_a_window_under_a_faded_rate(trial_factory):
    # a cosine's last saved steps: updates that round to nothing in float32 for longer than the fade-out
    # look-back while the rate is below 1e-3 of its peak
    changes = [3.0] * 10 + [0.05] * 20 + [0.0] * 30
    rates = [PEAK] * 11 + [5e-4 * PEAK] * 50
    trial = _trial(trial_factory, changes, rates, second=True)
    assert _ratio(trial) == []
    before = _ratio(trial, faded_lr_fraction="0")
    assert before  # without the option the equal weights fire


def test_update_ratio_still_fires_under_a_live_or_zeroed_rate(trial_factory):
    changes = [3.0] * 10 + [0.05] * 20 + [0.0] * 30
    for rates in ([PEAK] * 61, [PEAK] * 11 + [0.0] * 50):  # live: left out of the optimiser; 0: a bug
        trial = _trial(trial_factory, changes, rates, second=True)
        fired = _ratio(trial)
        assert fired
        assert fired == _ratio(trial, faded_lr_fraction="0")


def test_update_ratio_validates_faded_lr_fraction(trial_factory):
    trial = _trial(trial_factory, [1.0] * 3, [PEAK] * 4, second=True)
    for bad in ("-1", "1"):
        with pytest.raises(RuleParameterError, match="faded_lr_fraction"):
            WeightUpdateRatio(trial, **{**UPDATE_RATIO, "faded_lr_fraction": bad})


def test_a_momentum_coasting_after_the_rate_was_zeroed_is_not_a_drift(trial_factory):
    # SGD momentum 0.9 after a scheduler bug set the rate to 0: the velocity decays by 0.9 per step, so the
    # weights keep moving, ever less, under a saved rate of 0 (regression_keras's scheduler_zeroes_lr)
    changes = [30.0] * 10 + [3.0 * 0.9**k for k in range(60)]
    zeroed = [PEAK] * 11 + [0.0] * 60
    trial = _trial(trial_factory, changes, zeroed)
    fired = _unchanged(trial)
    assert fired
    assert fired == _unchanged(trial, fade_out_drift="False")
    # the saved rate is what tells it from a slow tail: the same movement under a live rate is a drift
    live = _trial(trial_factory, changes, [PEAK] * 11 + [2e-3 * PEAK] * 60)
    assert _unchanged(live) == []


def test_rate_zeroed_reads_only_the_saved_rates_within_its_steps(trial_factory):
    # a rate 0 at saved step 2 (global step 8) only
    rates = [PEAK, PEAK, 0.0] + [PEAK] * 8
    rule = UnchangedTensor(_trial(trial_factory, [1.0] * 10, rates), **UNCHANGED)
    inside = [(8, 8), (4, 12), (5, 9)]  # (5, 9): steps between saved ones, holding step 8
    outside = [(12, 40), (0, 4), (9, 11)]  # (9, 11): no saved step at all
    assert [rule.rate_zeroed(*span) for span in inside + outside] == [True] * 3 + [False] * 3
    no_rate = UnchangedTensor(_trial(trial_factory, [1.0] * 10, None), **UNCHANGED)
    assert not no_rate.rate_zeroed(0, 40)
