"""WeightUpdateRatio's ``skip_idle_model`` (issue #29, families benchmark: the held-out ``diabetes_huber``): a
window in which no weight of the model moved made no optimiser update (gradient accumulation over more
batches than the save interval, a warmup's first step at rate 0, a skipped fp16 step) and is not a layer
that stopped; a layer the optimiser never sees while the others move, and a model that stops moving
altogether, still fire. The first test fails on the rule without the option."""

from __future__ import annotations

import numpy as np

from tornasole.modes import TRAIN
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.recommended import RECOMMENDED
from tornasole.rules.generic import WeightUpdateRatio

LAYERS = ("weights/fc1.weight", "weights/fc2.weight")


def _weights(moves: list[tuple[float, float]]) -> dict:
    """Saved TRAIN steps 0, 4, 8 ... of two 32-entry weights near 1; ``moves[i]`` is how far (L2 norm) each
    layer moved between saved steps i and i + 1."""
    rng = np.random.default_rng(0)
    ws = [np.ones(32, np.float64) for _ in LAYERS]
    dirs = [d / np.linalg.norm(d) for d in rng.normal(size=(len(LAYERS), 32))]
    steps = {0: (TRAIN, 0, {n: w.astype(np.float32) for n, w in zip(LAYERS, ws, strict=True)})}
    for i, move in enumerate(moves, start=1):
        ws = [w + m * d for w, m, d in zip(ws, move, dirs, strict=True)]
        steps[4 * i] = (TRAIN, 4 * i, {n: w.astype(np.float32) for n, w in zip(LAYERS, ws, strict=True)})
    return steps


def _fired(trial_factory, moves, **params) -> list[int]:
    trial = trial_factory(_weights(moves), {"weights": ["^weights/"]})
    return invoke_rule(WeightUpdateRatio(trial, **params)).fired_steps


def test_a_first_window_without_an_update_is_passed_over(trial_factory):
    # the first optimiser step at rate 0 (a warmup from 0, accumulation of 4 batches): steps 0 and 4 equal
    moves = [(0.0, 0.0)] + [(1e-2, 1e-2)] * 6
    assert _fired(trial_factory, moves)[:1] == [4]  # before: a model that has not moved yet reads as stuck
    assert _fired(trial_factory, moves, skip_idle_model="True") == []


def test_accumulation_longer_than_the_save_interval_is_passed_over(trial_factory):
    moves = [(1e-2, 1e-2), (0.0, 0.0)] * 4  # an update every other saved step
    assert _fired(trial_factory, moves, skip_idle_model="True") == []


def test_a_layer_the_optimiser_never_sees_still_fires_at_the_first_window(trial_factory):
    moves = [(0.0, 1e-2)] * 6  # fc1 never moves while fc2 does
    assert _fired(trial_factory, moves, skip_idle_model="True")[0] == 4


def test_a_model_that_stops_moving_altogether_fires_one_window_later(trial_factory):
    moves = [(1e-2, 1e-2)] * 4 + [(0.0, 0.0)] * 4  # a scheduler zeroed the rate after step 16
    assert _fired(trial_factory, moves)[0] == 20
    assert _fired(trial_factory, moves, skip_idle_model="True")[0] == 24


def test_the_recommended_set_skips_idle_windows():
    (params,) = [p for name, _, p in RECOMMENDED if name == "WeightUpdateRatio"]
    assert params["skip_idle_model"] == "True"


def _with_gradients(moves, gradient_scale: list[float]) -> dict:
    """:func:`_weights` plus each layer's gradient saved at every step: a fixed non-zero gradient x
    ``gradient_scale[i]`` at saved step i (0: the layer's gradient is exactly zero there)."""
    steps = _weights(moves)
    for i, (step, (mode, mode_step, tensors)) in enumerate(sorted(steps.items())):
        grads = {
            "gradients/" + n.split("/", 1)[1]: np.full(32, 0.1 * gradient_scale[i], np.float32)
            for n in LAYERS
        }
        steps[step] = (mode, mode_step, {**tensors, **grads})
    return steps


def _fired_with_gradients(trial_factory, moves, gradient_scale, **params) -> list[int]:
    colls = {"weights": ["^weights/"], "gradients": ["^gradients/"]}
    trial = trial_factory(_with_gradients(moves, gradient_scale), colls)
    return invoke_rule(WeightUpdateRatio(trial, **params)).fired_steps


def test_a_dead_model_fires_at_its_first_window_without_waiting(trial_factory):
    """Every ReLU dead from the start (run.py's dying-ReLU runs): no weight moves because every gradient
    is exactly zero. That is not a window without an update, and it fires at once; the same first window
    with gradients (a warmup's first step at rate 0) is still passed over."""
    moves = [(0.0, 0.0)] * 6
    dead = _fired_with_gradients(trial_factory, moves, [0.0] * 7, skip_idle_model="True")
    assert dead[0] == 4
    warming = [(0.0, 0.0)] + [(1e-2, 1e-2)] * 5
    assert _fired_with_gradients(trial_factory, warming, [1.0] * 7, skip_idle_model="True") == []
    # a scheduler that zeroed the rate leaves the gradients: one window later, as without gradients saved
    stopped = [(1e-2, 1e-2)] * 4 + [(0.0, 0.0)] * 2
    assert _fired_with_gradients(trial_factory, stopped, [1.0] * 7, skip_idle_model="True")[0] == 24


def test_a_non_finite_or_partial_gradient_is_not_a_dead_model(trial_factory):
    """An fp16 step the scaler skipped has infinite gradients (the window is passed over); one layer's
    gradient zero while the other's is not is no dead model either."""
    moves = [(0.0, 0.0)] + [(1e-2, 1e-2)] * 5
    assert (
        _fired_with_gradients(trial_factory, moves, [1.0, np.inf] + [1.0] * 5, skip_idle_model="True") == []
    )
    steps = _with_gradients(moves, [1.0] * 7)
    mode, mode_step, tensors = steps[4]
    steps[4] = (mode, mode_step, {**tensors, "gradients/fc1.weight": np.zeros(32, np.float32)})
    trial = trial_factory(steps, {"weights": ["^weights/"], "gradients": ["^gradients/"]})
    assert invoke_rule(WeightUpdateRatio(trial, skip_idle_model="True")).fired_steps == []
