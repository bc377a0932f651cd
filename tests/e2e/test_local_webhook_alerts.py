"""The local mode delivers webhook alerts: a broken run sends one alert and one reminder, with the
documented body, to a local HTTP server the operator configured; a healthy run sends nothing; a job
cannot name a URL, and a destination that does not answer costs a logged failure, nothing else."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

import tornasole.evaluator.store.outbox as outbox
from alert_checks import assert_valid_alert
from tornasole.cli.local_cmd import alert_routes
from tornasole.cli.main import main
from tornasole.exceptions import InvalidJobConfiguration
from tornasole.format.writer import StepWriter, TrialWriter
from tornasole.jobs import describe, register_job
from tornasole.local import LocalMode, LocalSettings
from tornasole.local.alert_sender import AlertSender, LocalDestination, parse_local_destination
from tornasole.modes import ModeKeys

RULE = "VanishingGradient"


class Receiver:
    """A local HTTP server recording every POST (path, headers, JSON body)."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.cond:
                    receiver.posts.append(
                        {"path": self.path, "type": self.headers["Content-Type"], "body": json.loads(body)}
                    )
                    receiver.cond.notify_all()
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, n: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.posts) < n and time.monotonic() < deadline:
                self.cond.wait(deadline - time.monotonic())
            return list(self.posts)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def local(receiver: Receiver) -> Iterator[LocalMode]:
    destination = parse_local_destination("webhook", f"oncall={receiver.url}")
    with LocalMode(LocalSettings(port=0, alert_destinations=(destination,))) as mode:
        yield mode


def register(local: LocalMode, job: str, actions: list[dict[str, Any]]) -> str:
    trial = f"{local.trial_root}{job}"
    params = {"rule_to_invoke": RULE, "threshold": "0.001", "action_json": json.dumps(actions)}
    register_job(job, trial, [{"RuleConfigurationName": RULE, "RuleParameters": params}])
    TrialWriter(trial).write_collections(
        {"gradients": {"name": "gradients", "include_regex": ["gradients/.*"]}}, 1
    )
    return trial


def write_steps(trial: str, steps: range, grad: float) -> None:
    writer = TrialWriter(trial)
    for step in steps:
        sw = StepWriter(step, "worker_0", mode=ModeKeys.TRAIN, mode_step=step)
        sw.add_tensor("gradients/fc.weight", np.full((4, 4), grad, dtype=np.float32), wall_time=1.0)
        writer.write_step(sw)


WEBHOOK = [{"name": "webhook", "endpoint": "oncall", "reminder_minutes": 30}]


