"""The sandbox's zygote: a child per request, forked from a copy taken before any request existed."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tornasole.evaluator.sandbox.zygote import Zygote

# What the parent comes to hold after the zygote started (a later request, in the sandbox).
HELD_LATER: list[bytes] = []


def remember(payload: bytes) -> dict:
    HELD_LATER.append(payload)
    return {"held": [p.decode() for p in HELD_LATER]}


def behave(payload: bytes) -> dict:
    how = payload.decode()
    if how == "exit":
        os._exit(3)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "loop":
        while True:
            pass
    if how == "raise":
        raise ValueError("boom")
    if how == "huge":
        return {"text": "x" * 100_000}
    return {"size": len(payload)}


@pytest.fixture
def zygote_of():
    started: list[Zygote] = []

    def start(target) -> Zygote:
        started.append(Zygote(target).start())
        return started[-1]

    yield start
    for z in started:
        z.stop()


def test_a_child_holds_its_own_request_and_nothing_the_parent_received_later(zygote_of) -> None:
    zygote = zygote_of(remember)
    HELD_LATER.append(b"job-a credentials, received by the handler after the zygote started")
    try:
        assert zygote.run(b"job-b", 10, 1 << 16) == {"held": ["job-b"]}
        assert zygote.run(b"job-c", 10, 1 << 16) == {"held": ["job-c"]}  # nothing of job-b either
    finally:
        HELD_LATER.clear()


def test_a_request_larger_than_a_pipe_buffer_arrives_whole(zygote_of) -> None:
    assert zygote_of(behave).run(b"y" * 1_000_000, 10, 1 << 16) == {"size": 1_000_000}


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("exit", "ended without a verdict (status 3)"),
        ("kill", "ended without a verdict (signal 9)"),
        ("raise", "raised ValueError: boom"),
        ("huge", "larger than 65536 bytes"),
    ],
)
def test_a_child_that_fails_is_an_error_reply_and_the_zygote_serves_on(zygote_of, how, why) -> None:
    zygote = zygote_of(behave)
    reply = zygote.run(how.encode(), 10, 1 << 16)
    assert reply["kind"] == "error"
    assert why in reply["reason"]
    assert zygote.run(b"ok", 10, 1 << 16) == {"size": 2}


def test_a_child_past_its_deadline_is_killed(zygote_of) -> None:
    zygote = zygote_of(behave)
    start = time.monotonic()
    reply = zygote.run(b"loop", 0.5, 1 << 16)
    assert reply["kind"] == "error"
    assert "stopped after 0.5s" in reply["reason"]
    assert time.monotonic() - start < 5
    assert zygote.run(b"ok", 10, 1 << 16) == {"size": 2}


def test_a_dead_zygote_is_forked_again(zygote_of) -> None:
    zygote = zygote_of(behave)
    first = zygote.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    os.waitpid(first, 0)
    assert zygote.run(b"abc", 10, 1 << 16) == {"size": 3}
    assert zygote.pid not in (None, first)


def test_a_confinement_the_kernel_refuses_is_logged(monkeypatch, caplog, tmp_path) -> None:
    """Where seccomp (or a limit) cannot be applied, the run says so in the function's log."""
    import tempfile

    from tornasole.evaluator.sandbox import confine, zygote

    refused = confine.Confinement(missing=["seccomp filter refused by the kernel: Invalid argument"])
    monkeypatch.setattr(confine, "confine", lambda limits, cpu_seconds=None: refused)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    with caplog.at_level("WARNING", logger="tornasole.evaluator.sandbox.zygote"):
        zygote._confine_child(confine.Limits(), str(tmp_path), 5.0)
    assert "rule sandbox: seccomp filter refused by the kernel: Invalid argument" in caplog.text
    (private,) = tmp_path.iterdir()
    assert os.environ["TMPDIR"] == str(private)
