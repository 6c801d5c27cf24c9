"""``omnicall serve-engine``: omnicall's engines behind the OpenAI Realtime protocol.

``ws://HOST:PORT/v1/realtime?model=NAME`` - one engine session per WebSocket, the same
protocol vllm-omni serves, so a front-end (``serve --engine remote``) or any client built on
the ``openai`` package's ``client.realtime.connect`` talks to either. Client events are
validated with the package's ``RealtimeClientEvent`` adapter; anything invalid or unknown is
answered with an ``error`` event, never a crash. Input audio is PCM16 at 24 kHz (like
vllm-omni; other formats get an error). ``session.update`` may set
``audio.input.turn_detection``: ``server_vad`` (default) lets the engine's own turn detector
end turns and barge in; ``null`` leaves turns to the client (``commit`` + ``response.create``).
``/health``, ``/metrics`` and the degrade ladder work as in ``serve``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from fractions import Fraction
from typing import Any

import cv2
import numpy as np
from aiohttp import WSMsgType, web
from openai.types import realtime as rt_types
from openai.types.realtime.realtime_audio_input_turn_detection import ServerVad

from omnicall.app.access import bearer_problem
from omnicall.app.config import ServerConfig
from omnicall.app.server import (
    CALLS_KEY,
    CLOCK_KEY,
    CONFIG_KEY,
    ENGINE_KEY,
    METRICS_KEY,
    handle_health,
    handle_metrics,
    install_common,
    on_turn,
)
from omnicall.engine import realtime as rt
from omnicall.engine.base import (
    AssistantAudio,
    AssistantText,
    EngineError,
    EngineEvent,
    EngineSession,
    SessionOptions,
    StageTiming,
    TurnEvent,
    UnsupportedControl,
    UserTranscript,
)
from omnicall.engine.tasks import TaskOwner
from omnicall.engine.tools import FILLER, MAX_OUTPUT_CHARS, ToolOutcome, ToolSpec
from omnicall.media.aligner import MediaUnit
from omnicall.media.log_limit import LogLimiter, clip
from omnicall.media.resample import StreamConverter
from omnicall.media.timebase import INPUT_FRAME_SAMPLES, INPUT_RATE_HZ
from omnicall.media.video_ring import VideoUnitFrame

logger = logging.getLogger(__name__)

MAX_TOOLS = 64
PUSH_WAIT_S = 10.0  # the engine refusing input this long: the client sends faster than real time
MAX_IMAGE_BYTES = 4 * 1024 * 1024


class ClientTools:
    """The tools a Realtime client declared in ``session.update``: the engine's calls go
    to the client as function-call events, and its ``function_call_output`` item is the
    result (the ``response.create`` that follows continues the same reply)."""

    def __init__(self, connection: RealtimeConnection, specs: list[ToolSpec],
                 timeout_s: float) -> None:
        self.connection = connection
        self._specs = specs
        self.timeout_s = timeout_s
        self.pending: dict[str, asyncio.Future[str]] = {}

    def specs(self) -> list[ToolSpec]:
        return self._specs

    def filler(self, name: str) -> str:
        return FILLER

    def speculative(self, name: str) -> bool:
        return False  # the client's tools may act: only for a turn that surely ended

    async def call(self, call_id: str, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        outcome = ToolOutcome(call_id, name, arguments)
        started = self.connection.clock.now()
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.pending[call_id] = future
        try:
            await self.connection.send_function_call(call_id, name, json.dumps(arguments))
            outcome.output = await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            outcome.error = f"the client sent no result within {self.timeout_s:g} s"
        finally:
            self.pending.pop(call_id, None)
        outcome.ms = (self.connection.clock.now() - started) * 1000
        return outcome

    def resolve(self, call_id: str, output: str) -> bool:
        future = self.pending.get(call_id)
        if future is None or future.done():
            return False
        future.set_result(output[:MAX_OUTPUT_CHARS])
        return True


class RealtimeConnection:
    """One client WebSocket and the engine session it drives."""

    def __init__(self, ws: web.WebSocketResponse, app: web.Application, session_id: str) -> None:
        self.ws = ws
        self.app = app
        self.id = session_id
        self.config: ServerConfig = app[CONFIG_KEY]
        self.clock = app[CLOCK_KEY]
        config = self.config
        self.engine_session: EngineSession = app[ENGINE_KEY].open_session(
            session_id, SessionOptions(video_fps=config.video_fps,
                                       video_size=(config.video_width, config.video_height)))
        self.tasks = TaskOwner(f"realtime-{session_id}")
        self.converter = StreamConverter(INPUT_RATE_HZ)
        self.to_wire = StreamConverter(rt.WIRE_RATE_HZ)  # engines that speak at other rates
        self.pending = np.zeros(0, np.int16)
        self.unit_index = 0
        self.audio_ms = 0.0  # input audio received, in ms (audio_start/end_ms)
        self.image: VideoUnitFrame | None = None
        self.images = 0  # input_image items received
        self.typed: list[str] = []  # user text items waiting for response.create
        self.automatic = True
        self.instructions = ""
        self.user_item = rt.new_id("item")
        self.response_id: str | None = None
        self.response_open = asyncio.Event()
        self.reply_item: str | None = None
        self.tools: ClientTools | None = None
        self.continue_reply = 0  # response.create events that follow a tool's result
        self.stages: dict[int, dict[str, float]] = {}
        self.speech_end_at: float | None = None  # the engine's own end-of-speech time
        self.log_limit = LogLimiter()
        self.errors_sent = 0
        self.close_reason = "closed"
        self._closed = False

    def buffer_frames(self) -> dict[str, int]:
        return {"realtime_input": len(self.pending) // INPUT_FRAME_SAMPLES}

    def send(self, message: dict[str, Any]) -> bool:
        return False  # page messages (degrade notices) have no place in this protocol

    # -- sending ----------------------------------------------------------------------
    async def emit(self, fields: dict[str, Any]) -> None:
        """Validate a server event with the openai package's models and send it."""
        event = rt.SERVER_EVENTS.validate_python({"event_id": rt.new_id("event"), **fields})
        if not self.ws.closed:
            await self.ws.send_str(rt.dump(event))

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
        pcm = {"type": "audio/pcm", "rate": rt.WIRE_RATE_HZ}
        return {"type": "realtime", "model": self.config.served_model_name,
                "instructions": self.instructions, "output_modalities": ["audio"],
                "audio": {"input": {"format": pcm, "turn_detection": detection},
                          "output": {"format": pcm}}}

    # -- the connection ---------------------------------------------------------------
    async def run(self) -> None:
        await self.emit({"type": "session.created", "session": self.session_dict()})
        self.tasks.spawn("events", self._pump_events())
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
        await self.tasks.close(self.config.shutdown_timeout_s)
        await self.engine_session.close()
        if not self.ws.closed:
            await self.ws.close()

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

    async def _dispatch(self, event: Any) -> None:
        match event:
            case rt_types.SessionUpdateEvent():
                await self._session_update(event)
            case rt_types.InputAudioBufferAppendEvent():
                await self._append(rt.decode_pcm16(event.audio))
            case rt_types.InputAudioBufferCommitEvent():
                self.engine_session.commit_input()
                await self.emit({"type": "input_audio_buffer.committed",
                                 "item_id": self._next_user_item()})
            case rt_types.InputAudioBufferClearEvent():
                self.pending = np.zeros(0, np.int16)
                self.converter.reset()
                self.engine_session.set_turn_detection(self.automatic)  # drops buffered input
                await self.emit({"type": "input_audio_buffer.cleared"})
            case rt_types.ResponseCreateEvent():
                if self.continue_reply:  # the reply goes on from the tool's result
                    self.continue_reply -= 1
                elif self.typed:
                    self.engine_session.send_text(" ".join(self.typed))
                    self.typed = []
                elif not self.automatic:
                    self.engine_session.respond()
            case rt_types.ResponseCancelEvent():
                self.engine_session.interrupt()
            case rt_types.ConversationItemCreateEvent():
                await self._item(event)
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
                    fmt, "rate", None) not in (None, rt.WIRE_RATE_HZ):
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
            self.instructions = session.instructions[:20_000]
            self.engine_session.set_instructions(self.instructions)
        if "tools" in session.model_fields_set:
            specs = [ToolSpec(t.name or "", t.description or "", _schema(t.parameters))
                     for t in session.tools or []
                     if isinstance(t, rt_types.RealtimeFunctionTool) and t.name]
            self.tools = ClientTools(self, specs[:MAX_TOOLS], self.config.tool_timeout_s) \
                if specs else None
            self.engine_session.set_tools(self.tools)
        await self.emit({"type": "session.updated", "session": self.session_dict()})

    async def _item(self, event: rt_types.ConversationItemCreateEvent) -> None:
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
        for content in getattr(item, "content", []):
            kind = getattr(content, "type", None)
            if kind == "input_image":
                self.image = self._decode_image(content.image_url or "")
                self.images += 1
            elif kind in ("input_text", "output_text", "text") and content.text:
                if role == "user":
                    self.typed.append(content.text)
                else:
                    self._history()
                    self.engine_session.add_message(role, content.text)
            elif kind == "input_audio":
                raise UnsupportedControl("audio items are not supported: append audio to the "
                                         "input buffer instead")

    def _history(self) -> None:
        """User text followed by another item without response.create was history."""
        for text in self.typed:
            self.engine_session.add_message("user", text)
        self.typed = []

    def _decode_image(self, url: str) -> VideoUnitFrame:
        _, _, data = url.partition("base64,")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise rt.ProtocolError("input_image must be a base64 data URL") from exc
        if not raw or len(raw) > MAX_IMAGE_BYTES:
            raise rt.ProtocolError(f"input_image must be 1 byte to {MAX_IMAGE_BYTES} bytes")
        image = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
        if image is None:
            raise rt.ProtocolError("input_image is not a JPEG or PNG image")
        rgb = cv2.cvtColor(cv2.resize(image, (self.config.video_width, self.config.video_height)),
                           cv2.COLOR_BGR2RGB)
        return VideoUnitFrame(self.unit_index, 0, Fraction(1, 90_000), np.ascontiguousarray(rgb))

    async def _append(self, samples: np.ndarray) -> None:
        self.audio_ms += len(samples) * 1000 / rt.WIRE_RATE_HZ
        converted = self.converter.convert(samples, rt.WIRE_RATE_HZ)
        self.pending = np.concatenate([self.pending, converted])
        while len(self.pending) >= INPUT_FRAME_SAMPLES:
            unit = MediaUnit(self.unit_index, self.pending[:INPUT_FRAME_SAMPLES].copy(),
                             self.image)
            self.image = None
            deadline = self.clock.now() + PUSH_WAIT_S
            while not self.engine_session.push(unit):  # back-pressure: stop reading the socket
                if self.clock.now() > deadline:
                    raise rt.ProtocolError("the engine is not keeping up with the input audio")
                await asyncio.sleep(0.01)
            self.pending = self.pending[INPUT_FRAME_SAMPLES:]
            self.unit_index += 1

    def _next_user_item(self) -> str:
        item, self.user_item = self.user_item, rt.new_id("item")
        return item

    # -- engine events -> server events -------------------------------------------------
    async def _pump_events(self) -> None:
        async for event in self.engine_session.events():
            await self._route(event)

    async def _route(self, event: EngineEvent) -> None:
        if isinstance(event, StageTiming):
            stages = self.stages.setdefault(event.turn_id, {})
            stages[event.stage] = event.at_s
            if event.stage == "speech_end":
                self.speech_end_at = event.at_s
            while len(self.stages) > 16:
                self.stages.pop(next(iter(self.stages)))
        elif isinstance(event, TurnEvent) and event.role == "user":
            if event.phase == "start":
                self._history()
                await self.emit({"type": "input_audio_buffer.speech_started",
                                 "audio_start_ms": int(self.audio_ms),
                                 "item_id": self.user_item})
            else:
                # where speech ended in the input audio, not where the hangover confirmed it
                late_ms = 0.0 if self.speech_end_at is None else max(
                    0.0, (self.clock.now() - self.speech_end_at) * 1000)
                self.speech_end_at = None
                await self.emit({"type": "input_audio_buffer.speech_stopped",
                                 "audio_end_ms": int(max(0.0, self.audio_ms - late_ms)),
                                 "item_id": self.user_item})
                await self.emit({"type": "input_audio_buffer.committed",
                                 "item_id": self._next_user_item()})
        elif isinstance(event, UserTranscript):
            kind = ("conversation.item.input_audio_transcription.completed" if event.final
                    else "conversation.item.input_audio_transcription.delta")
            fields = {"transcript": event.text, "usage": {"type": "duration", "seconds": 0.0}} \
                if event.final else {"delta": event.text}
            await self.emit({"type": kind, "item_id": self.user_item, "content_index": 0,
                             **fields})
        elif isinstance(event, TurnEvent):
            await self._assistant_turn(event)
        elif isinstance(event, AssistantText | AssistantAudio):
            await self._assistant_output(event)
        elif isinstance(event, EngineError):
            await self.error(event.message, "engine_error", kind="server_error")

    async def send_function_call(self, call_id: str, name: str, arguments: str) -> None:
        """The engine calls a client tool: a function_call output item of the current
        response (after its response.created, which may still be on its way)."""
        try:
            await asyncio.wait_for(self.response_open.wait(), 2.0)
        except TimeoutError:
            logger.debug("realtime %s: tool call outside a response", self.id)
        response_id = self.response_id or rt.new_id("resp")
        item = {"id": rt.new_id("item"), "type": "function_call", "call_id": call_id,
                "name": name, "arguments": arguments}
        await self.emit({"type": "response.output_item.added", "response_id": response_id,
                         "output_index": 1, "item": {**item, "status": "in_progress"}})
        await self.emit({"type": "response.function_call_arguments.done",
                         "response_id": response_id, "item_id": item["id"], "output_index": 1,
                         "call_id": call_id, "name": name, "arguments": arguments})
        await self.emit({"type": "response.output_item.done", "response_id": response_id,
                         "output_index": 1, "item": {**item, "status": "completed"}})

    async def _assistant_turn(self, event: TurnEvent) -> None:
        if event.phase == "start":
            self.response_open.set()
            self.response_id, self.reply_item = rt.new_id("resp"), rt.new_id("item")
            await self.emit({"type": "response.created", "response": {
                "id": self.response_id, "object": "realtime.response",
                "status": "in_progress", "output": []}})
            await self.emit({"type": "response.output_item.added", "response_id":
                             self.response_id, "output_index": 0, "item": {
                                 "id": self.reply_item, "type": "message", "role": "assistant",
                                 "status": "in_progress", "content": []}})
            return
        if self.response_id is None:
            return
        status = "cancelled" if event.interrupted else "completed"
        await self.emit({"type": "response.done", "response": {
            "id": self.response_id, "object": "realtime.response", "status": status,
            "output": [{"id": self.reply_item, "type": "message", "role": "assistant",
                        "status": "incomplete" if event.interrupted else "completed",
                        "content": []}]}})
        self.response_id = None
        self.response_open.clear()
        on_turn(self.app, self.stages.pop(event.turn_id, {}), event.interrupted)

    async def _assistant_output(self, event: AssistantText | AssistantAudio) -> None:
        if self.response_id is None or self.reply_item is None:
            return  # output of a reply the client cancelled
        where = {"response_id": self.response_id, "item_id": self.reply_item,
                 "output_index": 0, "content_index": 0}
        if isinstance(event, AssistantText):
            await self.emit({"type": "response.output_audio_transcript.delta", **where,
                             "delta": event.delta})
            return
        samples = self.to_wire.convert(event.samples, event.rate_hz)
        await self.emit({"type": "response.output_audio.delta", **where,
                         "delta": rt.encode_pcm16(samples)})


