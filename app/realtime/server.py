"""``omnicall serve-engine``: omnicall's engines behind the OpenAI Realtime protocol.

``ws://HOST:PORT/v1/realtime?model=NAME`` - one engine session per WebSocket, the same
protocol vllm-omni serves, so a front-end (``serve --engine remote``) or any client built on
the ``openai`` package's ``client.realtime.connect`` talks to either. Client events are
validated with the package's ``RealtimeClientEvent`` adapter; anything invalid or unknown is
answered with an ``error`` event, never a crash. Input audio is PCM16 at 24 kHz (like
vllm-omni; other formats get an error). ``session.update`` may set
``audio.input.turn_detection``: ``server_vad`` (default) lets the engine's own turn detector
end turns and barge in; ``null`` leaves turns to the client (``commit`` + ``response.create``).
``input_image`` items reach the engine as video frames; ``conversation.item.delete`` of one
drops its image if the engine has not taken it yet (``conversation.item.deleted``; an
unknown id gets ``item_not_found``). ``/health``, ``/metrics`` and the degrade ladder work
as in ``serve``.

A connection's parts: its input on the media plane (:mod:`omnicall.app.realtime.input`),
typed text and cancels (:mod:`omnicall.app.turns.user_controls`), the client's tools
(:mod:`omnicall.app.realtime.client_tools`), and the engine's events as server events
(:mod:`omnicall.app.turns.event_pump`, :mod:`omnicall.app.realtime.replies`).
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

from aiohttp import WSMsgType, web
from openai.types import realtime as rt_types
from openai.types.realtime.realtime_audio_input_turn_detection import ServerVad

from omnicall.app.access import bearer_problem
from omnicall.app.app_state import (
    CALLS_KEY,
    CLOCK_KEY,
    CONFIG_KEY,
    ENGINE_KEY,
    METRICS_KEY,
    TRACING_KEY,
)
from omnicall.app.config import ServerConfig
from omnicall.app.realtime.client_tools import ClientTools, client_tool_specs
from omnicall.app.realtime.input import (
    MAX_IMAGE_ITEMS,
    RealtimeInput,
    decode_image,
    offer_units,
)
from omnicall.app.realtime.replies import Fields, RealtimeReplies
from omnicall.app.realtime.sound import RealtimePlayout
from omnicall.app.setup import install_common
from omnicall.app.status_routes import handle_health, handle_metrics
from omnicall.app.turns.event_pump import EventPump
from omnicall.app.turns.turn_outcome import on_turn
from omnicall.app.turns.user_controls import UserControls
from omnicall.engine import realtime as rt
from omnicall.engine.base import EngineSession, SessionOptions, UnsupportedControl
from omnicall.engine.conversation.settings import MAX_INSTRUCTIONS_CHARS
from omnicall.engine.events import EngineError, EngineEvent, TurnEvent
from omnicall.engine.tasks import TaskOwner
from omnicall.media.log_limit import LogLimiter, clip

logger = logging.getLogger(__name__)

TOOL_CALL_WAIT_S = 2.0  # a tool call waits this long for its response to be created


class RealtimeConnection:
    """One client WebSocket and the engine session it drives."""

    def __init__(self, ws: web.WebSocketResponse, app: web.Application, session_id: str) -> None:
        self.ws = ws
        self.app = app
        self.id = session_id
        self.config: ServerConfig = app[CONFIG_KEY]
        self.clock = app[CLOCK_KEY]
        self.replies = RealtimeReplies()
        self._send_lock = asyncio.Lock()  # a list of server events goes out whole
        # each reply's sound goes out as audio deltas straight from its gate
        self.playout = RealtimePlayout(self.replies, self._send_all)
        self.engine_session: EngineSession = app[ENGINE_KEY].open_session(
            session_id, SessionOptions(playout=self.playout))
        self.tasks = TaskOwner(f"realtime-{session_id}")
        self.input = RealtimeInput()
        self.controls = UserControls(self.engine_session)
        tracing = app[TRACING_KEY]
        self.trace = tracing.call(session_id, "realtime") if tracing is not None else None
        self.pump = EventPump(self._route, partial(on_turn, app), trace=self.trace)
        self.automatic = True
        self.instructions = ""
        self.response_open = asyncio.Event()
        self.tools: ClientTools | None = None
        self.continue_reply = 0  # response.create events that follow a tool's result
        self.log_limit = LogLimiter()
        self.errors_sent = 0
        self.close_reason = "closed"
        self._closed = False

    def buffer_frames(self) -> dict[str, int]:
        return {"realtime_input": self.input.frames_waiting()}

    def send(self, message: dict[str, Any]) -> bool:
        return False  # page messages (degrade notices) have no place in this protocol

    # -- sending ----------------------------------------------------------------------
    async def emit(self, fields: dict[str, Any]) -> None:
        """Validate a server event with the openai package's models and send it."""
        event = rt.SERVER_EVENTS.validate_python({"event_id": rt.new_id("event"), **fields})
        if not self.ws.closed:
            await self.ws.send_str(rt.dump(event))

    async def _send_all(self, events: list[Fields]) -> None:
        """Server events in order, each list whole (the event pump's and a reply's sound,
        which may open its response: a tool call then knows it is open)."""
        async with self._send_lock:
            for fields in events:
                await self.emit(fields)
                if fields["type"] == "response.created":
                    self.response_open.set()

    async def error(self, message: str, code: str, kind: str = "invalid_request_error",
                    event_id: str | None = None) -> None:
        self.errors_sent += 1
        if self.log_limit.allow(code, self.clock.now()):
            logger.info("realtime %s: %s (%s)", self.id, message, code)
        await self.emit({"type": "error", "error": {
            "type": kind, "code": code, "message": message,
            **({"event_id": event_id} if event_id else {})}})

    def session_dict(self) -> dict[str, Any]:
        detection = {"type": "server_vad", "create_response": True,
                     "interrupt_response": True} if self.automatic else None
        pcm = {"type": "audio/pcm", "rate": rt.REALTIME_RATE_HZ}
        return {"type": "realtime", "model": self.config.served_model_name,
                "instructions": self.instructions, "output_modalities": ["audio"],
                "audio": {"input": {"format": pcm, "turn_detection": detection},
                          "output": {"format": pcm}}}

    # -- the connection ---------------------------------------------------------------
    async def run(self) -> None:
        await self.emit({"type": "session.created", "session": self.session_dict()})
        self.tasks.spawn("events", self.pump.run(self.engine_session.events()))
        try:
            async for message in self.ws:
                if message.type == WSMsgType.TEXT:
                    await self._on_text(message.data)
                elif message.type == WSMsgType.BINARY:
                    await self.error("binary frames are not Realtime events; send JSON text",
                                     "invalid_event")
                elif message.type == WSMsgType.ERROR:
                    break
        finally:
            await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self.tasks.close(self.config.shutdown_timeout_s)
            await self.engine_session.close()
            if not self.ws.closed:
                await self.ws.close()
        finally:
            if self.trace is not None:
                self.trace.end(self.close_reason)

    async def _on_text(self, text: str) -> None:
        try:
            event = rt.parse_client_event(text)
        except rt.ProtocolError as exc:
            kind = rt.event_type(text)
            await self.error(f"invalid or unknown client event {clip(kind)}: {exc}",
                             "invalid_event")
            return
        try:
            await self._dispatch(event)
        except UnsupportedControl as exc:
            await self.error(str(exc), "unsupported", event_id=event.event_id)
        except rt.ProtocolError as exc:
            await self.error(str(exc), "invalid_value", event_id=event.event_id)

    # -- client events ----------------------------------------------------------------
    async def _dispatch(self, event: Any) -> None:
        match event:
            case rt_types.SessionUpdateEvent():
                await self._session_update(event)
            case rt_types.InputAudioBufferAppendEvent():
                self.input.add_audio(rt.decode_pcm16(event.audio))
                await offer_units(self.input, self.engine_session.push, self.clock)
            case rt_types.InputAudioBufferCommitEvent():
                self.engine_session.commit_input()
                await self.emit({"type": "input_audio_buffer.committed",
                                 "item_id": self.replies.next_user_item()})
            case rt_types.InputAudioBufferClearEvent():
                self.input.clear()
                self.engine_session.set_turn_detection(self.automatic)  # drops buffered input
                await self.emit({"type": "input_audio_buffer.cleared"})
            case rt_types.ResponseCreateEvent():
                if self.continue_reply:  # the reply goes on from the tool's result
                    self.continue_reply -= 1
                elif not self.controls.answer() and not self.automatic:
                    self.engine_session.respond()
            case rt_types.ResponseCancelEvent():
                self.controls.interrupt()
            case rt_types.ConversationItemCreateEvent():
                self._item(event)
            case rt_types.ConversationItemDeleteEvent():
                await self._delete(event)
            case rt_types.ConversationItemTruncateEvent():
                self.engine_session.truncate_reply(event.audio_end_ms)
                await self.emit({"type": "conversation.item.truncated", "item_id": event.item_id,
                                 "content_index": event.content_index,
                                 "audio_end_ms": event.audio_end_ms})
            case _:
                await self.error(f"{event.type} is not supported by omnicall", "unsupported",
                                 event_id=event.event_id)

    async def _session_update(self, event: rt_types.SessionUpdateEvent) -> None:
        session = event.session
        if not isinstance(session, rt_types.RealtimeSessionCreateRequest):
            raise UnsupportedControl("only realtime sessions are served (no transcription "
                                     "sessions)")
        audio_input = session.audio.input if session.audio is not None else None
        if audio_input is not None and audio_input.format is not None:
            fmt = audio_input.format
            if getattr(fmt, "type", None) not in (None, "audio/pcm") or getattr(
                    fmt, "rate", None) not in (None, rt.REALTIME_RATE_HZ):
                await self.error("only 24 kHz PCM16 input audio is supported (audio/pcm, rate "
                                 "24000)", "unsupported_audio_format", event_id=event.event_id)
                return
        if audio_input is not None and "turn_detection" in audio_input.model_fields_set:
            detection = audio_input.turn_detection
            if detection is not None and not isinstance(detection, ServerVad):
                await self.error("only server_vad turn detection (or null) is supported",
                                 "unsupported_turn_detection", event_id=event.event_id)
                return
            self.engine_session.set_turn_detection(detection is not None)
            self.automatic = detection is not None
        if session.instructions is not None:
            self.instructions = session.instructions[:MAX_INSTRUCTIONS_CHARS]
            self.engine_session.set_instructions(self.instructions)
        if "tools" in session.model_fields_set:
            specs = client_tool_specs(session.tools)
            self.tools = ClientTools(self.send_function_call, self.clock, specs,
                                     self.config.tool_timeout_s) if specs else None
            self.engine_session.set_tools(self.tools)
        await self.emit({"type": "session.updated", "session": self.session_dict()})

    def _item(self, event: rt_types.ConversationItemCreateEvent) -> None:
        item = event.item
        if isinstance(item, rt_types.RealtimeConversationItemFunctionCallOutput):
            if self.tools is None or not self.tools.resolve(item.call_id, item.output):
                raise rt.ProtocolError(f"no tool call {clip(item.call_id)} is waiting")
            self.continue_reply += 1
            return
        role = getattr(item, "role", None)
        if getattr(item, "type", None) != "message" or role not in ("user", "assistant",
                                                                     "system"):
            raise UnsupportedControl("only message items are supported")
        image_item: str | None = None  # the item's id, once it has an image
        for content in getattr(item, "content", []):
            kind = getattr(content, "type", None)
            if kind == "input_image":
                if not self.config.video:  # a client that sends one anyway hears it refused
                    raise UnsupportedControl("this server takes no images (--no-video)")
                image = decode_image(content.image_url or "",
                                     (self.config.video_width, self.config.video_height))
                if image_item is None:
                    image_item = self.input.new_image_item(getattr(item, "id", None))
                self.input.add_image(image, image_item)
            elif kind in ("input_text", "output_text", "text") and content.text:
                if role == "user":
                    self.controls.hold(content.text)
                else:
                    self.controls.to_history()
                    self.engine_session.add_message(role, content.text)
            elif kind == "input_audio":
                raise UnsupportedControl("audio items are not supported: append audio to the "
                                         "input buffer instead")

    async def _delete(self, event: rt_types.ConversationItemDeleteEvent) -> None:
        """An image item leaves the conversation: its image no longer reaches the engine."""
        if not self.input.delete_image(event.item_id):
            await self.error(f"no item {clip(event.item_id)} to delete (serve-engine deletes "
                             "input_image items, the newest "
                             f"{MAX_IMAGE_ITEMS} of them)", "item_not_found",
                             event_id=event.event_id)
            return
        await self.emit({"type": "conversation.item.deleted", "item_id": event.item_id})

    # -- engine events -> server events -------------------------------------------------
    async def _route(self, event: EngineEvent) -> None:
        if isinstance(event, EngineError):
            await self.error(event.message, "engine_error", kind="server_error")
            return
        if isinstance(event, TurnEvent) and event.phase == "start" and event.role == "user":
            self._user_spoke()
        await self._send_all(self.replies.server_events(event, self.clock.now(),
                                                        self.input.audio_ms))
        if isinstance(event, TurnEvent) and event.role == "assistant":
            if event.phase == "start":
                self.playout.started(event.turn_id)  # its sound may go out now
            elif self.replies.response_id is None:
                self.response_open.clear()

    def _user_spoke(self) -> None:
        """Text items still waiting for response.create were history."""
        try:
            self.controls.to_history()
        except UnsupportedControl as exc:  # an engine that keeps no conversation
            logger.info("realtime %s: user text items not kept: %s", self.id, exc)

    async def send_function_call(self, call_id: str, name: str, arguments: str) -> None:
        """The engine calls a client tool: a function_call output item of the current
        response (after its response.created, which may still be on its way)."""
        try:
            await asyncio.wait_for(self.response_open.wait(), TOOL_CALL_WAIT_S)
        except TimeoutError:
            logger.debug("realtime %s: tool call outside a response", self.id)
        for fields in self.replies.function_call(call_id, name, arguments):
            await self.emit(fields)


