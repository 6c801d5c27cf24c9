"""What both servers set up the same way: ``omnicall serve`` (the WebRTC front end,
:func:`omnicall.app.http.server.create_app`) and ``omnicall serve-engine`` (the Realtime server,
:func:`omnicall.app.realtime.server.create_engine_app`).

:func:`install_common` puts the shared state on the application under the keys of
:mod:`omnicall.app.app_state` (config, engine, clock, live and parked calls, app tasks, call
timeouts, metrics, degrade ladder, worker group) and registers the handlers that start the
engine before the first call, close the calls on shutdown and the engine last.
:func:`create_runner` is the runner either application is served with.
"""

from __future__ import annotations

import asyncio
import logging
import platform
from importlib import metadata
from typing import Any

from aiohttp import web
from aiortc.exceptions import InvalidStateError

from omnicall.app.app_state import (
    APP_TASKS_KEY,
    CALLS_KEY,
    CLOCK_KEY,
    CONFIG_KEY,
    ENGINE_KEY,
    LADDER_KEY,
    METRICS_KEY,
    PARKED_KEY,
    TIMEOUTS_KEY,
    TRACING_KEY,
    WORKER_KEY,
    LiveCalls,
)
from omnicall.app.calls import ParkedCalls, SessionTimeouts
from omnicall.app.config import ServerConfig
from omnicall.app.engine_settings import engine_settings
from omnicall.app.metrics import Metrics
from omnicall.app.process.worker_group import WorkerInfo
from omnicall.app.status_routes import live_sample
from omnicall.app.tracing import Tracing
from omnicall.engine.base import Engine
from omnicall.engine.degrade import DegradeLadder, LadderConfig
from omnicall.engine.registry import create_engine
from omnicall.engine.tasks import TaskOwner
from omnicall.media.clock import Clock, MonotonicClock

logger = logging.getLogger(__name__)


def version() -> str:
    try:
        return metadata.version("omnicall")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def aiortc_race_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """aiortc starts ICE in a background task (``RTCPeerConnection.__connect``) that checks
    for a closed connection only before its first await: a call closed while ICE is still
    checking (a connect timeout, a vanished caller) makes it raise ``InvalidStateError`` with
    nobody to retrieve it. That one is expected and logged at DEBUG; anything else goes to
    the loop's default handler."""
    task = context.get("future")
    coro = task.get_coro() if isinstance(task, asyncio.Task) else None
    if isinstance(context.get("exception"), InvalidStateError) and \
            getattr(coro, "__qualname__", "").endswith("RTCPeerConnection.__connect"):
        logger.debug("aiortc: ICE start after close (%s)", context.get("exception"))
        return
    loop.default_exception_handler(context)


async def _start_engine(app: web.Application) -> None:
    asyncio.get_running_loop().set_exception_handler(aiortc_race_handler)
    engine = app[ENGINE_KEY]
    logger.info("starting engine %r", engine.name)
    await engine.start()


async def _close_sessions(app: web.Application) -> None:
    sessions = list(app[CALLS_KEY].sessions.values())
    if sessions:
        logger.info("closing %d call(s)", len(sessions))
        for session in sessions:
            session.close_reason = "shutdown"
        await asyncio.gather(*(s.close() for s in sessions))
    await app[APP_TASKS_KEY].close(app[CONFIG_KEY].shutdown_timeout_s)
    await asyncio.gather(*(s.close() for s in app[PARKED_KEY].drain()))


async def _close_engine(app: web.Application) -> None:
    await app[ENGINE_KEY].close()


async def _close_tracing(app: web.Application) -> None:
    """Send the spans still queued (the exporter's timeout bounds it) and stop exporting."""
    tracing = app[TRACING_KEY]
    if tracing is not None:
        logger.info("sending the last traces to %s", tracing.endpoint)
        await asyncio.to_thread(tracing.close)


def create_runner(app: web.Application) -> web.AppRunner:
    """The runner for ``app``. Its keep-alive timeout also bounds a connection that has sent
    no complete request since it opened or since its last response: slow-header clients
    (slowloris) and idle keep-alive connections are closed after ``--header-timeout-s``."""
    return web.AppRunner(app, handle_signals=False,
                         keepalive_timeout=app[CONFIG_KEY].header_timeout_s)


def install_common(app: web.Application, config: ServerConfig, *,
                   engine: Engine | None = None, clock: Clock | None = None,
                   timeouts: SessionTimeouts | None = None,
                   worker: WorkerInfo | None = None) -> None:
    """What ``serve`` and ``serve-engine`` share: config, engine (started before the first
    call, closed last), clock, call registry, metrics, degrade ladder, worker group."""
    app[CONFIG_KEY] = config
    app[ENGINE_KEY] = engine or create_engine(config.engine, config=config,
                                              **engine_settings(config))
    app[CLOCK_KEY] = clock or MonotonicClock()
    app[CALLS_KEY] = LiveCalls(config.max_sessions)
    app[PARKED_KEY] = ParkedCalls(config.resume_window_s, config.max_sessions)
    app[APP_TASKS_KEY] = TaskOwner("app")
    app[TIMEOUTS_KEY] = timeouts or SessionTimeouts(
        media_timeout_s=config.media_timeout_s, connect_timeout_s=config.connect_timeout_s,
        reply_timeout_s=config.reply_timeout_s)
    if worker is not None:
        app[WORKER_KEY] = worker
    app[METRICS_KEY] = Metrics(lambda: live_sample(app), build={
        "version": version(), "engine": app[ENGINE_KEY].name,
        "python": platform.python_version()})
    app[LADDER_KEY] = DegradeLadder(LadderConfig(
        text_first_p95_s=config.degrade_text_first_ms / 1000,
        fallback_p95_s=config.degrade_fallback_ms / 1000,
        window_turns=config.degrade_window_turns, min_turns=config.degrade_window_turns))
    app[TRACING_KEY] = Tracing(config.otel_endpoint, app[CLOCK_KEY], attributes={
        "omnicall.engine": app[ENGINE_KEY].name,
        **({"omnicall.worker": worker.index} if worker is not None else {}),
    }) if config.otel_endpoint else None
    app.on_startup.append(_start_engine)
    app.on_shutdown.append(_close_sessions)
    app.on_cleanup.append(_close_engine)
    app.on_cleanup.append(_close_tracing)
