"""Who may start a call: origin check, per-IP offer rate, and the ICE servers the page uses."""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import unquote, urlsplit

from aiohttp import web


def origin_allowed(request: web.Request, allowed: str) -> bool:
    """Browsers send ``Origin`` on cross-site POSTs. No header (curl, aiortc clients): allowed.
    '' allows the server's own origin only, '*' any, else a comma-separated list."""
    origin = request.headers.get("Origin")
    if origin is None or allowed.strip() == "*":
        return True
    if allowed.strip():
        return origin.rstrip("/") in {o.strip().rstrip("/") for o in allowed.split(",")}
    host = request.headers.get("Host", "")
    return urlsplit(origin).netloc == host


def bearer_problem(request: web.Request, token: str) -> str | None:
    """None when ``Authorization: Bearer <token>`` matches (compared in constant time); else
    a sentence for a missing or a wrong one."""
    auth = request.headers.get("Authorization", "")
    if not auth:
        return "this server needs an access token (Authorization: Bearer ...)"
    if not hmac.compare_digest(auth.encode(), f"Bearer {token}".encode()):
        return "wrong access token"
    return None


def client_key(request: web.Request) -> str:
    return request.remote or "unknown"


def parse_ice_servers(spec: str) -> list[dict[str, Any]]:
    """``stun:host:port,turn:user:pass@host:port?transport=tcp`` -> RTCIceServer dicts."""
    servers: list[dict[str, Any]] = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        scheme, _, rest = item.partition(":")
        if scheme not in ("stun", "stuns", "turn", "turns") or not rest:
            raise ValueError(f"not a STUN/TURN URL: {item!r}")
        if "@" in rest and scheme.startswith("turn"):
            credentials, _, address = rest.rpartition("@")
            user, _, password = credentials.partition(":")
            servers.append({"urls": f"{scheme}:{address}", "username": unquote(user),
                            "credential": unquote(password)})
        else:
            servers.append({"urls": item})
    return servers
