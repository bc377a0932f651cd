"""``StepTable._mode_steps`` reads the table's dicts without taking ``StepTable.lock`` itself: its caller
holds it. Pinned here: every call runs with the lock held by the calling thread, and answers read while
another thread loads steps are never torn (a dict changing size under the read, or a step half there)."""

from __future__ import annotations

import sys
import threading

import pytest

from tornasole.modes import EVAL, GLOBAL, TRAIN
from tornasole.trials.step_index import StepTable, TensorEntry


def _entries(*names: str) -> dict[str, TensorEntry]:
    return {name: TensorEntry(shape=()) for name in names}


def _held_by_another_thread(lock) -> bool:
    """Whether a second thread finds ``lock`` taken (an RLock lets its owner take it again)."""
    taken = []

    def probe() -> None:
        got = lock.acquire(blocking=False)
        taken.append(not got)
        if got:
            lock.release()

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return taken[0]


def test_every_call_runs_under_the_tables_lock():
    table = StepTable(num_workers=2)
    for step in range(6):
        table.add_step(step, "worker_0", TRAIN if step % 3 else EVAL, step // 2, _entries("loss"))
    table.add_step(0, "worker_1", EVAL, 0, _entries("loss"))
    compute, held = table._mode_steps, []

    def watched(*args, **kwargs):
        held.append(_held_by_another_thread(table.lock))
        return compute(*args, **kwargs)

    table._mode_steps = watched
    for mode in (TRAIN, EVAL, GLOBAL):
        for complete in (True, False):
            table._changed()
            table.tensor_mode_steps("loss", mode, complete_only=complete)
    table.mark_all_loaded()
    table.tensor_mode_steps("loss", TRAIN)
    assert held == [True] * 7


@pytest.fixture
def fast_switching():
    """Threads switch every microsecond, so a read without the lock meets a write in progress."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def test_answers_read_while_steps_load_are_never_torn(fast_switching):
    table = StepTable(num_workers=1)
    steps = 3000
    done = threading.Event()
    errors: list[Exception] = []

    def load() -> None:
        try:
            for step in range(steps):
                table.add_step(step, "worker_0", TRAIN, step, _entries("loss", f"t{step}"))
        except Exception as e:  # reported by the test
            errors.append(e)
        finally:
            done.set()

    writer = threading.Thread(target=load)
    writer.start()
    reads = 0
    while not done.is_set() or reads == 0:
        for mode, complete in ((TRAIN, True), (GLOBAL, False)):
            try:
                got = table.tensor_mode_steps("loss", mode, complete_only=complete)
            except RuntimeError as e:  # "dictionary changed size during iteration"
                errors.append(e)
                break
            assert got == list(range(len(got)))  # every step below the newest, none missing
        reads += 1
    writer.join()
    assert errors == []
    assert reads > 1
    assert table.tensor_mode_steps("loss", TRAIN) == list(range(steps))
