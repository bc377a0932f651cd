"""UnchangedWeights' ``faded_lr_fraction``: a window over which the saved learning rate stayed at or below
that fraction of its peak is not judged (a schedule decayed to ~0), where the trial saves a rate.

Traces of TRAIN steps written with the numpy API: a float32 LayerNorm-like scale (16 entries near 1) that
each saved step moves by the step's rate in a random direction (Adam's normalised step), and the rate saved
as ``scalar/lr/0``, as both hooks save it. The schedule falls by 0.7 per saved step, so
the updates round to nothing in float32 after about 28 saved steps, and the weights then stay equal for
more than the fade-out look-back (32 saved steps): the families' resmlp and digits_keras tails.
Parameters: the recommended set's.
"""

from __future__ import annotations

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.modes import TRAIN
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.recommended import RECOMMENDED
from tornasole.rules.generic import UnchangedTensor
from tornasole.rules.registry import ALIASES

PARAMS = dict(next(p for name, _, p in RECOMMENDED if name == "UnchangedWeights"))
STEPS = 80  # saved TRAIN steps
PEAK = 1e-3
DECAY = 0.7  # the rate's factor per saved step: below 1e-3 of the peak from saved step 20 on


def _decaying(i: int) -> float:
    return PEAK * DECAY**i


def _trial(trial_factory, moved_by, saved_rate=None):
    """Weights moved between saved steps by ``moved_by(i)`` per entry; ``saved_rate(i)`` saved as the rate
    (None: no rate saved)."""
    rng = np.random.default_rng(0)
    w = (1.0 + 0.05 * rng.normal(size=16)).astype(np.float32)
    out = {}
    for i in range(STEPS):
        if i:
            w = (w - np.float32(moved_by(i - 1)) * np.sign(rng.normal(size=16)).astype(np.float32)).astype(
                np.float32
            )
        values = {"weights/norm.gamma": w.copy()}
        if saved_rate is not None:
            values["scalar/lr/0"] = np.float32(saved_rate(i))
        out[i] = (TRAIN, i, values)
    return trial_factory(out, collections={"weights": ["^weights/"], "scalars": ["^scalar/"]})


def _fired(trial, **overrides):
    return invoke_rule(UnchangedTensor(trial, **{**PARAMS, **overrides})).fired_steps


def test_the_recommended_set_and_the_alias_pass_over_a_rate_below_a_thousandth_of_its_peak():
    assert float(PARAMS["faded_lr_fraction"]) == 1e-3
    assert ALIASES["UnchangedWeights"][1] == PARAMS


def test_weights_frozen_by_a_schedule_decayed_to_zero_are_quiet(trial_factory):
    trial = _trial(trial_factory, _decaying, _decaying)
    assert _fired(trial) == []
    # before: the weights stop moving for longer than the fade-out look-back, and the rule fired
    before = _fired(trial, faded_lr_fraction="0")
    assert before
    assert before[0] > 32
    # a schedule that ends at exactly 0, reached from below the fraction: still a decay
    trial = _trial(trial_factory, _decaying, lambda i: _decaying(i) if i < STEPS - 5 else 0.0)
    assert _fired(trial) == []


def test_the_same_weights_frozen_with_the_rate_still_high_fire(trial_factory):
    # the saved rate stays at its peak while the weights stop: parameters the optimiser does not update
    trial = _trial(trial_factory, _decaying, lambda i: PEAK)
    fired = _fired(trial)
    assert fired
    assert fired[0] == _fired(trial, faded_lr_fraction="0")[0]
    # a rate that decayed, but only to 1e-2 of its peak, is still judged
    trial = _trial(trial_factory, _decaying, lambda i: max(_decaying(i), 1e-2 * PEAK))
    assert _fired(trial)


def test_no_saved_rate_is_judged_as_without_the_parameter(trial_factory):
    trial = _trial(trial_factory, _decaying)
    fired = _fired(trial)
    assert fired
    assert fired == _fired(trial, faded_lr_fraction="0")


def test_faded_lr_fraction_is_validated(trial_factory):
    trial = _trial(trial_factory, _decaying)
    for bad in ("-1", "1"):
        with pytest.raises(RuleParameterError, match="faded_lr_fraction"):
            UnchangedTensor(trial, **{**PARAMS, "faded_lr_fraction": bad})


def test_a_rate_set_to_zero_while_live_is_still_judged(trial_factory):
    # scheduler_zeroes_lr: full-size updates, then the rate is exactly 0 (a bug, not a decay)
    def zeroed(i: int) -> float:
        return PEAK if i < 10 else 0.0

    trial = _trial(trial_factory, zeroed, zeroed)
    fired = _fired(trial)
    assert fired
    assert fired[0] == _fired(trial, faded_lr_fraction="0")[0] == 12  # the third equal saved step
