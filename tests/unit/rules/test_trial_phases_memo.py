"""``trial_phases`` continues from an earlier answer when asked again with more steps (rules ask at every
evaluated step): each answer must equal the phases computed from the first step, an answer handed out
must never change afterwards, and several step lists of one trial must not mix."""

from __future__ import annotations

import gc

from tornasole.modes import EVAL, TRAIN
from tornasole.rules.builtin.overfit import _extend_phases, trial_phases


class Schedule:
    """A trial's step -> (mode, mode step) for ``epochs`` epochs of ``train`` TRAIN and ``val`` EVAL steps,
    TRAIN saved every ``every``-th step (what ``trial.mode``/``trial.mode_step`` answer)."""

    def __init__(self, epochs: int, train: int, val: int, every: int = 1) -> None:
        self.modes: dict[int, tuple[object, int]] = {}
        step, counts = 0, {TRAIN: 0, EVAL: 0}
        self.saved: list[int] = []
        for _ in range(epochs):
            for mode, n in ((TRAIN, train), (EVAL, val)):
                for i in range(n):
                    self.modes[step] = (mode, counts[mode])
                    if mode == EVAL or i % every == 0:
                        self.saved.append(step)
                    counts[mode] += 1
                    step += 1

    def mode(self, step: int) -> object:
        return self.modes[step][0]

    def mode_step(self, step: int) -> int:
        return self.modes[step][1]


def _fresh(trial: object, steps: list[int]) -> list:
    out: list = []
    _extend_phases(trial, out, steps, None)
    return out


def test_growing_prefixes_answer_as_from_the_first_step_and_old_answers_stay():
    trial = Schedule(epochs=6, train=5, val=3, every=2)
    handed = []
    for n in range(1, len(trial.saved) + 1):
        steps = trial.saved[:n]
        got = trial_phases(trial, steps)
        assert got == _fresh(trial, steps)
        handed.append((steps, [(m, list(s)) for m, s in got], got))
    for steps, copy, got in handed:
        assert got == copy  # later extensions changed no answer handed out before
        assert got == _fresh(trial, steps)


def test_several_step_lists_of_one_trial_do_not_mix():
    trial = Schedule(epochs=4, train=4, val=2)
    evals = [s for s in trial.saved if trial.mode(s) == EVAL]
    trains = [s for s in trial.saved if trial.mode(s) == TRAIN]
    for n in range(1, 9):
        for steps in (trial.saved[: 3 * n], evals[:n], trains[: 2 * n], trial.saved[1 : 2 * n]):
            assert trial_phases(trial, steps) == _fresh(trial, steps)


def test_a_shorter_list_after_a_longer_one_and_two_trials():
    one, two = Schedule(epochs=3, train=3, val=2), Schedule(epochs=3, train=2, val=3)
    assert trial_phases(one, one.saved) == _fresh(one, one.saved)
    assert trial_phases(one, one.saved[:4]) == _fresh(one, one.saved[:4])
    assert trial_phases(two, two.saved) == _fresh(two, two.saved)
    assert trial_phases(one, one.saved) == _fresh(one, one.saved)


def test_a_trial_that_cannot_be_weakly_referenced_is_answered_afresh():
    class Unhashable(Schedule):
        __hash__ = None  # type: ignore[assignment]

    trial = Unhashable(epochs=2, train=2, val=1)
    assert trial_phases(trial, trial.saved) == _fresh(trial, trial.saved)


def test_a_dropped_trial_is_forgotten():
    from tornasole.rules.builtin import overfit

    gc.collect()  # the trials earlier tests dropped go first
    trial = Schedule(epochs=2, train=2, val=1)
    trial_phases(trial, trial.saved)
    before = len(overfit._PHASES._by_trial)
    del trial
    gc.collect()
    assert len(overfit._PHASES._by_trial) == before - 1
