"""Requests from the local mode's own process to its endpoint go straight to the moto app, not over TCP.

A speed patch (``tornasole.local.moto_patches``), of botocore's ``BUILTIN_HANDLERS``.

The embedded server (Werkzeug) closes the connection after every response and
starts a thread per connection, which costs more than the request itself on a
busy laptop; the evaluator's handlers, running in the same process as the
server, make about a dozen requests per step. While a local mode runs, a
botocore ``before-send`` handler hands requests addressed to its endpoint to
the same WSGI application the server runs (moto's ``DomainDispatcherApplication``),
in this thread: the same parsing, the same backends, the same responses, minus
the socket (and minus the HMAC work of signing them: ``in_process_signing``).
Other processes (a training script, the CLI in another shell) use
the server as before; requests to any other URL are untouched.
"""

from __future__ import annotations

import logging
import threading
from typing import Any
from urllib.parse import urlsplit

from tornasole.local.moto_patches import in_process_signing as signing

__all__ = ["install", "route_to", "served_in_process", "uninstall", "unroute"]

log = logging.getLogger(__name__)
_lock = threading.Lock()
_routes: dict[str, Any] = {}  # endpoint "http://host:port" -> WSGI app


def install() -> None:
    """Add the handler to botocore's built-in handlers (sessions created from now on carry it).

    Checked by membership, not remembered: code that rebuilds botocore's handler list (a test
    double, a re-imported module) would otherwise leave later local modes without their route.
    """
    with _lock:
        from botocore.handlers import BUILTIN_HANDLERS

        if ("before-send", _before_send) not in BUILTIN_HANDLERS:
            BUILTIN_HANDLERS.append(("before-send", _before_send))
    signing.install(served_in_process)


def uninstall() -> None:
    """Take the handler out of botocore's built-in handlers and put botocore's signers back."""
    with _lock:
        from botocore.handlers import BUILTIN_HANDLERS

        while ("before-send", _before_send) in BUILTIN_HANDLERS:
            BUILTIN_HANDLERS.remove(("before-send", _before_send))
    signing.uninstall()


def served_in_process(url: str) -> bool:
    """Whether a request to ``url`` is answered by moto in this process (``_before_send`` takes it)."""
    if not _routes:
        return False
    parts = url.split("/", 3)  # "http:", "", "host:port", path
    return len(parts) >= 3 and f"{parts[0]}//{parts[2]}" in _routes


