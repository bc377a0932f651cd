"""Requests the local mode serves in its own process are not HMAC-signed; every other request is.

A speed patch (``tornasole.local.moto_patches``), of botocore's ``AUTH_TYPE_MAPS``.

botocore signs each request with SigV4: a canonical request (headers sorted,
the URL quoted, the body hashed), a string to sign and five HMACs, a tenth of
the local mode's CPU per evaluated step. moto verifies none of it: it reads
the region and the access key (hence the account) from the ``Authorization``
header and, for S3, the ``X-Amz-Content-SHA256`` header. For a request that
``in_process_transport`` hands to moto in this process, the signer below
prepares the request exactly as botocore does (the date, the token, S3's
payload hash) and writes an ``Authorization`` header of the same shape, with
the same credential scope, whose signature is zeros. Requests to any other
URL (real AWS, another endpoint, the local endpoint while it is not routed)
are signed by botocore's own code, unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["install", "uninstall"]

_lock = threading.Lock()
_installed: dict[str, type] = {}  # signature version -> botocore's class it replaced
_UNSIGNED = "0" * 64
# botocore's signers, by the signature version a client asks for: SigV4 and S3's SigV4.
VERSIONS = ("v4", "s3v4")


def install(served_in_process: Callable[[str], bool]) -> None:
    """Replace botocore's SigV4 signers by subclasses that skip the HMAC work for in-process URLs."""
    import botocore.auth

    with _lock:
        for version in VERSIONS:
            current = botocore.auth.AUTH_TYPE_MAPS.get(version)
            if current is None or getattr(current, "_tornasole_in_process", False):
                continue
            _installed[version] = current
            botocore.auth.AUTH_TYPE_MAPS[version] = _in_process_signer(current, served_in_process)


def uninstall() -> None:
    """Put botocore's signers back."""
    import botocore.auth

    with _lock:
        for version, original in list(_installed.items()):
            botocore.auth.AUTH_TYPE_MAPS[version] = original
            del _installed[version]


def _in_process_signer(base: type, served_in_process: Callable[[str], bool]) -> type:
    from botocore.auth import SIGV4_TIMESTAMP
    from botocore.exceptions import NoCredentialsError
    from botocore.utils import get_current_datetime

    def add_auth(self: Any, request: Any) -> None:
        if not served_in_process(request.url):
            base.add_auth(self, request)
            return
        if self.credentials is None:
            raise NoCredentialsError()
        request.context["timestamp"] = get_current_datetime().strftime(SIGV4_TIMESTAMP)
        self._modify_request_before_signing(request)  # date, token, S3's payload hash: as botocore
        request.headers["Authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.scope(request)}, "
            f"SignedHeaders=host;x-amz-date, Signature={_UNSIGNED}"
        )

    return type(
        f"InProcess{base.__name__}",
        (base,),
        {"add_auth": add_auth, "_tornasole_in_process": True, "__doc__": base.__doc__},
    )
