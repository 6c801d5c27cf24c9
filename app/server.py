"""aiohttp application: static page, signaling, health, live calls.

Built by :func:`create_app` from a :class:`~omnicall.app.config.ServerConfig`; all state hangs
off the application object under the keys of :mod:`omnicall.app.app_state` (no module
globals). The engine is started (loaded and warmed up) in ``on_startup``, before the server
accepts any call. The routes: ``/offer`` (:mod:`omnicall.app.offer_routes`), ``/health``,
``/metrics`` and ``/config`` (:mod:`omnicall.app.status_routes`), the page and its files.
"""

from __future__ import annotations

import asyncio
import logging
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from aiohttp import web
from aiortc.exceptions import InvalidStateError

from omnicall.app.app_state import (
    APP_TASKS_KEY,
    AUTH_LIMITER_KEY,
    CALLS_KEY,
    CLOCK_KEY,
    CONFIG_KEY,
    ENGINE_KEY,
    LADDER_KEY,
    LIMITER_KEY,
    METRICS_KEY,
    PARKED_KEY,
    STORE_KEY,
    TIMEOUTS_KEY,
    TOOLS_KEY,
    TRANSCRIPTS_KEY,
    WORKER_KEY,
    LiveCalls,
)
from omnicall.app.config import ServerConfig
from omnicall.app.engine_settings import engine_settings
from omnicall.app.http_errors import error_middleware
from omnicall.app.ice import use_loopback_candidates
from omnicall.app.metrics import Metrics
from omnicall.app.offer_routes import handle_offer, sweep_parked
from omnicall.app.rate_limit import RateLimiter
from omnicall.app.resume import ParkedCalls
from omnicall.app.session import SessionTimeouts
from omnicall.app.status_routes import (
    handle_client_config,
    handle_health,
    handle_metrics,
    live_sample,
)
from omnicall.app.store import RedisStore, open_store
from omnicall.app.transcripts import transcript_folder
from omnicall.app.worker_group import WorkerInfo
from omnicall.engine.base import Engine
from omnicall.engine.degrade import DegradeLadder, LadderConfig
from omnicall.engine.registry import create_engine
from omnicall.engine.tasks import TaskOwner
from omnicall.engine.tools import Toolbox, load_tools
from omnicall.media.clock import Clock, MonotonicClock

logger = logging.getLogger(__name__)

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
AUTH_FAILURES_PER_MIN = 10.0
OFFER_BURST = 10
STORE_TTL_S = 3600.0  # a call's transcript outlives its last turn by an hour


def version() -> str:
    try:
        return metadata.version("omnicall")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


async def handle_index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(WEB_DIR / "index.html")


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
    app[APP_TASKS_KEY].spawn("sweep-parked", sweep_parked(app))


async def _close_sessions(app: web.Application) -> None:
    sessions = list(app[CALLS_KEY].sessions.values())
    if sessions:
        logger.info("closing %d call(s)", len(sessions))
        for session in sessions:
            session.close_reason = "shutdown"
        await asyncio.gather(*(s.close() for s in sessions))
    await app[APP_TASKS_KEY].close(app[CONFIG_KEY].shutdown_timeout_s)
    await asyncio.gather(*(s.close() for s in app[PARKED_KEY].drain()))


async def _check_store(app: web.Application) -> None:
    store = app[STORE_KEY]
    if isinstance(store, RedisStore):
        await store.ping()  # StoreError: the server does not start (a one-line error)
        logger.info("call transcripts in %s", store.url)


async def _close_store(app: web.Application) -> None:
    await app[STORE_KEY].close()


async def _close_engine(app: web.Application) -> None:
    await app[ENGINE_KEY].close()
    use_loopback_candidates(False)


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
    app.on_startup.append(_start_engine)
    app.on_shutdown.append(_close_sessions)
    app.on_cleanup.append(_close_engine)


def operator_tools(config: ServerConfig) -> Toolbox | None:
    """The ``--tools`` module's tools (ToolError when it cannot be used)."""
    if not config.tools:
        return None
    return load_tools(config.tools, config.tool_timeout_s)


def create_app(config: ServerConfig, *, engine: Engine | None = None, clock: Clock | None = None,
               timeouts: SessionTimeouts | None = None,
               worker: WorkerInfo | None = None,
               tools: Toolbox | None = None) -> web.Application:
    """Build the application. ``engine``/``clock``/``timeouts`` default from ``config``;
    ``worker``: this process's place in a ``--workers`` group; ``tools``: the assistant's
    tools (default: the ``--tools`` module's)."""
    app = web.Application(client_max_size=config.max_body_bytes,
                          middlewares=[error_middleware])
    install_common(app, config, engine=engine, clock=clock, timeouts=timeouts, worker=worker)
    app[LIMITER_KEY] = RateLimiter(config.offer_rate_per_min, OFFER_BURST)
    app[AUTH_LIMITER_KEY] = RateLimiter(AUTH_FAILURES_PER_MIN, OFFER_BURST)
    app[STORE_KEY] = open_store(config.store, max(STORE_TTL_S, config.resume_window_s))
    app[TOOLS_KEY] = tools if tools is not None else operator_tools(config)
    app[TRANSCRIPTS_KEY] = transcript_folder(config.transcripts) if config.transcripts else None
    app.on_startup.append(_check_store)
    app.on_cleanup.append(_close_store)
    use_loopback_candidates(config.ice_loopback)
    app.router.add_get("/", handle_index)
    app.router.add_get("/kiosk", handle_index)
    app.router.add_get("/companion", handle_index)
    app.router.add_post("/offer", handle_offer)
    app.router.add_get("/health", handle_health)
    app.router.add_get("/config", handle_client_config)
    app.router.add_get("/metrics", handle_metrics)
    app.router.add_static("/static/", WEB_DIR, show_index=False)
    return app
