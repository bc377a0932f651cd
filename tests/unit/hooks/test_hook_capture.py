"""Capture on demand, the hook's side: a request file next to the output makes the next N training steps
save the full tensors of its collections, on top of the save config, then the hook returns to normal."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from tornasole import Hook, SaveConfig, modes
from tornasole.format.capture_request import CaptureRequest, capture_request_file_name
from tornasole.hooks.capture_window import CaptureRequestPoller, CaptureWindow
from tornasole.storage.schemes import get_storage
from tornasole.trials import create_trial


def put_request(out_dir: Path, request: CaptureRequest | bytes, rule: str = "R") -> Path:
    path = out_dir / capture_request_file_name(rule)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(request if isinstance(request, bytes) else request.encode())
    return path


def request(steps: int, collections=("weights",), rid: str = "job:1:capture/R") -> CaptureRequest:
    return CaptureRequest(rid, steps, tuple(collections), rule="R", job="job", step=3)


def numpy_hook(out_dir: Path, **kw) -> Hook:
    """A hook that saves weights every 100 steps and polls for requests only when told (check_now)."""
    hook = Hook(
        str(out_dir),
        save_config=SaveConfig(save_interval=100),
        include_collections=["weights"],
        stop_check_interval=None,
        capture_check_interval=None,
        **kw,
    )
    hook._capture_poller = CaptureRequestPoller(get_storage(str(out_dir)), str(out_dir))  # not started
    hook.set_mode(modes.TRAIN)
    return hook


def run_steps(hook: Hook, first: int, last: int) -> None:
    for step in range(first, last):
        hook.save_tensor("fc.weight", np.full(3, step, dtype=np.float32), "weights")
        hook.save_tensor("fc.bias", np.full(2, step, dtype=np.float32), "biases")
        hook.next_step()


def test_a_request_saves_the_next_n_training_steps_then_the_save_config_rules_again(tmp_path: Path):
    hook = numpy_hook(tmp_path)
    run_steps(hook, 0, 4)
    put_request(tmp_path, request(3))
    assert hook._capture_poller.check_now() == 1
    run_steps(hook, 4, 12)
    hook.close()
    trial = create_trial(str(tmp_path))
    # step 0 by the save config; step 4 was open when the request came: 5, 6, 7 are captured (a request
    # applies from the next step boundary); then nothing until step 100
    assert trial.tensor("fc.weight").steps() == [0, 5, 6, 7]
    np.testing.assert_array_equal(trial.tensor("fc.weight").value(6), np.full(3, 6, dtype=np.float32))
    # biases were not asked for (the save config saves them at step 0 only: save_tensor includes them)
    assert trial.tensor("fc.bias").steps() == [0]
    assert hook._capture_window.captured_steps == [5, 6, 7]


def test_the_same_request_read_again_is_served_once_and_a_new_one_extends_without_stacking(tmp_path: Path):
    window = CaptureWindow()
    assert window.add(request(5))
    assert not window.add(request(5))  # the same id (an outbox retry, the file read again): ignored
    window.remaining = 2  # three of its five steps have run
    assert window.add(request(4, ("gradients",), rid="job:1:capture/Other"))
    assert window.remaining == 4  # extended to the new request's own length, never 2 + 4
    assert window.collections == ("gradients", "weights")
    for rid in range(50):  # a rule firing again and again never grows the window past one request's steps
        window.add(request(100, rid=f"job:{rid}:capture/R"))
    assert window.remaining == 100


def test_evaluation_steps_are_neither_captured_nor_counted(tmp_path: Path):
    hook = numpy_hook(tmp_path)
    run_steps(hook, 0, 2)
    put_request(tmp_path, request(2))
    hook._capture_poller.check_now()
    hook.set_mode(modes.EVAL)
    run_steps(hook, 2, 5)
    hook.set_mode(modes.TRAIN)
    run_steps(hook, 5, 10)
    hook.close()
    trial = create_trial(str(tmp_path))
    # 0 and 2 by the save config (TRAIN and EVAL mode step 0); the EVAL steps 3, 4 are not captured
    # and the two captured steps are the first TRAIN steps after them
    assert trial.tensor("fc.weight").steps() == [0, 2, 5, 6]
    assert [trial.mode(s) for s in (5, 6)] == [modes.TRAIN, modes.TRAIN]
    assert hook._capture_window.captured_steps == [5, 6]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"{not json", "not a JSON capture request"),
        (request(10_000).encode(), "steps '10000' must be a whole number from 1 to 100"),
        (
            b'{"RequestId": "x", "Steps": 3, "Collections": ["secrets"]}',
            "unknown collection 'secrets'",
        ),
        (b"x" * 10_000, "bytes; a capture request is at most 4096"),
        (b'{"RequestId": "x", "Steps": 0, "Collections": ["weights"]}', "from 1 to 100"),
        (b"[1, 2]", "is a JSON object"),
    ],
)
def test_a_hostile_request_is_logged_once_and_training_goes_on(tmp_path: Path, caplog, body: bytes, why: str):
    hook = numpy_hook(tmp_path)
    path = put_request(tmp_path, body)
    with caplog.at_level(logging.WARNING, logger="tornasole.hooks.capture_window"):
        assert hook._capture_poller.check_now() == 0
        hook._capture_poller.check_now()  # the same file again: no second message
        run_steps(hook, 0, 5)
    messages = [r.getMessage() for r in caplog.records if "capture request" in r.getMessage()]
    assert len(messages) == 1, messages
    assert why in messages[0]
    assert str(path) in messages[0]
    hook.close()
    assert create_trial(str(tmp_path)).tensor("fc.weight").steps() == [0]
    assert not hook._capture_window.active


def test_the_poller_runs_off_the_training_thread_and_close_stops_it(tmp_path: Path):
    poller = CaptureRequestPoller(get_storage(str(tmp_path)), str(tmp_path), interval=0.02)
    poller.start()
    put_request(tmp_path, request(3))
    for _ in range(200):
        if poller.has_pending:
            break
        poller._closed.wait(0.01)
    assert [r.steps for r in poller.take()] == [3]
    assert poller.take() == []
    assert poller._thread is not None
    assert poller._thread.name == "tornasole-capture-requests"
    poller.close()
    assert not poller._thread.is_alive()


def test_the_background_poller_reaches_the_hook_by_itself(tmp_path: Path):
    hook = Hook(
        str(tmp_path),
        save_config=SaveConfig(save_interval=1000),
        include_collections=["weights"],
        stop_check_interval=None,
        capture_check_interval=0.02,
    )
    hook.set_mode(modes.TRAIN)
    run_steps(hook, 0, 2)
    put_request(tmp_path, request(2))
    step = 2
    while not hook._capture_window.served and step < 5000:
        run_steps(hook, step, step + 1)
        hook._capture_poller._closed.wait(0.005)
        step += 1
    run_steps(hook, step, step + 5)
    hook.close()
    assert len(hook._capture_window.captured_steps) == 2
    assert create_trial(str(tmp_path)).tensor("fc.weight").steps() == [
        0,
        *hook._capture_window.captured_steps,
    ]


def test_capture_check_interval_none_disables_the_poller(tmp_path: Path):
    hook = Hook(str(tmp_path), stop_check_interval=None, capture_check_interval=None)
    assert hook._capture_poller is None
    hook.close()