def route_to(endpoint: str) -> None:
    """Serve requests for ``endpoint`` in-process from now on."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    install()
    with _lock:
        _routes[endpoint.rstrip("/")] = DomainDispatcherApplication(create_backend_app)


def unroute(endpoint: str) -> None:
    with _lock:
        _routes.pop(endpoint.rstrip("/"), None)


# botocore's name for a service (in the event name) -> moto's backend, where they differ.
_MOTO_BACKENDS = {"dynamodb-streams": "dynamodbstreams", "eventbridge": "events"}
_KNOWN = {"s3", "sqs", "sns", "dynamodb", "dynamodbstreams", "events", "sts", "logs"}


def _app_for(dispatcher: Any, event_name: str) -> Any:
    """The service's own app; moto's per-request service detection lists directories on every call."""
    parts = event_name.split(".")
    service = _MOTO_BACKENDS.get(parts[1], parts[1]) if len(parts) > 1 else ""
    if service not in _KNOWN:
        return dispatcher  # anything else: let moto work it out
    app = dispatcher.app_instances.get(service)
    if app is None:
        with dispatcher.lock:
            app = dispatcher.app_instances.get(service) or dispatcher.create_app(service)
            dispatcher.app_instances[service] = app
    return app


# Services whose every request is a POST to "/" answered by one response class: served by calling it
# directly, as moto's in-process mock (``mock_aws``) does, without a WSGI environ and Flask's request
# context around it (a tenth of each request's time). S3 too, below, by its URL patterns.
_DIRECT = {
    "dynamodb": ("moto.dynamodb.urls", "{0}/"),
    "dynamodbstreams": ("moto.dynamodbstreams.urls", "{0}/$"),
    "sqs": ("moto.sqs.urls", "{0}/$"),
    "events": ("moto.events.urls", "{0}/"),
}
_direct_handlers: dict[str, Any] = {}


def _direct_handler(service: str) -> Any:
    handler = _direct_handlers.get(service)
    if handler is None:
        import importlib

        module, path = _DIRECT[service]
        handler = _direct_handlers[service] = importlib.import_module(module).url_paths[path]
    return handler


# S3 routes by path and method: its URL patterns, tried in moto's order against the request's (still
# percent-encoded) path, as ``mock_aws`` tries them against the URL. Path-style addressing: the local
# endpoint's host is an IP address, which moto's S3 never reads as a bucket subdomain.
_s3_routes: list[tuple[Any, Any]] = []


def _s3_handler(path: str) -> Any:
    if not _s3_routes:
        import re

        from moto.s3.urls import url_paths

        _s3_routes.extend((re.compile(pattern.format("")), handler) for pattern, handler in url_paths.items())
    for pattern, handler in _s3_routes:
        if pattern.match(path):
            return handler
    return None


def _service(event_name: str) -> str:
    parts = event_name.split(".")
    return _MOTO_BACKENDS.get(parts[1], parts[1]) if len(parts) > 1 else ""


def _direct(request: Any, service: str, handler: Any) -> Any:
    """What moto's ``mock_aws`` does with a botocore request: the service's response class, in this thread."""
    from botocore.awsrequest import AWSResponse
    from moto.core.botocore_stubber import MockRawResponse
    from moto.core.exceptions import HTTPException
    from moto.core.request import Request

    body = request.body
    if hasattr(body, "read"):  # a file being uploaded (or aws-chunked): its bytes, as moto reads it
        body = body.read()
    normalized = Request.from_primitives(request.method, request.url, request.headers, body)
    try:
        status, headers, body = handler(normalized, normalized.raw_url, normalized.headers)
    except HTTPException as exc:
        status, headers, body = exc.code, exc.get_headers(), exc.get_body()
    except Exception:  # a fault in moto: what the server answers for it (botocore retries a 500)
        log.exception("moto failed on a %s request", service)
        status, headers, body = 500, {}, b"Internal Server Error"
    return AWSResponse(request.url, status, headers, MockRawResponse(body))


def _before_send(request: Any, event_name: str = "", **_: Any) -> Any:
    if not _routes:
        return None
    parts = urlsplit(request.url)
    dispatcher = _routes.get(f"{parts.scheme}://{parts.netloc}")
    if dispatcher is None:
        return None
    service = _service(event_name)
    if service in _DIRECT and request.method == "POST" and (parts.path or "/") == "/":
        return _direct(request, service, _direct_handler(service))
    if service == "s3":
        handler = _s3_handler(parts.path or "/")
        if handler is not None:
            return _direct(request, service, handler)
    app = _app_for(dispatcher, event_name)
    from botocore.awsrequest import AWSResponse
    from moto.core.botocore_stubber import MockRawResponse
    from werkzeug.test import EnvironBuilder, run_wsgi_app

    body = request.body
    if hasattr(body, "read"):
        body = body.read()
    headers = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
    for name in ("Expect", "Content-Length", "Transfer-Encoding"):  # the builder sets the body's own
        headers.pop(name, None)
    environ = EnvironBuilder(
        path=parts.path or "/",
        query_string=parts.query,
        method=request.method,
        headers=headers,
        data=body or b"",
        base_url=f"{parts.scheme}://{parts.netloc}",
    ).get_environ()
    app_iter, status, response_headers = run_wsgi_app(app, environ)
    try:
        data = b"".join(app_iter)
    finally:
        close = getattr(app_iter, "close", None)
        if close is not None:
            close()
    return AWSResponse(
        request.url, int(status.split(" ", 1)[0]), dict(response_headers), MockRawResponse(data)
    )
