"""Start and stop the local pipeline: moto server + resources + dispatcher.

The process running the local mode points its own boto3 clients at the moto
server through the standard ``AWS_ENDPOINT_URL`` (boto3 reads it itself), and
prints the same variables for a training script in another shell.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import urllib.request
import warnings
from dataclasses import dataclass
from typing import Any

from tornasole import config
from tornasole.alerts.destinations import format_destinations
from tornasole.aws.clients import clear_client_cache
from tornasole.exceptions import TornasoleError
from tornasole.extras import require
from tornasole.local.alert_sender import AlertSender, LocalDestination
from tornasole.local.dispatcher import Dispatcher
from tornasole.local.moto_patches import (
    adjust_moto,
    in_process_transport,
    read_stream,
    release_stream,
    restore_moto,
)
from tornasole.local.resources import LocalResources, create_resources
from tornasole.local.state_store import check_bucket, has_state, restore_objects, restore_table, save_state
from tornasole.stack_spec import DEFAULT_SPEC, StackSpec

__all__ = ["LocalMode", "LocalSettings", "PortInUseError", "ensure_port_free"]

log = logging.getLogger(__name__)

# Fake credentials: the local endpoint accepts anything and nothing can sign with real keys.
_FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


class PortInUseError(TornasoleError, OSError):
    """The port asked for is taken; the local mode never starts half-way."""


def ensure_port_free(host: str, port: int) -> None:
    """Raise :class:`PortInUseError` naming ``host:port`` if something already listens there."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        # The server sets SO_REUSEADDR too: a port left in TIME_WAIT is free, one with a listener is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise PortInUseError(
                f"port {port} on {host} is already in use ({exc.strerror}); stop what listens there "
                "or pass --port with another port (0 picks a free one)"
            ) from exc


@dataclass(frozen=True)
class LocalSettings:
    host: str = "127.0.0.1"
    port: int = 5000  # 0 picks a free port
    bucket: str = "tornasole-local"
    region: str = "us-east-1"
    schedule_seconds: float = 60.0
    quiet_handlers: bool = True  # Powertools JSON logs / EMF metrics off unless asked for
    evaluation_workers: int = 2  # on_object_created's concurrency
    state_dir: str | None = None  # keep the trial bucket and the state table here across restarts
    # webhook/slack/teams destinations (``tornasole local up --webhook NAME=URL``): the only places
    # alerts are POSTed to; jobs name them, never a URL
    alert_destinations: tuple[LocalDestination, ...] = ()


class LocalMode:
    """The whole pipeline in this process; use as a context manager or start()/stop().

    Examples
    --------
    >>> with LocalMode(LocalSettings(port=0)) as local:  # doctest: +SKIP
    ...     print(local.endpoint, local.trial_root)
    """

    def __init__(self, settings: LocalSettings | None = None, spec: StackSpec = DEFAULT_SPEC) -> None:
        self.settings = settings or LocalSettings()
        self.spec = spec
        self.endpoint = ""
        self.resources: LocalResources | None = None
        self.dispatcher: Dispatcher | None = None
        self._server: Any = None
        self._saved_env: dict[str, str | None] = {}
        self.speed_patches: frozenset[str] = frozenset()  # moto's speed patches applied (``moto_patches``)
        self.alert_sender = AlertSender(self.settings.alert_destinations)

    @property
    def trial_root(self) -> str:
        return f"s3://{self.settings.bucket}/"

    def environment(self) -> dict[str, str]:
        """Variables a training script or a CLI in another shell needs to use this endpoint."""
        env = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": self.settings.region,
            **_FAKE_CREDENTIALS,
            # botocore >= 1.38 sends DynamoDB calls to account-specific endpoints moto does not answer.
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
            config.STATE_TABLE: self.spec.table.name,
            config.EVENT_BUS: self.spec.bus.name,
            config.EVENT_SOURCE: self.spec.bus.source,
            config.TRIAL_BUCKET: self.settings.bucket,
            # registration accepts exactly these (none: every webhook/slack/teams action is refused)
            config.ALERT_DESTINATIONS: format_destinations(
                d.destination for d in self.settings.alert_destinations
            ),
        }
        if self.resources is not None:
            env[config.ALERT_TOPIC_ARN] = self.resources.topic_arn
        return env

    def start(self) -> LocalMode:
        require("local", "the local mode (tornasole local up / demo)")
        from moto.server import ThreadedMotoServer

        s = self.settings
        ensure_port_free(s.host, s.port)  # Werkzeug would log the bind error in its thread and hang
        if s.state_dir:
            check_bucket(s.state_dir, s.bucket)
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
        # Metrics are disabled locally; Powertools still warns once per invocation that none were published.
        warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)
        self.speed_patches = adjust_moto()  # refuses a moto its correctness patches were not checked on
        self._server = ThreadedMotoServer(ip_address=s.host, port=s.port, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        if "in_process_transport" in self.speed_patches:
            in_process_transport.route_to(self.endpoint)  # this process's own requests skip the socket
        self._set_env(self.environment())
        if s.quiet_handlers:
            self._set_env(
                {
                    "POWERTOOLS_METRICS_DISABLED": "true",
                    "POWERTOOLS_LOG_LEVEL": "WARNING",
                    "POWERTOOLS_TRACE_DISABLED": "true",
                }
            )
        clear_client_cache()
        restored = bool(s.state_dir) and has_state(s.state_dir)
        if restored:
            restore_objects(s.state_dir)  # before the notifications exist: nothing is evaluated twice
        self.resources = create_resources(s.bucket, self.spec)
        if restored:
            n = restore_table(s.state_dir, self.resources.table)
            log.info("restored %d state items from %s", n, s.state_dir)
        self._set_env({config.ALERT_TOPIC_ARN: self.resources.topic_arn})
        fast = "dynamodb_stream_reader" in self.speed_patches
        self.dispatcher = Dispatcher(
            self.resources,
            self.spec,
            schedule_seconds=s.schedule_seconds,
            evaluation_workers=s.evaluation_workers,
            # moto's stream read in this process and trimmed (speed patches), else GetRecords.
            stream_consumed=functools.partial(release_stream, self.resources.table) if fast else None,
            stream_reader=functools.partial(read_stream, self.resources.table) if fast else None,
            alert_sender=self.alert_sender.deliver,
        )
        self.dispatcher.start()
        log.info("local mode up at %s", self.endpoint)
        return self

    def stop(self) -> None:
        if self.dispatcher is not None:
            if self.settings.state_dir:
                # Finish what is queued (notifications, stream records) so the saved state is complete.
                self.dispatcher.drain(timeout=30)
            self.dispatcher.stop()
        try:
            if self.settings.state_dir and self.resources is not None and self._server is not None:
                save_state(self.settings.state_dir, self.settings.bucket, self.resources.table)
        finally:
            self._stop_server()
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self._saved_env.clear()
        clear_client_cache()

    def _stop_server(self) -> None:
        if self._server is None:
            return
        # moto's backends are process-wide: forget this session's resources so a later
        # local mode in the same process (tests, notebooks) starts as empty as a new one.
        in_process_transport.unroute(self.endpoint)
        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST"))
        self._server.stop()
        self._server = None
        restore_moto()

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every queued notification, stream record and event has been handled."""
        assert self.dispatcher is not None, "LocalMode.start() first"
        return self.dispatcher.drain(timeout)

    def _set_env(self, values: dict[str, str]) -> None:
        for k, v in values.items():
            self._saved_env.setdefault(k, os.environ.get(k))
            os.environ[k] = v

    def __enter__(self) -> LocalMode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
