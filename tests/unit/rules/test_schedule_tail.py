"""UnchangedWeights at a schedule's tail (issue #29, families benchmark: softmax family): a weight whose
updates faded out under a cosine schedule is not a frozen layer; a learning rate zeroed by a bug, or
parameters the optimiser never sees, still are. Each test of ``fade_out_factor`` fails on the rule
before the option."""

from __future__ import annotations

import numpy as np

from tornasole.modes import TRAIN
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.recommended import RECOMMENDED
from tornasole.rules.generic import UnchangedTensor


def _weights(changes: list[float]) -> dict:
    """Saved TRAIN steps 0, 4, 8 ... of a 32-entry weight near 1 that moves by ``changes[i]`` (L2 norm)
    between saved steps i and i + 1."""
    rng = np.random.default_rng(0)
    w = np.ones(32, np.float64)
    direction = rng.normal(size=32)
    direction /= np.linalg.norm(direction)
    steps = {0: (TRAIN, 0, {"weights/norm.weight": w.astype(np.float32)})}
    for i, c in enumerate(changes, start=1):
        w = w + c * direction
        steps[4 * i] = (TRAIN, 4 * i, {"weights/norm.weight": w.astype(np.float32)})
    return steps


def _rule(trial, **params):
    return UnchangedTensor(trial, collection_names="weights", num_steps="3", **params)


def test_updates_that_faded_out_under_a_cosine_tail_are_passed_over(trial_factory):
    # halving every saved step from 5e-2 down to the float32 noise floor: a cosine schedule's last epochs
    changes = [5e-2 * 0.5**i for i in range(16)] + [0.0, 0.0, 0.0]
    trial = trial_factory(_weights(changes), {"weights": ["^weights/"]})
    assert invoke_rule(_rule(trial)).fired  # before: the faded weight reads as a frozen layer
    assert not invoke_rule(_rule(trial, fade_out_factor="10")).fired


def test_a_learning_rate_zeroed_after_full_size_updates_still_fires(trial_factory):
    changes = [5e-2] * 5 + [0.0] * 6
    trial = trial_factory(_weights(changes), {"weights": ["^weights/"]})
    fired = invoke_rule(_rule(trial, fade_out_factor="10")).fired
    assert fired
    assert fired[0].step == 4 * 7  # the first window of three equal saved steps: as without the option


def test_parameters_that_never_moved_still_fire(trial_factory):
    trial = trial_factory(_weights([0.0] * 6), {"weights": ["^weights/"]})
    fired = invoke_rule(_rule(trial, fade_out_factor="10")).fired
    assert fired
    assert fired[0].step == 8


def test_recommended_unchanged_weights_passes_over_faded_updates():
    (params,) = [p for name, _, p in RECOMMENDED if name == "UnchangedWeights"]
    assert params["fade_out_factor"] == "10"
