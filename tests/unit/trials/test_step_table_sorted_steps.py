"""``StepTable.tensor_steps``, ``tensor_mode_steps`` and ``steps`` keep their sorted answers between
loads: each answer must still be what the table holds after every change that can move it (a step added out of
order, a worker's index re-read without a tensor, a worker arriving, the worker count set, steps settled,
the run's end), and a caller mutating the list it got must not change the next answer."""

from __future__ import annotations

from tornasole.modes import EVAL, GLOBAL, TRAIN
from tornasole.trials.step_index import StepTable, TensorEntry


def _entries(*names: str) -> dict[str, TensorEntry]:
    return {name: TensorEntry(shape=()) for name in names}


def _fresh_answers(table: StepTable, name: str) -> dict:
    """What a table with no kept answers gives: the reference each kept answer must equal."""
    table._changed()
    return _answers(table, name)


def _answers(table: StepTable, name: str) -> dict:
    got = {"all": table.tensor_steps(name)}
    for mode in (TRAIN, EVAL, GLOBAL):
        for complete in (True, False):
            got[(mode, complete)] = table.tensor_mode_steps(name, mode, complete_only=complete)
            # the whole table's steps, kept the same way (``sorted_steps``; ``steps`` copies it)
            got[("steps", mode, complete)] = table.steps(mode, complete_only=complete)
            assert list(table.sorted_steps(mode, complete_only=complete)) == got[("steps", mode, complete)]
    got[("steps", None, False)] = table.steps()
    return got


def _check(table: StepTable, name: str = "loss") -> dict:
    kept = _answers(table, name)
    assert kept == _answers(table, name)  # asked twice: the kept answer
    assert kept == _fresh_answers(table, name)
    return kept


def test_steps_added_out_of_order_and_modes_interleaved():
    table = StepTable(num_workers=1)
    table.add_step(4, "worker_0", TRAIN, 2, _entries("loss"))
    assert _check(table)[(TRAIN, True)] == [2]
    table.add_step(0, "worker_0", TRAIN, 0, _entries("loss"))
    table.add_step(2, "worker_0", EVAL, 0, _entries("loss"))
    got = _check(table)
    assert got["all"] == [0, 2, 4]
    assert got[(TRAIN, True)] == [0, 2]
    assert got[(EVAL, True)] == [0]
    assert got[(GLOBAL, True)] == [0, 2, 4]


def test_a_reread_index_without_the_tensor_drops_its_step():
    table = StepTable(num_workers=1)
    table.add_step(0, "worker_0", TRAIN, 0, _entries("loss"))
    table.add_step(1, "worker_0", TRAIN, 1, _entries("loss", "w"))
    assert _check(table)["all"] == [0, 1]
    table.add_step(1, "worker_0", TRAIN, 1, _entries("w"))
    assert _check(table)["all"] == [0]


def test_completeness_moves_the_complete_only_answers():
    table = StepTable(num_workers=2)
    table.add_step(0, "worker_0", TRAIN, 0, _entries("loss"))
    table.add_step(1, "worker_0", TRAIN, 1, _entries("loss"))
    got = _check(table)
    assert got[(TRAIN, True)] == []
    assert got[(TRAIN, False)] == [0, 1]
    table.add_step(0, "worker_1", TRAIN, 0, _entries("loss"))  # the second worker arrives for step 0
    assert _check(table)[(TRAIN, True)] == [0]
    table.settle_through(1)
    assert _check(table)[(TRAIN, True)] == [0, 1]
    table.add_step(2, "worker_0", TRAIN, 2, _entries("loss"))
    assert _check(table)[(TRAIN, True)] == [0, 1]
    table.set_num_workers(1)
    assert _check(table)[(TRAIN, True)] == [0, 1, 2]


def test_the_runs_end_completes_every_step():
    table = StepTable(num_workers=3)
    table.add_step(0, "worker_0", TRAIN, 0, _entries("loss"))
    assert _check(table)[(TRAIN, True)] == []
    table.mark_all_loaded()
    assert _check(table)[(TRAIN, True)] == [0]


def test_a_caller_mutating_its_list_changes_no_later_answer():
    table = StepTable(num_workers=1)
    for step in range(3):
        table.add_step(step, "worker_0", TRAIN, step, _entries("loss"))
    first = table.tensor_mode_steps("loss", TRAIN)
    first.append(99)
    everything = table.tensor_steps("loss")
    everything.clear()
    assert table.tensor_mode_steps("loss", TRAIN) == [0, 1, 2]
    assert table.tensor_steps("loss") == [0, 1, 2]
    listed = table.steps(TRAIN)
    listed.append(99)
    assert table.steps(TRAIN) == [0, 1, 2]
    assert table.sorted_steps(TRAIN) == (0, 1, 2)  # a tuple: the kept answer itself cannot be mutated
