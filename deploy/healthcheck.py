#!/opt/omnicall/bin/python
"""The image's HEALTHCHECK: exit 0 when this container's server answers ``GET /health`` with
200 (``serve`` and ``serve-engine`` alike; with ``--workers`` the group's answer).

Reads the same variables the server does: ``OMNICALL_PORT`` (8080) and ``OMNICALL_CERT``
(set: https, the certificate is not checked - it names the public host, not 127.0.0.1).
Standard library only: the image carries no curl.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.error
import urllib.request

TIMEOUT_S = 4.0


def main() -> int:
    port = os.environ.get("OMNICALL_PORT", "8080")
    host = os.environ.get("OMNICALL_HEALTH_HOST", "127.0.0.1")
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
