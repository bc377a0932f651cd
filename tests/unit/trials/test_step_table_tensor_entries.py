"""``StepTable.tensor_entries``: each tensor's own ``{step: entry}``, which the read path looks up first.

It must always give what ``first_entry`` gives (the entry of the first worker,
by name, that saved the tensor at that step), whatever order workers' index
files load in, when a worker's index is read again, and for steps that load
after a ``Tensor`` took the dict.
"""

from __future__ import annotations

import numpy as np
from trial_builder import make_trial_dir, tensor_value, write_step

from tornasole.modes import GLOBAL
from tornasole.trials import create_trial
from tornasole.trials.step_index import StepTable, TensorEntry


def _entries(*names: str) -> dict[str, TensorEntry]:
    return {name: TensorEntry(shape=(len(name),)) for name in names}


def _agrees_with_first_entry(table: StepTable) -> None:
    for name in table.tensor_names():
        by_step = table.tensor_entries(name)
        assert sorted(by_step) == table.tensor_steps(name)
        for step, entry in by_step.items():
            assert table.first_entry(name, step)[1] is entry


def test_one_worker_per_step():
    table = StepTable(num_workers=1)
    a, b = _entries("loss", "w"), _entries("loss")
    table.add_step(0, "worker_0", GLOBAL, 0, a)
    table.add_step(1, "worker_0", GLOBAL, 1, b)
    assert dict(table.tensor_entries("loss")) == {0: a["loss"], 1: b["loss"]}
    assert dict(table.tensor_entries("w")) == {0: a["w"]}
    assert dict(table.tensor_entries("never_saved")) == {}
    _agrees_with_first_entry(table)


def test_several_workers_give_the_first_worker_by_name_in_any_load_order():
    table = StepTable(num_workers=3)
    w2, w1, w0 = _entries("loss", "only_2"), _entries("loss", "only_1"), _entries("loss", "w")
    table.add_step(4, "worker_2", GLOBAL, 4, w2)
    assert table.tensor_entries("loss")[4] is w2["loss"]
    table.add_step(4, "worker_1", GLOBAL, 4, w1)
    assert table.tensor_entries("loss")[4] is w1["loss"]
    table.add_step(4, "worker_0", GLOBAL, 4, w0)
    assert table.tensor_entries("loss")[4] is w0["loss"]
    assert table.tensor_entries("only_2")[4] is w2["only_2"]
    assert table.tensor_entries("only_1")[4] is w1["only_1"]
    assert table.tensor_entries("w")[4] is w0["w"]
    _agrees_with_first_entry(table)


def test_an_index_read_again_without_a_tensor_drops_it_from_that_step():
    table = StepTable(num_workers=2)
    table.add_step(0, "worker_0", GLOBAL, 0, _entries("loss", "gone"))
    table.add_step(1, "worker_0", GLOBAL, 1, _entries("loss", "gone"))
    again = _entries("loss")
    table.add_step(1, "worker_0", GLOBAL, 1, again)  # the one worker of step 1, re-read
    assert dict(table.tensor_entries("gone")).keys() == {0}
    assert table.tensor_entries("loss")[1] is again["loss"]
    # with two workers: worker_0's entry goes, worker_1's takes its place
    first, second = _entries("loss", "shared"), _entries("shared")
    table.add_step(2, "worker_0", GLOBAL, 2, first)
    table.add_step(2, "worker_1", GLOBAL, 2, second)
    assert table.tensor_entries("shared")[2] is first["shared"]
    table.add_step(2, "worker_0", GLOBAL, 2, _entries("loss"))
    assert table.tensor_entries("shared")[2] is second["shared"]
    # a tensor no worker has any more is no longer a tensor of the trial
    table.add_step(0, "worker_0", GLOBAL, 0, _entries("loss"))
    assert not table.has_tensor("gone")
    assert table.tensor_steps("gone") == []
    _agrees_with_first_entry(table)


def test_a_tensor_reads_steps_that_load_after_it_was_handed_out(tmp_path):
    d = make_trial_dir(str(tmp_path / "run"), [0], workers=2, end=False)
    trial = create_trial(d)
    loss = trial.tensor("loss")
    np.testing.assert_array_equal(loss.value(0), tensor_value(0, "worker_0", "loss"))
    # step 1: worker_1's index lands first, then worker_0's, which is the one read without a worker
    write_step(d, 1, worker="worker_1", reductions=True)
    trial.maybe_refresh()
    np.testing.assert_array_equal(loss.value(1), tensor_value(1, "worker_1", "loss"))
    write_step(d, 1, worker="worker_0", reductions=True)
    trial.maybe_refresh()
    np.testing.assert_array_equal(loss.value(1), tensor_value(1, "worker_0", "loss"))
    np.testing.assert_array_equal(loss.values()[1], tensor_value(1, "worker_0", "loss"))
    np.testing.assert_array_equal(loss.value(1, worker="worker_1"), tensor_value(1, "worker_1", "loss"))
    # a saved reduction record is looked up the same way
    assert loss.reduction_value(1, "mean") == np.float32(tensor_value(1, "worker_0", "loss").mean())
    assert loss.reduction_value(1, "mean", worker="worker_1") == np.float32(
        tensor_value(1, "worker_1", "loss").mean()
    )
