"""Index loading pauses the cyclic garbage collector only while it runs and restores its state."""

from __future__ import annotations

import gc

import pytest
from trial_builder import make_trial_dir

from tornasole.trials import create_trial, loading


@pytest.fixture
def restore_gc():
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_collector_is_off_during_registration_and_back_on_after(tmp_path, monkeypatch, restore_gc):
    gc.enable()
    seen = []
    register = loading.IndexLoader._register

    def spy(self, keys, results):
        seen.append(gc.isenabled())
        return register(self, keys, results)

    monkeypatch.setattr(loading.IndexLoader, "_register", spy)
    trial = create_trial(make_trial_dir(str(tmp_path / "run"), range(3)))
    assert trial.steps() == [0, 1, 2]
    assert seen
    assert not any(seen)
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled(tmp_path, restore_gc):
    gc.disable()
    trial = create_trial(make_trial_dir(str(tmp_path / "run"), range(3)))
    assert trial.steps() == [0, 1, 2]
    assert not gc.isenabled()


def test_collector_restored_when_registration_raises(monkeypatch, restore_gc):
    gc.enable()

    def boom():
        with loading._collector_paused():
            assert not gc.isenabled()
            with loading._collector_paused():  # nested: the outer exit restores
                pass
            assert not gc.isenabled()
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        boom()
    assert gc.isenabled()
