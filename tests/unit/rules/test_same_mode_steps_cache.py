"""``same_mode_steps`` maps each mode step once, and answers as the uncached walk does on a growing trial."""

from __future__ import annotations

import numpy as np
from hook_trials import epochs

from tornasole.modes import EVAL, GLOBAL, TRAIN
from tornasole.rules.builtin.base import BuiltinRule


class _Probe(BuiltinRule):
    """A rule that only looks back (the built-ins' helper, nothing else)."""

    def invoke_at_step(self, step: int) -> bool:
        return False


def _walk(trial, name, step, mode):
    """The uncached answer: every mode step mapped afresh."""
    if mode == GLOBAL:
        return [s for s in trial.tensor(name).steps() if s <= step]
    out = [trial.global_step(mode, ms) for ms in trial.tensor(name).steps(mode=mode)]
    return sorted(g for g in out if g is not None and g <= step)


def test_cached_answers_equal_the_walk_at_every_step_and_mode(tmp_path):
    w = {"weights/fc.weight": np.ones(3)}
    trial = epochs(str(tmp_path / "t"), [[w] * 4, [w] * 3, [w] * 5], [[w] * 2, [w], [w] * 2])
    probe = _Probe(trial)
    for step in trial.steps():
        for mode in (TRAIN, EVAL, GLOBAL, None):
            mode_of = probe.step_mode(step, trial) if mode is None else mode
            assert probe.same_mode_steps("weights/fc.weight", step, mode) == _walk(
                trial, "weights/fc.weight", step, mode_of
            ), (step, mode)


def test_each_mode_step_is_mapped_once(tmp_path, monkeypatch):
    w = {"weights/fc.weight": np.ones(3)}
    trial = epochs(str(tmp_path / "t"), [[w] * 50], [[w] * 10])
    probe = _Probe(trial)
    calls = []
    real = trial.global_step
    monkeypatch.setattr(trial, "global_step", lambda mode, ms: calls.append(ms) or real(mode, ms))
    for step in trial.steps():
        probe.same_mode_steps("weights/fc.weight", step, TRAIN)
    assert len(calls) == 50  # was 50 x 60 = 3,000: every step walked the whole history
    assert probe.same_mode_steps("weights/fc.weight", 10**6, TRAIN) == _walk(
        trial, "weights/fc.weight", 10**6, TRAIN
    )
