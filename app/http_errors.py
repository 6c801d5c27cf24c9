"""How the server answers HTTP errors: JSON ``{"error": ...}``, never a traceback."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

logger = logging.getLogger(__name__)

#: the ``offers_rejected`` metric's reason for each status an offer is refused with
REJECT_REASONS = {400: "bad_request", 401: "unauthorized", 403: "origin", 408: "timeout",
                  413: "too_large", 429: "rate_limited", 503: "full"}


def json_error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


def reject_reason(status: int) -> str:
    return REJECT_REASONS.get(status, str(status))


@web.middleware
async def error_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """HTTP errors on API routes come back as JSON ``{"error": ...}``; a bug is logged once
    and answered 500 in JSON (it never kills the server or leaks the traceback)."""
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except web.HTTPException as exc:
        if request.path.startswith("/offer") or exc.status >= 500 or exc.status == 413:
            return json_error(exc.status, exc.reason or "error")
        raise
    except asyncio.CancelledError:
        raise
    except Exception:  # the last boundary: log the bug, answer, keep serving
        logger.exception("%s %s failed", request.method, request.path[:100])
        return json_error(500, "internal error (logged on the server)")
