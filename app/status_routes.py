"""What a server says about itself: ``/health``, ``/metrics``, the page's ``/config``, and
the present-tense values the metrics gauges read (:func:`live_sample`).

With ``--workers`` the health and metrics are the whole group's (each sibling is asked for its
own with ``scope=worker``; see :mod:`omnicall.app.worker_group`).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from omnicall.app.access import parse_ice_servers
from omnicall.app.app_state import (
    CALLS_KEY,
    CONFIG_KEY,
    ENGINE_KEY,
    LADDER_KEY,
    METRICS_KEY,
    PARKED_KEY,
    WORKER_KEY,
)
from omnicall.app.worker_group import SCOPE_WORKER, fetch_siblings, merge_health, merge_metrics


async def handle_client_config(request: web.Request) -> web.Response:
    """What the page needs before it offers: ICE servers, whether a token is required, and
    whether it may send the camera (``video``)."""
    config = request.app[CONFIG_KEY]
    return web.json_response({"iceServers": parse_ice_servers(config.ice_servers),
                              "tokenRequired": bool(config.token),
                              "kioskIdleS": config.kiosk_idle_s,
                              "resumeWindowS": config.resume_window_s,
                              "reconnectGiveUpS": config.reconnect_give_up_s,
                              "video": config.video,
                              "maxVideoFps": config.video_fps})


def local_health(app: web.Application) -> dict[str, Any]:
    registry = app[CALLS_KEY]
    return {"status": "ok", "engine": app[ENGINE_KEY].name, "sessions": len(registry),
            "max_sessions": registry.max_sessions, "parked": len(app[PARKED_KEY]),
            "pid": os.getpid()}


async def handle_health(request: web.Request) -> web.Response:
    """This process's calls; with ``--workers`` the whole group's."""
    own = local_health(request.app)
    worker = request.app.get(WORKER_KEY)
    if worker is None or request.query.get("scope") == SCOPE_WORKER:
        return web.json_response(own)
    siblings = await fetch_siblings(worker, f"/health?scope={SCOPE_WORKER}")
    return web.json_response(merge_health(worker, own, siblings))


async def handle_metrics(request: web.Request) -> web.Response:
    own = request.app[METRICS_KEY].exposition()
    worker = request.app.get(WORKER_KEY)
    if worker is not None and request.query.get("scope") != SCOPE_WORKER:
        expositions = await fetch_siblings(worker, f"/metrics?scope={SCOPE_WORKER}")
        own = merge_metrics(worker, {worker.index: own, **expositions})
    return web.Response(body=own, headers={"Content-Type": CONTENT_TYPE_LATEST})


def buffer_totals(calls: list[Any]) -> dict[str, int]:
    """Frames queued now per buffer, summed over calls (each call reports its own)."""
    totals: dict[str, int] = {}
    for call in calls:
        for name, frames in call.buffer_frames().items():
            totals[name] = totals.get(name, 0) + frames
    return totals


def live_sample(app: web.Application) -> dict[str, Any]:
    """Present-tense values for the metrics gauges."""
    registry = app[CALLS_KEY]
    sessions = list(registry.sessions.values())
    return {
        "sessions": len(sessions),
        "parked": len(app[PARKED_KEY]),
        "max_sessions": registry.max_sessions,
        "buffers": buffer_totals(sessions),
        "workers": app[ENGINE_KEY].queue_depths(),
        "tasks": len(asyncio.all_tasks()),
        "degrade_level": int(app[LADDER_KEY].level),
    }