def _schema(parameters: object) -> dict[str, Any]:
    return dict(parameters) if isinstance(parameters, dict) else {"type": "object",
                                                                   "properties": {}}


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
    model = request.query.get("model")
    refusal = None
    if model is not None and model != config.served_model_name:
        refusal = ("model_not_found", f"model {clip(model)} is not served here; this server "
                   f"serves {config.served_model_name!r}")
    elif len(registry) >= registry.max_sessions:
        refusal = ("server_full", f"server is full ({registry.max_sessions} sessions); try "
                   "another server or later")
    else:
        problem = app[ENGINE_KEY].admission_problem(len(registry))
        if problem is not None:
            refusal = ("server_full", problem)
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
    registry.add(connection)  # type: ignore[arg-type]
    app[METRICS_KEY].calls_started.inc()
    logger.info("realtime session %s opened (%d open)", connection.id, len(registry))
    try:
        await connection.run()
    finally:
        registry.sessions.pop(connection.id, None)
        app[METRICS_KEY].calls.labels(connection.close_reason).inc()
        logger.info("realtime session %s closed", connection.id)
    return ws


def create_engine_app(config: ServerConfig, **kwargs: Any) -> web.Application:
    """The ``serve-engine`` application (same keyword arguments as ``create_app``)."""
    app = web.Application(client_max_size=config.max_body_bytes)
    install_common(app, config, **kwargs)
    app.router.add_get("/v1/realtime", handle_realtime)
    app.router.add_get("/health", handle_health)
    app.router.add_get("/metrics", handle_metrics)
    return app
