"""The stop signal: polled off the training thread, exposed as a flag, optionally raised at a step end."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from tornasole import Hook, SaveConfig
from tornasole.hooks import TrainingStopRequested
from tornasole.hooks.stop_signal import StopSignalPoller
from tornasole.storage.schemes import get_storage

STOP = "tornasole_stop_training.json"


class CountingStorage:
    def __init__(self, inner):
        self.inner = inner
        self.exists_calls = 0
        self.threads: set[str] = set()

    def exists(self, path: str) -> bool:
        self.exists_calls += 1
        self.threads.add(threading.current_thread().name)
        return self.inner.exists(path)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_poller_checks_on_its_own_thread_at_most_every_interval(tmp_path: Path):
    storage = CountingStorage(get_storage(str(tmp_path)))
    poller = StopSignalPoller(storage, str(tmp_path / STOP), interval=0.2)
    poller.start()
    assert not poller.wait(0.5)
    calls = storage.exists_calls
    assert 2 <= calls <= 4  # t=0, 0.2, 0.4 (+ one scheduling slack)
    assert storage.threads == {"tornasole-stop-signal"}
    (tmp_path / STOP).write_text("{}")
    assert poller.wait(2.0)
    poller.close()


def test_hook_exposes_stop_requested_without_raising(tmp_path: Path):
    with Hook(str(tmp_path), save_config=SaveConfig(save_interval=1), stop_check_interval=0.05) as hook:
        assert not hook.stop_requested
        (tmp_path / STOP).write_text("{}")
        assert hook._stop_poller.wait(2.0)
        hook.next_step()  # no raise without raise_on_stop
        assert hook.stop_requested


def test_raise_on_stop_raises_once_at_the_next_step_boundary_and_close_still_ends(tmp_path: Path):
    hook = Hook(
        str(tmp_path), save_config=SaveConfig(save_interval=1), stop_check_interval=0.05, raise_on_stop=True
    )
    hook.save_tensor("w", np.ones(2))
    hook.next_step()
    (tmp_path / STOP).write_text("{}")
    assert hook._stop_poller.wait(2.0)
    hook.save_tensor("w", np.ones(2))
    with pytest.raises(TrainingStopRequested, match=STOP) as info:
        hook.next_step()
    assert info.value.step == 1
    hook.next_step()  # raised once only
    hook.close()
    assert (tmp_path / "index/000000000/000000000001_worker_0.json").exists()
    assert (tmp_path / "training_job_end.ts").exists()


def test_stop_checks_can_be_turned_off(tmp_path: Path):
    (tmp_path / STOP).write_text("{}")
    with Hook(str(tmp_path), stop_check_interval=None) as hook:
        assert hook._stop_poller is None
        assert not hook.stop_requested


def test_by_default_a_hook_checks_often_enough_to_see_a_verdict_within_one_second(tmp_path: Path):
    # the default used to be 5 s: stop_requested came 2.4 s (16 steps) after the verdict on average
    import tornasole.pytorch as ts
    from tornasole.hooks.stop_signal import DEFAULT_STOP_CHECK_INTERVAL

    assert DEFAULT_STOP_CHECK_INTERVAL <= 0.5  # + one check's round trip: within 1 s (bench/stop_signal.py)
    assert (
        StopSignalPoller(get_storage(str(tmp_path)), str(tmp_path / STOP)).interval
        == DEFAULT_STOP_CHECK_INTERVAL
    )
    for cls, out in ((Hook, tmp_path / "core"), (ts.Hook, tmp_path / "pytorch")):
        with cls(str(out)) as hook:
            assert hook._stop_poller.interval == DEFAULT_STOP_CHECK_INTERVAL
            assert not hook.stop_requested
            out.mkdir(exist_ok=True)
            (out / STOP).write_text("{}")
            assert hook._stop_poller.wait(10.0)  # generous: a loaded test machine; speed is benchmarked
            assert hook.stop_requested
