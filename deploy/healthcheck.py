#!/opt/omnicall/bin/python
"""The image's HEALTHCHECK: exit 0 when this container's server answers ``GET /health`` with
200 (``serve`` and ``serve-engine`` alike; with ``--workers`` the group's answer).

Reads the same variables the server does: ``OMNICALL_PORT`` (8080), ``OMNICALL_HOST`` (a
specific address is asked there; 0.0.0.0, ``::`` or unset: 127.0.0.1) and ``OMNICALL_CERT``
(set: https, the certificate is not checked - it names the public host, not the address
asked). ``OMNICALL_HEALTH_HOST`` overrides the address. Standard library only: the image
carries no curl.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping

TIMEOUT_S = 4.0


def health_host(environ: Mapping[str, str]) -> str:
    """The address to ask, as a URL's host: OMNICALL_HEALTH_HOST, else the address the server
    listens on (OMNICALL_HOST), loopback when that is every address or unset."""
    host = environ.get("OMNICALL_HEALTH_HOST", "").strip()
    if not host:
        host = environ.get("OMNICALL_HOST", "").strip().strip("[]")
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def main() -> int:
    port = os.environ.get("OMNICALL_PORT", "8080")
    host = health_host(os.environ)
    scheme = "https" if os.environ.get("OMNICALL_CERT") else "http"
    context = ssl._create_unverified_context() if scheme == "https" else None
    url = f"{scheme}://{host}:{port}/health"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S, context=context) as resp:
            body = json.loads(resp.read() or b"{}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"{url}: {exc}", file=sys.stderr)
        return 1
    print(f"{url}: {body.get('status')} ({body.get('sessions')} calls)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
