"""``POST /offer``: a call starts, or a dropped one resumes; and how a dropped call is kept.

An offer is checked (origin, token, the address's offer budget, body size and time; an offer a
sibling worker forwarded was checked there), may go to the least loaded sibling
(``--workers``), then becomes a :class:`~omnicall.app.call.session.CallSession`. With a ``resume``
hint it takes back the call's parked engine session (:mod:`omnicall.app.calls`), or else the
call's stored transcript (``--store``: parked on another worker or machine). A call that
drops without a hangup parks its engine session (:func:`park_call`) until the resume window
is over (:func:`sweep_parked`).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from functools import partial

from aiohttp import web

from omnicall.app.access import bearer_problem, client_key, origin_allowed
from omnicall.app.app_state import (
    APP_TASKS_KEY,
    CALLS_KEY,
    CLOCK_KEY,
    CONFIG_KEY,
    ENGINE_KEY,
    METRICS_KEY,
    PARKED_KEY,
    RECORDINGS_KEY,
    STORE_KEY,
    TIMEOUTS_KEY,
    TOOLS_KEY,
    TRACING_KEY,
    TRANSCRIPTS_KEY,
    WORKER_KEY,
)
from omnicall.app.call.peer import ACCEPT_ERRORS
from omnicall.app.call.session import CallSession
from omnicall.app.calls import PARKABLE_REASONS, ParkedCall
from omnicall.app.http.rate_limit import AUTH_LIMITER_KEY, LIMITER_KEY
from omnicall.app.http.signaling import Offer, OfferError, parse_offer
from omnicall.app.http_errors import json_error, reject_reason
from omnicall.app.process.worker_group import FORWARDED_HEADER, forward_offer, least_loaded_sibling
from omnicall.app.protocol import PROTOCOL_VERSION
from omnicall.app.storage.store import StoreError
from omnicall.app.tracing import CallTrace
from omnicall.app.turns.turn_outcome import on_turn
from omnicall.media.log_context import call_context, for_call
from omnicall.media.log_limit import clip

logger = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 1.0
FORWARD_EXTRA_S = 2.0  # a forwarded offer: the sibling's accept timeout, and the hop


def forwarded_by_sibling(request: web.Request) -> bool:
    """An offer a sibling worker already checked, arriving on this worker's Unix socket (the
    header alone is not trusted: anyone can send it over TCP)."""
    if FORWARDED_HEADER not in request.headers or request.transport is None:
        return False
    return isinstance(request.transport.get_extra_info("sockname"), str)


async def handle_offer(request: web.Request) -> web.Response:
    response = await _offer(request)
    if response.status >= 400 and not response.get("forwarded"):
        request.app[METRICS_KEY].offers_rejected.labels(reject_reason(response.status)).inc()
    return response


async def _offer(request: web.Request) -> web.Response:
    checked = forwarded_by_sibling(request)  # origin, token and rate were checked there
    refusal = None if checked else _access_refusal(request)
    if refusal is not None:
        return refusal
    body = await _read_body(request)
    if isinstance(body, web.Response):
        return body
    try:
        offer = parse_offer(body)
    except OfferError as exc:
        return json_error(exc.status, str(exc))
    if not checked and not offer.session_hint:
        forwarded = await _forward(request, body)
        if forwarded is not None:
            return forwarded
    return await _start_call(request, offer)


def _access_refusal(request: web.Request) -> web.Response | None:
    """Origin, token, then the address's offer budget (None: the offer may proceed)."""
    config = request.app[CONFIG_KEY]
    now_s = request.app[CLOCK_KEY].now()
    if not origin_allowed(request, config.allowed_origins):
        return json_error(403, f"origin {clip(request.headers.get('Origin'))} may not start "
                               "calls here (see --allowed-origins)")
    if config.token:
        # checked before the offer budget, so unauthenticated requests cannot spend the
        # budget of everyone behind the same address; failures have a bucket of their own
        problem = bearer_problem(request, config.token)
        if problem is not None:
            wait_s = request.app[AUTH_LIMITER_KEY].allow(client_key(request), now_s)
            if wait_s > 0:
                return json_error(429, "too many failed token attempts from this address; "
                                       "wait a moment", {"Retry-After": str(max(1, round(wait_s)))})
            return json_error(401, problem, {"WWW-Authenticate": "Bearer"})
    if config.offer_rate_per_min > 0:
        wait_s = request.app[LIMITER_KEY].allow(client_key(request), now_s)
        if wait_s > 0:
            return json_error(429, "too many call attempts from this address; wait a moment",
                              {"Retry-After": str(max(1, round(wait_s)))})
    return None


async def _read_body(request: web.Request) -> bytes | web.Response:
    """The offer's body, or the error answer (too large, or too slow to arrive)."""
    config = request.app[CONFIG_KEY]
    if request.content_length is not None and request.content_length > config.max_body_bytes:
        return json_error(413, f"offer body larger than {config.max_body_bytes} bytes")
    try:
        async with asyncio.timeout(config.body_timeout_s):
            return await request.read()
    except web.HTTPRequestEntityTooLarge:
        return json_error(413, f"offer body larger than {config.max_body_bytes} bytes")
    except TimeoutError:
        return json_error(408, f"offer body not received within {config.body_timeout_s:g} s")


