"""aiohttp application: static page, signaling, health, live calls.

Built by :func:`create_app` from a :class:`~omnicall.app.config.ServerConfig`; all state hangs
off the application object (no module globals). The engine is started (loaded and warmed up) in
``on_startup``, before the server accepts any call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import secrets
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiortc.exceptions import InvalidStateError
from prometheus_client import CONTENT_TYPE_LATEST

from omnicall.app.access import bearer_problem, client_key, origin_allowed, parse_ice_servers
from omnicall.app.config import ServerConfig
from omnicall.app.ice import use_loopback_candidates
from omnicall.app.metrics import Metrics, turn_ttft_s
from omnicall.app.rate_limit import RateLimiter
from omnicall.app.resume import PARKABLE_REASONS, ParkedCalls
from omnicall.app.session import ACCEPT_ERRORS, CallSession, SessionTimeouts
from omnicall.app.signaling import OfferError, parse_offer
from omnicall.app.store import RedisStore, StoreError, TranscriptStore, open_store
from omnicall.app.transcripts import transcript_folder
from omnicall.app.worker_group import (
    FORWARDED_HEADER,
    SCOPE_WORKER,
    WorkerInfo,
    fetch_siblings,
    forward_offer,
    least_loaded_sibling,
    merge_health,
    merge_metrics,
)
from omnicall.engine.base import Engine
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.degrade import DegradeLadder, LadderConfig
from omnicall.engine.qwen_omni.settings import OmniSettings
from omnicall.engine.registry import create_engine
from omnicall.engine.remote.engine import RemoteSettings
from omnicall.engine.tasks import TaskOwner
from omnicall.engine.tools import Toolbox, load_tools
from omnicall.media.clock import Clock, MonotonicClock
from omnicall.media.log_limit import clip

if TYPE_CHECKING:
    from omnicall.engine.remote.engine import RemoteSettings

logger = logging.getLogger(__name__)

WEB_DIR = Path(__file__).resolve().parent.parent / "web"


class LiveCalls:
    """Live calls, bounded by ``max_sessions``."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[str, CallSession] = {}
        self.total_opened = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def add(self, session: CallSession) -> None:
        self.sessions[session.id] = session
        self.total_opened += 1

    def remove(self, session: CallSession) -> None:
        self.sessions.pop(session.id, None)


CONFIG_KEY = web.AppKey("config", ServerConfig)
ENGINE_KEY = web.AppKey("engine", Engine)
CLOCK_KEY = web.AppKey("clock", Clock)
LIMITER_KEY = web.AppKey("offer_limiter", RateLimiter)
AUTH_LIMITER_KEY = web.AppKey("auth_limiter", RateLimiter)
AUTH_FAILURES_PER_MIN = 10.0
OFFER_BURST = 10
CALLS_KEY = web.AppKey("calls", LiveCalls)
PARKED_KEY = web.AppKey("parked", ParkedCalls)
APP_TASKS_KEY = web.AppKey("app_tasks", TaskOwner)
SWEEP_INTERVAL_S = 1.0
TIMEOUTS_KEY = web.AppKey("timeouts", SessionTimeouts)
METRICS_KEY = web.AppKey("metrics", Metrics)
LADDER_KEY = web.AppKey("ladder", DegradeLadder)
WORKER_KEY = web.AppKey("worker", WorkerInfo)
STORE_KEY = web.AppKey("store", TranscriptStore)
TOOLS_KEY: web.AppKey[Toolbox | None] = web.AppKey("tools")
TRANSCRIPTS_KEY: web.AppKey[Path | None] = web.AppKey("transcripts")
STORE_TTL_S = 3600.0  # a call's transcript outlives its last turn by an hour


def version() -> str:
    try:
        return metadata.version("omnicall")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def json_error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


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


REJECT_REASONS = {400: "bad_request", 401: "unauthorized", 403: "origin", 408: "timeout",
                  413: "too_large", 429: "rate_limited", 503: "full"}


def forwarded_by_sibling(request: web.Request) -> bool:
    """An offer a sibling worker already checked, arriving on this worker's Unix socket (the
    header alone is not trusted: anyone can send it over TCP)."""
    if FORWARDED_HEADER not in request.headers or request.transport is None:
        return False
    return isinstance(request.transport.get_extra_info("sockname"), str)


async def handle_offer(request: web.Request) -> web.Response:
    response = await _offer(request)
    if response.status >= 400 and not response.get("forwarded"):
        reason = REJECT_REASONS.get(response.status, str(response.status))
        request.app[METRICS_KEY].offers_rejected.labels(reason).inc()
    return response