async def handle_realtime(request: web.Request) -> web.StreamResponse:
    app = request.app
    config = app[CONFIG_KEY]
    problem = bearer_problem(request, config.token) if config.token else None
    if problem is not None:
        return web.json_response({"error": {"type": "invalid_request_error",
                                            "code": "invalid_api_key", "message": problem}},
                                 status=401)
    registry = app[CALLS_KEY]
    ws = web.WebSocketResponse(max_msg_size=rt.MAX_EVENT_BYTES, heartbeat=20.0)
    await ws.prepare(request)
    refusal = _refusal(app, request.query.get("model"))
    if refusal is not None:
        code, message = refusal
        await ws.send_str(rt.dump(rt.SERVER_EVENTS.validate_python({
            "type": "error", "event_id": rt.new_id("event"),
            "error": {"type": "invalid_request_error", "code": code, "message": message}})))
        await ws.close(code=1008, message=code.encode())
        app[METRICS_KEY].offers_rejected.labels("full" if code == "server_full"
                                                else "bad_request").inc()
        return ws
    connection = RealtimeConnection(ws, app, rt.new_id("sess"))
    registry.add(connection)
    app[METRICS_KEY].calls_started.inc()
    logger.info("realtime session %s opened (%d open)", connection.id, len(registry))
    try:
        await connection.run()
    finally:
        registry.sessions.pop(connection.id, None)
        app[METRICS_KEY].calls.labels(connection.close_reason).inc()
        logger.info("realtime session %s closed", connection.id)
    return ws


def _refusal(app: web.Application, model: str | None) -> tuple[str, str] | None:
    """Why a new connection is not served: (error code, message), or None."""
    config = app[CONFIG_KEY]
    registry = app[CALLS_KEY]
    if model is not None and model != config.served_model_name:
        return ("model_not_found", f"model {clip(model)} is not served here; this server "
                f"serves {config.served_model_name!r}")
    if len(registry) >= registry.max_sessions:
        return ("server_full", f"server is full ({registry.max_sessions} sessions); try "
                "another server or later")
    problem = app[ENGINE_KEY].admission_problem(len(registry))
    return None if problem is None else ("server_full", problem)


def create_engine_app(config: ServerConfig, **kwargs: Any) -> web.Application:
    """The ``serve-engine`` application (same keyword arguments as ``create_app``)."""
    app = web.Application(client_max_size=config.max_body_bytes)
    install_common(app, config, **kwargs)
    app.router.add_get("/v1/realtime", handle_realtime)
    app.router.add_get("/health", handle_health)
    app.router.add_get("/metrics", handle_metrics)
    return app
