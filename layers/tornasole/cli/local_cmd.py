"""``tornasole local up``: the whole pipeline on this machine, against an embedded moto server."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from tornasole.cli.options import positive_float

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("local", help="run the serverless pipeline locally (moto)")
    lsub = p.add_subparsers(dest="local_command", metavar="SUBCOMMAND", required=True)
    up = lsub.add_parser("up", help="start the local endpoint; Ctrl-C stops it")
    up.add_argument(
        "--port", type=int, default=5000, help="port on 127.0.0.1 (default 5000; 0 = any free port)"
    )
    up.add_argument(
        "--bucket", default="tornasole-local", help="trial bucket to create (default tornasole-local)"
    )
    up.add_argument(
        "--schedule-seconds", type=positive_float, default=60.0, help="period of the scheduled check"
    )
    up.add_argument("--json", action="store_true", help="print events as JSON lines")
    up.add_argument(
        "--state-dir",
        metavar="DIR",
        help="keep the trial bucket and the state table (jobs, rule statuses) in DIR across restarts",
    )
    for kind, body in (
        ("webhook", "the JSON alert body (docs/EVENTS.md)"),
        ("slack", "a Slack message with blocks (e.g. a Slack incoming webhook's URL)"),
        ("teams", "a Teams Adaptive Card message (e.g. a Teams workflow's webhook URL)"),
    ):
        up.add_argument(
            f"--{kind}",
            action="append",
            default=[],
            metavar="NAME=URL",
            help=f"{kind}:NAME actions POST {body} to URL (repeatable); jobs name NAME, never a URL",
        )
    up.set_defaults(func=_up)
    sm = lsub.add_parser(
        "sagemaker-event",
        help="put SageMaker's 'Training Job State Change' event on the local endpoint's default bus",
    )
    sm.add_argument("name", help="the training job (its TrainingJobName)")
    sm.add_argument(
        "--status", required=True, choices=["InProgress", "Completed", "Failed", "Stopping", "Stopped"]
    )
    sm.add_argument("--failure-reason", help="SageMaker's FailureReason (with --status Failed)")
    sm.set_defaults(func=_sagemaker_event)


def _sagemaker_event(args: argparse.Namespace) -> int:
    from tornasole.local.sagemaker_events import deliver, training_job_state_change

    event_id = deliver(training_job_state_change(args.name, args.status, args.failure_reason))
    print(f"put SageMaker's {args.status} event for {args.name} (event {event_id})")
    return 0


def alert_routes(local: Any) -> list[str]:
    """Where this local mode's alerts go, as ``local up`` prints it."""
    lines = ["alerts go to:", "  email/sms actions -> printed here as [alert] lines (the local SNS topic)"]
    routes = local.alert_sender.describe()
    lines += [f"  {r}" for r in routes] or [
        "  webhook/slack/teams actions -> nowhere: none configured (--webhook NAME=URL, --slack, --teams)"
    ]
    return lines


def _up(args: argparse.Namespace) -> int:
    from tornasole.jobs.text import format_event
    from tornasole.local import LocalMode, LocalSettings
    from tornasole.local.alert_sender import parse_local_destination

    destinations = tuple(
        parse_local_destination(kind, text)
        for kind in ("webhook", "slack", "teams")
        for text in getattr(args, kind)
    )
    settings = LocalSettings(
        port=args.port,
        bucket=args.bucket,
        schedule_seconds=args.schedule_seconds,
        state_dir=args.state_dir,
        alert_destinations=destinations,
    )
    if not 0 <= args.port <= 65535:
        print(f"tornasole: error: --port {args.port} is not a port number (0-65535)", file=sys.stderr)
        return 2
    local = LocalMode(settings).start()
    stop = threading.Event()
    # Both set explicitly: a process started in the background by a non-interactive shell inherits
    # SIGINT *ignored*, and Ctrl-C / `kill -INT` must still stop it.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        assert local.dispatcher is not None
        local.dispatcher.event_subscribers.append(
            lambda e: print(json.dumps(e) if args.json else format_event(e), flush=True)
        )
        local.dispatcher.alert_subscribers.append(
            lambda m: print(f"[alert] {m.get('Message', m)}", flush=True)
        )
        print(f"Tornasole local mode listening on {local.endpoint}", flush=True)
        print(f"trial bucket: {local.trial_root}  (hook out_dir e.g. {local.trial_root}my-job)", flush=True)
        print("environment for training scripts and the CLI in another shell:", flush=True)
        for k, v in local.environment().items():
            print(f"  export {k}={v}", flush=True)
        for line in alert_routes(local):
            print(line, flush=True)
        if args.state_dir:
            print(f"state kept in {args.state_dir} (saved when local mode stops)", flush=True)
        print("Ctrl-C to stop.", flush=True)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        if args.state_dir:
            print(f"stopping: finishing queued work and saving the state to {args.state_dir} ...", flush=True)
        local.stop()
        print("local mode stopped", flush=True)
    return 0