def test_a_broken_run_posts_one_alert_and_one_reminder_a_healthy_one_nothing(
    local: LocalMode, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    healthy, broken = register(local, "healthy", WEBHOOK), register(local, "broken", WEBHOOK)
    real_now = outbox._now_ms
    write_steps(healthy, range(0, 40, 5), grad=1.0)
    write_steps(broken, range(0, 20, 5), grad=1e-6)  # fires at 4 steps
    assert local.drain(timeout=60)
    (first,) = receiver.wait_for(1)
    monkeypatch.setattr(outbox, "_now_ms", lambda: real_now() + 31 * 60_000)  # past the interval
    write_steps(broken, range(20, 40, 5), grad=1e-6)  # fires at 4 more steps
    assert local.drain(timeout=60)
    for trial in (healthy, broken):
        TrialWriter(trial).write_end_marker()
    assert local.drain(timeout=60)
    posts = receiver.wait_for(3, timeout=2)  # a third would come now, if it ever came
    assert len(posts) == 2, [p["body"]["Summary"] for p in posts]
    assert describe("healthy")["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "NoIssuesFound"

    reminder = posts[1]
    for post in (first, reminder):
        assert post["path"] == "/alerts"
        assert post["type"] == "application/json"
        assert_valid_alert(post["body"])
        assert post["body"]["TrainingJobName"] == "broken"
    # The first alert is the transition to IssuesFound: whichever of the firing steps 0-15 the evaluation
    # workers finished first (they run in parallel), never one of the reminder's steps.
    assert first["body"]["Reminder"] is False
    assert first["body"]["Step"] in range(0, 20, 5)
    assert reminder["body"]["Reminder"] is True
    assert reminder["body"]["Step"] >= 20
    assert first["body"]["Tensor"] == "gradients/fc.weight"
    assert first["body"]["Value"] == pytest.approx(1e-6)
    assert first["body"]["Threshold"] == pytest.approx(0.001)
    assert first["body"]["SuggestedFix"]
    assert first["body"]["NextCommands"][0] == "tornasole jobs status broken"
    assert local.alert_sender.sent == 2
    assert local.alert_sender.failed == 0
    assert local.dispatcher is not None
    assert local.dispatcher.errors == []


def test_a_job_cannot_name_a_url_or_an_unconfigured_destination(local: LocalMode) -> None:
    with pytest.raises(InvalidJobConfiguration, match="never a URL"):
        register(local, "exfil", [{"name": "webhook", "endpoint": "http://evil.example/x"}])
    with pytest.raises(InvalidJobConfiguration, match=r"webhook:elsewhere\) names no configured"):
        register(local, "other", [{"name": "webhook", "endpoint": "elsewhere"}])


def test_an_unreachable_destination_is_logged_and_bounded(caplog: pytest.LogCaptureFixture) -> None:
    # nothing listens on port 9 of this machine (discard); a POST there fails at once, within the timeout
    sender = AlertSender([LocalDestination("webhook:down", "http://127.0.0.1:9/x")], timeout_s=2)
    event = {"detail": {"Destination": "webhook:down", "Alert": {"Summary": "s"}}}
    t0 = time.monotonic()
    assert sender.deliver(event) is False
    assert time.monotonic() - t0 < 3
    assert sender.deliver({"detail": {"Destination": "webhook:unknown"}}) is False
    assert (sender.sent, sender.failed) == (0, 2)
    assert "alert to webhook:down (http://127.0.0.1:9/x) failed" in caplog.text
    assert "no such destination is configured" in caplog.text


def test_a_slow_destination_is_cut_off_at_the_timeout() -> None:
    release = threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            release.wait(10)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        sender = AlertSender([LocalDestination("webhook:slow", url)], timeout_s=0.5)
        t0 = time.monotonic()
        assert sender.deliver({"detail": {"Destination": "webhook:slow", "Alert": {}}}) is False
        assert time.monotonic() - t0 < 2
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_local_up_options_and_where_alerts_go(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="--webhook 'oncall': expected NAME=URL"):
        parse_local_destination("webhook", "oncall")
    with pytest.raises(ValueError, match="must be http:// or https://"):
        parse_local_destination("webhook", "oncall=file:///etc/passwd")
    slack = parse_local_destination("slack", "ml-team=https://hooks.slack.com/services/T/B/X")
    assert (slack.destination, slack.format, slack.field) == ("slack:ml-team", "slack", "Slack")
    assert main(["local", "up", "--webhook", "oncall", "--port", "0"]) == 2
    assert "expected NAME=URL" in capsys.readouterr().err

    class Fake:
        alert_sender = AlertSender([LocalDestination("webhook:oncall", "http://127.0.0.1:8/a")])

    assert alert_routes(Fake()) == [
        "alerts go to:",
        "  email/sms actions -> printed here as [alert] lines (the local SNS topic)",
        "  webhook:oncall -> http://127.0.0.1:8/a (json body)",
    ]
    Fake.alert_sender = AlertSender([])
    assert "none configured" in alert_routes(Fake())[-1]


def test_local_up_prints_where_alerts_go_and_delivers_them(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import re
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from tornasole.aws.clients import clear_client_cache

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_ENDPOINT_URL", "TORNASOLE_"))}
    tornasole = str(Path(sys.executable).parent / "tornasole")
    proc = subprocess.Popen(
        [tornasole, "local", "up", "--port", "0", "--webhook", f"oncall={receiver.url}"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines, exports = [], {}
    deadline = time.monotonic() + 60
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if m := re.match(r"\s+export (\w+)=(.*)$", line):
            exports[m.group(1)] = m.group(2)
        if line.startswith("Ctrl-C to stop") or time.monotonic() > deadline:
            break
    try:
        assert f"  webhook:oncall -> {receiver.url} (json body)" in lines
        assert "alerts go to:" in lines
        assert exports["TORNASOLE_ALERT_DESTINATIONS"] == "webhook:oncall"
        with monkeypatch.context() as m:
            for k, v in exports.items():
                m.setenv(k, v)
            clear_client_cache()
            trial = "s3://tornasole-local/cli-broken"
            assert main(["jobs", "register", "--name", "cli-broken", "--s3-output", trial,
                         "--rule", f"{RULE}:threshold=0.001", "--action", "webhook:oncall"]) == 0  # fmt: skip
            TrialWriter(trial).write_collections(
                {"gradients": {"name": "gradients", "include_regex": ["gradients/.*"]}}, 1
            )
            write_steps(trial, range(0, 10, 5), grad=1e-6)
            (post,) = receiver.wait_for(1, timeout=90)
            assert_valid_alert(post["body"])
            assert post["body"]["TrainingJobName"] == "cli-broken"
            clear_client_cache()
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        clear_client_cache()
    assert proc.returncode == 0, rest
    assert (
        "[Tornasole Alert] webhook:oncall: VanishingGradient found issues in training job cli-broken" in rest
    )
