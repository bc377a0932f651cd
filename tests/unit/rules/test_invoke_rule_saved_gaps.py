"""``invoke_rule`` over a finished trial saved every few steps: it visits exactly the saved steps, and
lists the trial's steps a bounded number of times, not once per step it passes. Why: each pass over an
unsaved step used to list (and sort) the whole run again, so a rule over a run of N saved steps cost
O(N^2); a 2,000-step run with batch 4 took 30 s for the recommended set, against 2.4 s now. Counted, not
timed: the number of listings is the property; the seconds are in bench/."""

from __future__ import annotations

import numpy as np
from rules_helpers import write_trial

from tornasole.modes import EVAL, TRAIN
from tornasole.rules import Rule, invoke_rule
from tornasole.trials import create_trial
from tornasole.trials.step_index import StepTable

SAVED_EVERY, TRAIN_STEPS = 4, 400


class _Visits(Rule):
    """Records every step it judges; fires at the saved steps that are multiples of 100."""

    def __init__(self, base_trial) -> None:
        super().__init__(base_trial)
        self.visited: list[int] = []

    def invoke_at_step(self, step: int) -> bool:
        self.visited.append(step)
        self.base_trial.tensor("loss").value(step)
        return step % 100 == 0


def _run_with_gaps() -> dict:
    """TRAIN steps saved every :data:`SAVED_EVERY`, then an EVAL pass of 3 steps saved every step."""
    steps = {}
    for g in range(0, TRAIN_STEPS, SAVED_EVERY):
        steps[g] = (TRAIN, g, {"loss": np.float32(1.0)})
    for i in range(3):
        steps[TRAIN_STEPS + i] = (EVAL, i, {"loss": np.float32(2.0)})
    return steps


def test_a_finished_trial_is_listed_a_bounded_number_of_times(trial_factory, monkeypatch):
    trial = trial_factory(_run_with_gaps(), {"losses": ["loss"]})
    saved = trial.steps()
    listings = {"trial": 0, "table": 0}
    trial_steps, table_sorted = type(trial).steps, StepTable.sorted_steps

    def count_trial(self, *args, **kwargs):
        listings["trial"] += 1
        return trial_steps(self, *args, **kwargs)

    def count_table(self, *args, **kwargs):
        listings["table"] += 1
        return table_sorted(self, *args, **kwargs)

    monkeypatch.setattr(type(trial), "steps", count_trial)
    monkeypatch.setattr(StepTable, "sorted_steps", count_table)
    rule = _Visits(trial)
    summary = invoke_rule(rule)
    assert rule.visited == saved  # every saved step, and only those
    assert [o.step for o in summary.fired] == [0, 100, 200, 300, 400]  # 400: the EVAL pass's first
    assert summary.steps_evaluated == len(saved)
    assert summary.status == "IssuesFound"
    # one listing of the finished run serves the whole loop; the table's kept answer serves the rest
    assert listings["trial"] <= 2, listings
    assert listings["table"] <= 3 * len(saved), listings  # a few cheap lookups a step, never a sort each


class _Appends(_Visits):
    """At step 200 of a live run, the job saves three more TRAIN steps past the end, then ends."""

    def __init__(self, base_trial, path: str) -> None:
        super().__init__(base_trial)
        self.path = path

    def invoke_at_step(self, step: int) -> bool:
        if step == 200:
            more = {g: (TRAIN, g, {"loss": np.float32(0.5)}) for g in range(404, 416, SAVED_EVERY)}
            write_trial(self.path, more, {"losses": ["loss"]}, end=True)
        return super().invoke_at_step(step)


def test_a_live_trial_still_sees_steps_saved_after_the_loop_listed_it(tmp_path):
    """Without the end marker the list is never final: steps saved after the loop first listed the run,
    past its gaps, are found and judged, and the loop ends at the run's end."""
    path = str(tmp_path / "live")
    write_trial(path, _run_with_gaps(), {"losses": ["loss"]}, end=False)
    trial = create_trial(path, collections_timeout=0.1, poll_interval=0.01)
    rule = _Appends(trial, path)
    summary = invoke_rule(rule, poll_interval=0.01)
    assert rule.visited[-3:] == [404, 408, 412]
    assert rule.visited == trial.steps()
    assert summary.steps_evaluated == len(rule.visited)