async def _forward(request: web.Request, body: bytes) -> web.Response | None:
    """A new call goes to the least loaded sibling worker when that is not this one."""
    worker = request.app.get(WORKER_KEY)
    if worker is None or worker.count <= 1:
        return None
    target = await least_loaded_sibling(worker, len(request.app[CALLS_KEY]))
    if target is None:
        return None
    timeout_s = request.app[CONFIG_KEY].accept_timeout_s + FORWARD_EXTRA_S
    answered = await forward_offer(worker, target, body, timeout_s)
    if answered is None:
        return None
    response = web.Response(status=answered[0], body=answered[1],
                            content_type="application/json")
    response["forwarded"] = True  # the sibling counted it
    return response


async def _start_call(request: web.Request, offer: Offer) -> web.Response:
    app = request.app
    config = app[CONFIG_KEY]
    registry = app[CALLS_KEY]
    live = registry.sessions.get(offer.session_hint) if offer.session_hint else None
    if live is not None:  # the page saw its connection drop before the server did
        live.close_reason = "replaced"
        await live.close()  # parks its engine session (below it is taken back)
    resumed = app[PARKED_KEY].take(offer.session_hint) if offer.session_hint else None
    history: tuple[tuple[str, str], ...] = ()
    if resumed is None and offer.session_hint:
        # parked on another worker or machine, or before a restart: the shared transcript
        try:
            history = tuple(await app[STORE_KEY].load(offer.session_hint))
        except StoreError as exc:
            logger.warning("transcript store: %s", exc)
    if resumed is None:
        # parked calls (dropped, waiting for a resume) hold no slot: ParkedCalls bounds them
        if len(registry) >= registry.max_sessions:
            return json_error(503, f"server is full ({registry.max_sessions} calls); try again "
                                   "soon", {"Retry-After": "10"})
        problem = app[ENGINE_KEY].admission_problem(len(registry))
        if problem is not None:
            return json_error(503, f"{problem}; try again soon", {"Retry-After": "10"})
        session_id = offer.session_hint if history and offer.session_hint else \
            secrets.token_urlsafe(9)
        for_call(session_id)  # this handler's log lines and the call's tasks name it
        if history:
            logger.info("resuming a dropped call from its stored transcript (%d "
                        "items)", len(history))
            app[METRICS_KEY].calls.labels("resumed").inc()
    else:
        assert offer.session_hint is not None
        session_id = offer.session_hint
        for_call(session_id)
        # whatever it was saying while the call was down went unheard
        resumed.engine_session.interrupt()
        logger.info("resuming a dropped call")
        app[METRICS_KEY].calls.labels("resumed").inc()
    session = CallSession(session_id, config, app[ENGINE_KEY], app[CLOCK_KEY], registry.remove,
                          app[TIMEOUTS_KEY], app[METRICS_KEY], partial(on_turn, app),
                          resume=resumed, video_fps=offer.video_fps,
                          room=config.room_settings(offer.mode),
                          interrupt_by=config.interrupt_by(offer.mode),
                          addressee=config.addressee_for(offer.mode),
                          park=partial(park_call, app), store=app[STORE_KEY], history=history,
                          tools=app[TOOLS_KEY], transcripts=app[TRANSCRIPTS_KEY],
                          recordings=app[RECORDINGS_KEY], trace=_trace(app, session_id, offer,
                                                                       resumed, history))
    registry.add(session)
    return await _accept(app, session, offer, resumed)


def _trace(app: web.Application, session_id: str, offer: Offer, resumed: ParkedCall | None,
           history: tuple[tuple[str, str], ...]) -> CallTrace | None:
    """The call's trace when --otel-endpoint is set (a resumed call is a trace of its own)."""
    tracing = app[TRACING_KEY]
    if tracing is None:
        return None
    return tracing.call(session_id, "webrtc", {
        "omnicall.mode": offer.mode or "",
        "omnicall.resumed": resumed is not None or bool(history)})


async def _accept(app: web.Application, session: CallSession, offer: Offer,
                  resumed: ParkedCall | None) -> web.Response:
    """Answer the offer; nothing of a refused one stays (slot, tasks, peer connection)."""
    config = app[CONFIG_KEY]
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
        logger.warning("offer not applied within %.0f s", config.accept_timeout_s)
        return json_error(503, "the server could not answer the offer in time; try again",
                          {"Retry-After": "5"})
    finally:
        if not accepted:
            session.close_reason = "bad_resume_offer" if resumed is not None else "bad_offer"
            await session.close()
    app[METRICS_KEY].calls_started.inc()
    logger.info("call accepted (%d active; video=%s)", len(app[CALLS_KEY]), offer.has_video)
    return web.json_response({"sdp": answer.sdp, "type": answer.type, "session": session.id,
                              "resumed": session.resumed, "protocol": PROTOCOL_VERSION})


def park_call(app: web.Application, session: CallSession) -> bool:
    """A call ended: keep its engine session for a resume if it dropped (no hangup)."""
    if session.close_reason not in PARKABLE_REASONS:
        return False
    to_close = app[PARKED_KEY].park(session.id, session.parked(), app[CLOCK_KEY].now())
    for engine_session in to_close:
        app[APP_TASKS_KEY].spawn("close-parked", engine_session.close())
    kept = session.engine_session not in to_close
    if kept:
        with call_context(session.id):
            logger.info("dropped; conversation kept %.0f s for a resume",
                        app[PARKED_KEY].window_s)
    return kept


async def sweep_parked(app: web.Application) -> None:
    """Close parked engine sessions whose resume window is over (one app task)."""
    clock = app[CLOCK_KEY]
    while True:
        await clock.sleep(SWEEP_INTERVAL_S)
        for engine_session in app[PARKED_KEY].expired(clock.now()):
            with call_context(engine_session.session_id):
                logger.info("resume window over; closing")
                await engine_session.close()
