"""The WebRTC front end's aiohttp application: static page, signaling, health, live calls.

Built by :func:`create_app` from a :class:`~omnicall.app.config.ServerConfig`; all state hangs
off the application object under the keys of :mod:`omnicall.app.app_state` (no module
globals). What it shares with ``serve-engine`` is set up by
:func:`omnicall.app.setup.install_common`: the engine is started (loaded and warmed up) in
``on_startup``, before the server accepts any call. The routes: ``/offer``
(:mod:`omnicall.app.http.offer_routes`), ``/health``, ``/metrics`` and ``/config``
(:mod:`omnicall.app.status_routes`), the page and its files.
"""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import web

from omnicall.app.app_state import (
    APP_TASKS_KEY,
    CLOCK_KEY,
    CONFIG_KEY,
    RECORDINGS_KEY,
    STORE_KEY,
    TOOLS_KEY,
    TRANSCRIPTS_KEY,
)
from omnicall.app.calls import SessionTimeouts
from omnicall.app.config import ServerConfig
from omnicall.app.http.offer_routes import handle_offer, sweep_parked
from omnicall.app.http.rate_limit import AUTH_LIMITER_KEY, LIMITER_KEY, RateLimiter
from omnicall.app.http_errors import error_middleware
from omnicall.app.process.worker_group import WorkerInfo
from omnicall.app.setup import install_common
from omnicall.app.status_routes import handle_client_config, handle_health, handle_metrics
from omnicall.app.storage.recordings import keep_deleting_old
from omnicall.app.storage.store import RedisStore, open_store
from omnicall.app.storage.transcripts import transcript_folder
from omnicall.engine.base import Engine
from omnicall.engine.tools import Toolbox, load_tools
from omnicall.media.clock import Clock
from omnicall.media.third_party import use_loopback_candidates

logger = logging.getLogger(__name__)

WEB_DIR = Path(__file__).resolve().parents[2] / "web"
AUTH_FAILURES_PER_MIN = 10.0
OFFER_BURST = 10
STORE_TTL_S = 3600.0  # a call's transcript outlives its last turn by an hour


async def handle_index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(WEB_DIR / "index.html")


async def _start_sweep(app: web.Application) -> None:
    """Parked calls (dropped, kept for a resume) are closed when their window is over;
    --record's old recordings are deleted."""
    app[APP_TASKS_KEY].spawn("sweep-parked", sweep_parked(app))
    folder = app[RECORDINGS_KEY]
    if folder is not None:
        app[APP_TASKS_KEY].spawn("delete-old-recordings", keep_deleting_old(
            folder, app[CONFIG_KEY].record_keep_h * 3600, app[CLOCK_KEY]))


async def _check_store(app: web.Application) -> None:
    store = app[STORE_KEY]
    if isinstance(store, RedisStore):
        await store.ping()  # StoreError: the server does not start (a one-line error)
        logger.info("call transcripts in %s", store.url)


async def _close_store(app: web.Application) -> None:
    await app[STORE_KEY].close()


async def _reset_ice(app: web.Application) -> None:
    use_loopback_candidates(False)


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
    app[RECORDINGS_KEY] = transcript_folder(config.record) if config.record else None
    app.on_startup.append(_start_sweep)
    app.on_startup.append(_check_store)
    app.on_cleanup.append(_close_store)
    app.on_cleanup.append(_reset_ice)
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
