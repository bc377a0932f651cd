"""smdebug's ``trial.collection(name)`` for a name the run does not have, and ``tensors_in_collection``
items that are names and Tensors at once (Tornasole's 2019 documentation used them as Tensors)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from trial_builder import tensor_value, write_collections, write_step

from tornasole import modes
from tornasole.core.collection import Collection
from tornasole.format.writer import TrialWriter
from tornasole.trials import create_trial


@pytest.fixture
def run_dir(tmp_path) -> str:
    d = str(tmp_path / "run")
    write_collections(d)
    for g in range(3):
        write_step(d, g, mode=modes.TRAIN, mode_step=g)
    TrialWriter(d).write_end_marker()
    return d


def test_collection_of_a_new_name_is_created_empty_and_kept(run_dir):
    trial = create_trial(run_dir)
    before = sorted(trial.collections())
    coll = trial.collection("my_metrics")
    assert isinstance(coll, Collection)
    assert coll.name == "my_metrics"
    assert coll.tensor_names == set()
    assert coll.include_regex == []
    assert trial.collection("my_metrics") is coll
    assert sorted(trial.collections()) == sorted([*before, "my_metrics"])
    assert trial.tensor_names(collection="my_metrics") == []
    assert trial.tensors_in_collection(coll) == []
    # the file's collections are untouched
    assert trial.collection("losses").tensor_names == {"loss"}


def test_collection_name_must_be_a_non_empty_string(run_dir):
    trial = create_trial(run_dir)
    for bad in ("", None, 3):
        with pytest.raises(TypeError, match="non-empty string"):
            trial.collection(bad)


def test_a_created_collection_gives_way_to_the_file_of_a_live_run(tmp_path):
    d = str(tmp_path / "live")
    write_step(d, 0, mode=modes.TRAIN, mode_step=0)  # no collections file yet
    trial = create_trial(d, collections_timeout=0)
    assert trial.collection("losses").tensor_names == set()
    write_collections(d)
    write_step(d, 1, mode=modes.TRAIN, mode_step=1)
    trial.maybe_refresh()
    assert trial.collection("losses").tensor_names == {"loss"}
    assert trial.tensor_names(collection="losses") == ["loss"]


def test_tensors_in_collection_items_are_names_and_tensors(run_dir):
    trial = create_trial(run_dir)
    names = trial.tensors_in_collection("losses")
    assert names == ["loss"]
    assert trial.tensor_names(collection="losses") == ["loss"]
    (t,) = names
    # a plain name: equal, same hash, usable as a key, prints and pickles as the name
    assert t == "loss"
    assert hash(t) == hash("loss")
    assert {"loss": 1}[t] == 1
    assert isinstance(t, str)
    assert repr(t) == "'loss'"
    assert f"{t}" == "loss"
    unpickled = pickle.loads(pickle.dumps(t))
    assert unpickled == "loss"
    assert type(unpickled) is str
    # and the Tensor of that name (the 2019 documentation's loop)
    assert t.name == "loss"
    assert t.steps() == [0, 1, 2]
    np.testing.assert_array_equal(t.value(1), tensor_value(1, "worker_0", "loss"))
    assert t.workers(1) == ["worker_0"]
    assert t.tensor is trial.tensor("loss")
    assert trial.tensor(t) is trial.tensor("loss")
    with pytest.raises(AttributeError):
        t.no_such_attribute  # noqa: B018
