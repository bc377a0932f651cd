"""The local mode's alert destinations: POST each ``Tornasole Alert`` event's body to the URL the
operator gave ``tornasole local up`` (``--webhook NAME=URL``, ``--slack NAME=URL``, ``--teams NAME=URL``).

What the deployed stack's API destinations do, in-process: only destinations configured here receive
anything (a job names a destination, never a URL, so the job's configuration cannot send its data
anywhere else); each POST is bounded by a timeout, never follows a redirect, and a failure is logged
and counted, never raised into the evaluator (the sender runs on its own queue's thread).
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tornasole.alerts.destinations import FORMATS, parse_destination

__all__ = ["AlertSender", "LocalDestination", "POST_TIMEOUT_S", "parse_local_destination"]

log = logging.getLogger(__name__)

#: Longest a POST may take (connect + answer): a slow receiver delays only later alerts.
POST_TIMEOUT_S = 5.0
#: The body each kind of destination receives (a field of the alert event's detail).
_FORMAT_OF_KIND = {"webhook": "json", "slack": "slack", "teams": "teams"}
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True)
class LocalDestination:
    """``destination`` (``webhook:oncall``) POSTs ``format`` (``FORMATS``' key) to ``url``."""

    destination: str
    url: str
    format: str = "json"

    @property
    def field(self) -> str:
        return FORMATS[self.format]


def parse_local_destination(kind: str, text: str) -> LocalDestination:
    """``"oncall=http://127.0.0.1:9000/hook"`` for ``kind`` webhook -> a destination; ValueError naming
    the option otherwise (the URL must be http(s) with a host; the name as in ``action_json``)."""
    name, sep, url = text.partition("=")
    option = f"--{kind} {text!r}"
    if not sep:
        raise ValueError(f"{option}: expected NAME=URL, e.g. oncall=http://127.0.0.1:9000/alerts")
    try:
        kind, name = parse_destination(f"{kind}:{name}")
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}") from None
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{option}: the URL must be http:// or https:// with a host, got {url!r}")
    return LocalDestination(f"{kind}:{name}", url.strip(), _FORMAT_OF_KIND[kind])


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 3xx is an answer, not a new destination


class AlertSender:
    """Delivers ``Tornasole Alert`` events to the configured destinations; ``sent``/``failed`` count."""

    def __init__(self, destinations: Iterable[LocalDestination], timeout_s: float = POST_TIMEOUT_S) -> None:
        self.destinations = {d.destination: d for d in destinations}
        self.timeout_s = timeout_s
        self.sent = 0
        self.failed = 0
        self._lock = threading.Lock()

    def describe(self) -> list[str]:
        """One line per destination: where its alerts go (what ``local up`` prints)."""
        return [f"{d.destination} -> {d.url} ({d.format} body)" for d in self.destinations.values()]

    def deliver(self, event: dict[str, Any]) -> bool:
        """POST the event's body to its destination; False (logged) when unknown or the POST failed."""
        detail = event.get("detail") or {}
        name = str(detail.get("Destination", ""))
        dest = self.destinations.get(name)
        if dest is None:
            log.warning("alert for %s dropped: no such destination is configured in this local mode", name)
            self._count(ok=False)
            return False
        data = json.dumps(detail.get(dest.field, {}), sort_keys=True).encode()
        request = urllib.request.Request(
            dest.url, data=data, method="POST", headers={"Content-Type": "application/json"}
        )
        handlers: list[Any] = [_NoRedirect()]
        if urlsplit(dest.url).hostname in _LOOPBACK:
            handlers.append(urllib.request.ProxyHandler({}))  # a proxy cannot reach this machine's ports
        try:
            with urllib.request.build_opener(*handlers).open(request, timeout=self.timeout_s) as resp:
                status = resp.status
        except (urllib.error.URLError, OSError, ValueError) as exc:
            log.error("alert to %s (%s) failed: %s", name, dest.url, exc)
            self._count(ok=False)
            return False
        if not 200 <= status < 300:
            log.error("alert to %s (%s) answered HTTP %s", name, dest.url, status)
            self._count(ok=False)
            return False
        self._count(ok=True)
        return True

    def _count(self, ok: bool) -> None:
        with self._lock:
            if ok:
                self.sent += 1
            else:
                self.failed += 1