async def _offer(request: web.Request) -> web.Response:
    config = request.app[CONFIG_KEY]
    registry = request.app[CALLS_KEY]
    now_s = request.app[CLOCK_KEY].now()
    checked = forwarded_by_sibling(request)  # origin, token and rate were checked there
    if not checked and not origin_allowed(request, config.allowed_origins):
        return json_error(403, f"origin {clip(request.headers.get('Origin'))} may not start "
                               "calls here (see --allowed-origins)")
    if config.token and not checked:
        # checked before the offer budget, so unauthenticated requests cannot spend the
        # budget of everyone behind the same address; failures have a bucket of their own
        problem = bearer_problem(request, config.token)
        if problem is not None:
            wait_s = request.app[AUTH_LIMITER_KEY].allow(client_key(request), now_s)
            if wait_s > 0:
                return json_error(429, "too many failed token attempts from this address; "
                                       "wait a moment", {"Retry-After": str(max(1, round(wait_s)))})
            return json_error(401, problem, {"WWW-Authenticate": "Bearer"})
    if config.offer_rate_per_min > 0 and not checked:
        wait_s = request.app[LIMITER_KEY].allow(client_key(request), now_s)
        if wait_s > 0:
            return json_error(429, "too many call attempts from this address; wait a moment",
                              {"Retry-After": str(max(1, round(wait_s)))})
    if request.content_length is not None and request.content_length > config.max_body_bytes:
        return json_error(413, f"offer body larger than {config.max_body_bytes} bytes")
    try:
        async with asyncio.timeout(config.body_timeout_s):
            body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return json_error(413, f"offer body larger than {config.max_body_bytes} bytes")
    except TimeoutError:
        return json_error(408, f"offer body not received within {config.body_timeout_s:g} s")
    try:
        offer = parse_offer(body)
    except OfferError as exc:
        return json_error(exc.status, str(exc))
    worker = request.app.get(WORKER_KEY)
    if worker is not None and worker.count > 1 and not checked and not offer.session_hint:
        target = await least_loaded_sibling(worker, len(registry))
        if target is not None:
            answered = await forward_offer(worker, target, body, config.accept_timeout_s + 2)
            if answered is not None:
                response = web.Response(status=answered[0], body=answered[1],
                                        content_type="application/json")
                response["forwarded"] = True  # the sibling counted it
                return response
    parked = request.app[PARKED_KEY]
    live = registry.sessions.get(offer.session_hint) if offer.session_hint else None
    if live is not None:  # the page saw its connection drop before the server did
        live.close_reason = "replaced"
        await live.close()  # parks its engine session (below it is taken back)
    resumed = parked.take(offer.session_hint) if offer.session_hint else None
    history: tuple[tuple[str, str], ...] = ()
    if resumed is None and offer.session_hint:
        # parked on another worker or machine, or before a restart: the shared transcript
        try:
            history = tuple(await request.app[STORE_KEY].load(offer.session_hint))
        except StoreError as exc:
            logger.warning("transcript store: %s", exc)
    if resumed is None:
        # parked calls (dropped, waiting for a resume) hold no slot: ParkedCalls bounds them
        if len(registry) >= registry.max_sessions:
            return json_error(503, f"server is full ({registry.max_sessions} calls); try again "
                                   "soon", {"Retry-After": "10"})
        problem = request.app[ENGINE_KEY].admission_problem(len(registry))
        if problem is not None:
            return json_error(503, f"{problem}; try again soon", {"Retry-After": "10"})
        session_id = offer.session_hint if history and offer.session_hint else \
            secrets.token_urlsafe(9)
        if history:
            logger.info("session %s: resuming a dropped call from its stored transcript (%d "
                        "items)", session_id, len(history))
            request.app[METRICS_KEY].calls.labels("resumed").inc()
    else:
        assert offer.session_hint is not None
        session_id = offer.session_hint
        resumed.interrupt()  # whatever it was saying while the call was down went unheard
        logger.info("session %s: resuming a dropped call", session_id)
        request.app[METRICS_KEY].calls.labels("resumed").inc()
    session = CallSession(session_id, config, request.app[ENGINE_KEY], request.app[CLOCK_KEY],
                          registry.remove, request.app[TIMEOUTS_KEY], request.app[METRICS_KEY],
                          partial(on_turn, request.app), engine_session=resumed,
                          video_fps=offer.video_fps, park=partial(park_call, request.app),
                          store=request.app[STORE_KEY], history=history,
                          tools=request.app[TOOLS_KEY],
                          transcripts=request.app[TRANSCRIPTS_KEY])
    registry.add(session)
    accepted = False
    try:
        async with asyncio.timeout(config.accept_timeout_s):
            answer = await session.accept(offer.sdp)
        accepted = True
    except ACCEPT_ERRORS as exc:
        logger.info("rejecting offer: %s: %s", type(exc).__name__, clip(str(exc)))
        return json_error(400, f"offer could not be applied: {type(exc).__name__} "
                               f"{str(exc)[:200]}".rstrip())
    except TimeoutError:
        logger.warning("session %s: offer not applied within %.0f s", session_id,
                       config.accept_timeout_s)
        return json_error(503, "the server could not answer the offer in time; try again",
                          {"Retry-After": "5"})
    finally:
        if not accepted:  # nothing of a refused offer stays: slot, tasks, peer connection
            session.close_reason = "bad_resume_offer" if resumed is not None else "bad_offer"
            await session.close()
    request.app[METRICS_KEY].calls_started.inc()
    logger.info("session %s: call accepted (%d active; video=%s)", session_id, len(registry),
                offer.has_video)
    return web.json_response({"sdp": answer.sdp, "type": answer.type, "session": session_id,
                              "resumed": session.resumed})


