"""LossNotDecreasing's ``warmup_rise_percent``: no decrease check while a saved learning rate still rises.

Traces of TRAIN steps written with the numpy API: a loss that stays at chance (ln 10 plus a little batch
noise) and a rate saved as ``scalar/lr/0``, as both hooks save it. Parameters: the calibrated opt-in
configuration (``OPT_IN``: it left the recommended set, docs/RULES.md).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.modes import TRAIN
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.recommended import OPT_IN
from tornasole.rules.generic import LossNotDecreasing

PARAMS = next(p for name, _, p in OPT_IN if name == "LossNotDecreasing")
WARMUP = 200  # steps of a linear warmup from 0


def _flat_loss(step: int) -> float:
    return math.log(10) + 0.02 * math.sin(1.7 * step)


def _warmup_then(after: str):
    def rate(step: int) -> float:
        if step < WARMUP:
            return 1e-3 * step / WARMUP
        if after == "constant":
            return 1e-3
        return 1e-3 * 0.5 * (1 + math.cos(math.pi * (step - WARMUP) / 400))

    return rate


def _trial(trial_factory, steps, loss=_flat_loss, rate=None, mode=TRAIN):
    out = {}
    for s in range(steps):
        values = {"loss": np.float32(loss(s))}
        if rate is not None:
            values["scalar/lr/0"] = np.float32(rate(s))
        out[s] = (mode, s, values) if mode is not None else values
    return trial_factory(out, collections={"losses": ["loss"], "scalars": ["scalar/lr/0"]})


def _fired(trial, **overrides):
    return invoke_rule(LossNotDecreasing(trial, **{**PARAMS, **overrides})).fired_steps


def test_the_recommended_set_defers_during_a_warmup():
    assert float(PARAMS["warmup_rise_percent"]) == 1


def test_a_flat_loss_during_a_warmup_from_zero_is_quiet(trial_factory):
    trial = _trial(trial_factory, WARMUP, rate=_warmup_then("constant"))
    assert _fired(trial) == []
    # the same trace judged without the deferral fires during the warmup (SageMaker's reading)
    assert _fired(trial, warmup_rise_percent="-1")[0] < WARMUP


def test_a_loss_still_flat_after_the_warmup_fires_at_the_first_point_after_it(trial_factory):
    for after in ("constant", "cosine"):
        fired = _fired(_trial(trial_factory, WARMUP + 100, rate=_warmup_then(after)))
        assert fired, after
        # the points checked during the warmup count toward patience: no extra delay once the rate stops
        assert WARMUP <= fired[0] <= WARMUP + 20, (after, fired[0])


def test_a_loss_that_falls_once_the_warmup_has_moved_the_weights_is_quiet(trial_factory):
    def loss(step: int) -> float:
        return _flat_loss(step) * (1.0 if step < 120 else max(0.2, 1 - (step - 120) / 150))

    assert _fired(_trial(trial_factory, WARMUP + 200, loss=loss, rate=_warmup_then("cosine"))) == []


@pytest.mark.parametrize(
    "rate",
    [lambda s: 1e-3, lambda s: 1e-3 * 0.5 * (1 + math.cos(math.pi * s / 300))],
    ids=["constant", "decaying"],
)
def test_a_stalled_loss_under_a_constant_or_decaying_rate_fires_as_before(trial_factory, rate):
    trial = _trial(trial_factory, 200, rate=rate)
    fired = _fired(trial)
    assert fired
    assert fired == _fired(trial, warmup_rise_percent="-1")


def test_without_a_saved_rate_the_verdicts_are_the_old_ones(trial_factory):
    trial = _trial(trial_factory, 200)
    fired = _fired(trial)
    assert fired
    assert fired == _fired(trial, warmup_rise_percent="-1")
    assert fired[0] == 80  # the first window, then four failing points 20 steps apart


def test_a_rate_saved_less_often_than_the_loss_still_defers(trial_factory):
    rate = _warmup_then("constant")
    trial = _trial(trial_factory, WARMUP, rate=lambda s: rate(s - s % 10))
    assert _fired(trial) == []


def test_global_steps_without_modes_defer_too(trial_factory):
    trial = _trial(trial_factory, WARMUP, rate=_warmup_then("constant"), mode=None)
    params = {k: v for k, v in PARAMS.items() if k != "mode"}
    assert invoke_rule(LossNotDecreasing(trial, **params)).fired_steps == []
    assert invoke_rule(LossNotDecreasing(trial, **{**params, "warmup_rise_percent": "-1"})).fired_steps


def test_a_rebound_still_fires_while_the_rate_rises(trial_factory):
    def loss(step: int) -> float:
        return 2.0 if step < 30 else 40.0  # diverged: far above the lowest loss

    trial = _trial(trial_factory, 60, loss=loss, rate=lambda s: 1e-3 * s / 100)
    got = invoke_rule(
        LossNotDecreasing(trial, num_steps="10", warmup_rise_percent="1", increase_threshold_percent="5")
    )
    assert got.fired_steps
    assert "above the lowest loss" in got.fired[0].details


def test_warmup_rise_percent_must_be_a_number(trial_factory):
    trial = _trial(trial_factory, 4)
    with pytest.raises(RuleParameterError, match="warmup_rise_percent"):
        LossNotDecreasing(trial, warmup_rise_percent="nan")
