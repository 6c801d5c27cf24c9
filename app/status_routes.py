"""What a server says about itself: ``/health``, ``/metrics``, the page's ``/config``, and
the present-tense values the metrics gauges read (:func:`live_sample`).

With ``--workers`` the health and metrics are the whole group's (each sibling is asked for its
own with ``scope=worker``; see :mod:`omnicall.app.process.worker_group`).

Who may read ``/metrics`` (build info, versions, call figures): with ``--metrics-listen`` it is
served on a listener of its own (:func:`create_metrics_app`, loopback unless told otherwise)
and the main port has none; ``--metrics-token`` requires its own bearer token wherever it is
served; with ``--token`` set and neither, the main port refuses it (a public deployment must
not hand it to anyone). ``/``, ``/config`` and ``/health`` are public by design.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from omnicall.app.access import bearer_problem, parse_ice_servers
from omnicall.app.app_state import (
    CALLS_KEY,
    CONFIG_KEY,
    ENGINE_KEY,
    LADDER_KEY,
    METRICS_KEY,
    PARKED_KEY,
    WORKER_KEY,
)
from omnicall.app.http_errors import error_middleware, json_error
from omnicall.app.process.worker_group import (
    SCOPE_WORKER,
    fetch_siblings,
    merge_health,
    merge_metrics,
)
from omnicall.app.protocol import PROTOCOL_VERSION

#: set on the application of the metrics' own listener (``--metrics-listen``)
METRICS_LISTENER_KEY = web.AppKey("metrics_listener", bool)


async def handle_client_config(request: web.Request) -> web.Response:
    """What the page needs before it offers: ICE servers, whether a token is required,
    whether it may send the camera (``video``), and the server's echo canceller and noise
    suppressor switches (``echoCancel``, ``noiseSuppression``: auto, on, off), from which the
    page sets its own microphone processing (docs/room.md)."""
    config = request.app[CONFIG_KEY]
    return web.json_response({"protocol": PROTOCOL_VERSION,
                              "iceServers": parse_ice_servers(config.ice_servers),
                              "tokenRequired": bool(config.token),
                              "kioskIdleS": config.kiosk_idle_s,
                              "resumeWindowS": config.resume_window_s,
                              "reconnectGiveUpS": config.reconnect_give_up_s,
                              "video": config.video,
                              "maxVideoFps": config.video_fps,
                              "echoCancel": config.echo_cancel,
                              "noiseSuppression": config.noise_suppression})


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


def from_sibling(request: web.Request) -> bool:
    """A sibling worker asking for this worker's own view, over its private Unix socket."""
    return request.query.get("scope") == SCOPE_WORKER and request.transport is not None \
        and isinstance(request.transport.get_extra_info("sockname"), str)


def metrics_refusal(request: web.Request) -> web.Response | None:
    """None when ``request`` may read the metrics; else the answer that refuses it."""
    config = request.app[CONFIG_KEY]
    if from_sibling(request):
        return None
    own_listener = request.app.get(METRICS_LISTENER_KEY, False)
    if config.metrics_listen and not own_listener:
        return json_error(404, "metrics are served on their own listener (--metrics-listen)")
    if config.metrics_token:
        problem = bearer_problem(request, config.metrics_token)
        if problem is not None:
            wrong = "Authorization" in request.headers
            return json_error(401, "wrong metrics token" if wrong else "/metrics needs the "
                              "metrics token (Authorization: Bearer ...)",
                              headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
        return None
    if config.token and not own_listener:
        return json_error(403, "metrics are private on a server with --token: scrape them on "
                          "--metrics-listen or with --metrics-token")
    return None


async def handle_metrics(request: web.Request) -> web.Response:
    refusal = metrics_refusal(request)
    if refusal is not None:
        return refusal
    own = request.app[METRICS_KEY].exposition()
    worker = request.app.get(WORKER_KEY)
    if worker is not None and request.query.get("scope") != SCOPE_WORKER:
        expositions = await fetch_siblings(worker, f"/metrics?scope={SCOPE_WORKER}")
        own = merge_metrics(worker, {worker.index: own, **expositions})
    return web.Response(body=own, headers={"Content-Type": CONTENT_TYPE_LATEST})


def create_metrics_app(main: web.Application) -> web.Application:
    """``/metrics`` and ``/health`` of ``main`` (a ``serve`` or ``serve-engine`` application)
    for the listener of ``--metrics-listen``: the same metrics and calls, nothing else."""
    app = web.Application(middlewares=[error_middleware])
    app[METRICS_LISTENER_KEY] = True
    app[CONFIG_KEY] = main[CONFIG_KEY]
    app[METRICS_KEY] = main[METRICS_KEY]
    app[ENGINE_KEY] = main[ENGINE_KEY]
    app[CALLS_KEY] = main[CALLS_KEY]
    app[PARKED_KEY] = main[PARKED_KEY]
    worker = main.get(WORKER_KEY)
    if worker is not None:
        app[WORKER_KEY] = worker
    app.router.add_get("/metrics", handle_metrics)
    app.router.add_get("/health", handle_health)
    return app


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