def park_call(app: web.Application, session: CallSession) -> bool:
    """A call ended: keep its engine session for a resume if it dropped (no hangup)."""
    if session.close_reason not in PARKABLE_REASONS:
        return False
    to_close = app[PARKED_KEY].park(session.id, session.engine_session, app[CLOCK_KEY].now())
    for engine_session in to_close:
        app[APP_TASKS_KEY].spawn("close-parked", engine_session.close())
    kept = session.engine_session not in to_close
    if kept:
        logger.info("session %s: dropped; conversation kept %.0f s for a resume", session.id,
                    app[PARKED_KEY].window_s)
    return kept


async def _sweep_parked(app: web.Application) -> None:
    clock = app[CLOCK_KEY]
    while True:
        await clock.sleep(SWEEP_INTERVAL_S)
        for engine_session in app[PARKED_KEY].expired(clock.now()):
            logger.info("session %s: resume window over; closing", engine_session.session_id)
            await engine_session.close()


async def handle_client_config(request: web.Request) -> web.Response:
    """What the page needs before it offers: ICE servers and whether a token is required."""
    config = request.app[CONFIG_KEY]
    return web.json_response({"iceServers": parse_ice_servers(config.ice_servers),
                              "tokenRequired": bool(config.token),
                              "kioskIdleS": config.kiosk_idle_s,
                              "resumeWindowS": config.resume_window_s,
                              "reconnectGiveUpS": config.reconnect_give_up_s,
                              "maxVideoFps": config.video_fps})


def local_health(app: web.Application) -> dict[str, Any]:
    registry = app[CALLS_KEY]
    return {"status": "ok", "engine": app[ENGINE_KEY].name, "sessions": len(registry),
            "max_sessions": registry.max_sessions, "parked": len(app[PARKED_KEY]),
            "pid": os.getpid()}


async def handle_health(request: web.Request) -> web.Response:
    """This process's calls; with ``--workers`` the whole group's (see
    :mod:`omnicall.app.worker_group`)."""
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


def on_turn(app: web.Application, stages: dict[str, float], interrupted: bool) -> None:
    """A turn finished: record it, and move the degrade ladder if answers got slow."""
    metrics = app[METRICS_KEY]
    metrics.observe_turn(stages)
    metrics.turns.labels("interrupted" if interrupted else "answered").inc()
    ttft = turn_ttft_s(stages)
    if ttft is None:
        return
    level = app[LADDER_KEY].observe(ttft)
    if level is None:
        return
    logger.warning("degrade ladder -> %s (rolling P95 time to first token)", level.name)
    metrics.degrade.labels(level.name.lower()).inc()
    app[ENGINE_KEY].set_level(level)
    for session in app[CALLS_KEY].sessions.values():
        session.send({"type": "degrade", "level": level.name.lower()})


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
    app[APP_TASKS_KEY].spawn("sweep-parked", _sweep_parked(app))


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


def turn_settings(config: ServerConfig) -> dict[str, Any]:
    """The conversation's settings every engine takes (``TurnSettings``' fields)."""
    return {"hangover_ms": config.hangover_ms, "turn_model": config.turn_model,
            "echo_warmup_ms": config.echo_warmup_ms, "instructions": config.system_instructions}


def cascade_settings(config: ServerConfig) -> CascadeSettings:
    return CascadeSettings(llm=config.llm, asr=config.asr, voice=config.voice,
                           asr_beam_size=config.asr_beam_size,
                           asr_partial_threads=config.asr_partial_threads,
                           greeting=config.greeting[:500],
                           max_reply_tokens=config.max_reply_tokens,
                           context_tokens=config.llm_context, language=config.language,
                           llm_url=config.llm_url, llm_model=config.llm_model,
                           llm_key=config.llm_key, **turn_settings(config))


def omni_settings(config: ServerConfig) -> OmniSettings:
    return OmniSettings(model=config.model, device=config.device, dtype=config.dtype,
                        attention=config.attention, load_in_4bit=config.load_in_4bit,
                        text_only=config.text_only, speaker=config.speaker,
                        window_s=config.window_s, max_calls=config.max_sessions,
                        **turn_settings(config))


def remote_settings(config: ServerConfig) -> RemoteSettings:
    from omnicall.engine.remote.engine import RemoteSettings

    return RemoteSettings(urls=tuple(config.engine_urls), model=config.engine_model,
                          key=config.engine_key, turn_mode=config.turn_mode,
                          video=config.remote_video, max_calls=config.max_sessions,
                          **turn_settings(config))


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
    app[ENGINE_KEY] = engine or create_engine(config.engine, cascade=cascade_settings(config),
                                              omni=omni_settings(config),
                                              remote=remote_settings(config), config=config)
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
