"""One call on a remote model server, over the OpenAI Realtime protocol.

Audio units (80 ms, 16 kHz) go up as 24 kHz PCM16 ``input_audio_buffer.append``; server
events come back typed (``openai`` package models) and become omnicall engine events:
audio deltas -> 24 kHz :class:`AssistantAudio` for the playout queue, transcript and text
deltas -> captions, speech started/stopped/committed -> turns and stage timings (the page's
latency chart), and a barge-in truncates the reply at the milliseconds actually played
(the reply's end carries them: ``TurnEvent.heard_ms``).

Camera frames follow the shared frame policy through each turn
(:mod:`omnicall.engine.remote.images`): a unit's frame that the policy picks goes up at once
as an ``input_image`` item (about 1 fps while the user speaks, 0.1 fps otherwise), the
turn's freshest frame goes at its end (before ``response.create`` when omnicall ends turns)
unless the server has it already, and images past the policy's ``max_images`` are deleted
from the server's conversation (``conversation.item.delete``). Time is the media clock
(unit index x 80 ms). A server that refuses an image gets none for the rest of the call.

Turns are ended by the server's VAD (``turn_mode="server"``) or by omnicall's own turn
detector (``"local"``: commit + ``response.create``). If the server drops the call, the
session moves to another server of the pool, replays the conversation as text items and
goes on; the reply that was cut is not spoken again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

import aiohttp
from openai.types import realtime as rt_types

from omnicall.engine import realtime as rt
from omnicall.engine.base import SessionOptions
from omnicall.engine.conversation.backchannels import Heard
from omnicall.engine.conversation.camera import Sighting, seen_event
from omnicall.engine.conversation.listener import Listener
from omnicall.engine.conversation.replies import Replies, Reply
from omnicall.engine.events import (
    AssistantAudio,
    AssistantText,
    EngineError,
    StageTiming,
    ToolCall,
    TurnEvent,
    UserTranscript,
)
from omnicall.engine.queued_session import AudioAhead, QueuedEngineSession
from omnicall.engine.remote.handshake import open_session
from omnicall.engine.remote.images import RemoteImages
from omnicall.engine.remote.runtime import RemoteRuntime
from omnicall.engine.tools import ToolOutcome
from omnicall.media.aligner import MediaUnit
from omnicall.media.log_limit import LogLimiter, clip
from omnicall.media.resample import Int16Array, StreamConverter
from omnicall.media.timebase import INPUT_FRAME_SAMPLES, INPUT_RATE_HZ

logger = logging.getLogger(__name__)

MAX_HISTORY_ITEMS = 40
MAX_GARBAGE_EVENTS = 50  # unparseable server events before the server counts as broken
MAX_TURN_WORDS_CHARS = 4000  # the turn's transcript deltas kept for the frame policy
UNIT_S = INPUT_FRAME_SAMPLES / INPUT_RATE_HZ  # the media clock: one unit is 80 ms


@dataclass
class ReplyWork:
    """What the front-end follows of a server's reply, beside its life (the conversation
    layer's :class:`~omnicall.engine.conversation.replies.Reply`): the server's ids, so a
    reply cut short can be truncated there (``conversation.item.truncate``)."""

    response_id: str = ""
    item_id: str = ""
    delivered_samples: int = 0  # audio received, at the Realtime rate
    first_text: bool = True
    #: the server cut it itself (its VAD heard the caller): no response.cancel to send
    server_cut: bool = False


RemoteReply = Reply[ReplyWork]


class NoServer(ConnectionError):
    """No model server of the pool took the call."""


@dataclass
class Connection:
    ws: aiohttp.ClientWebSocketResponse
    url: str
    generation: int
    reader: asyncio.Task[Any] | None = None
    closing: bool = False
    sent_ms: float = 0.0  # input audio sent on this connection (the server's audio clock)


class RemoteSession(QueuedEngineSession):
    def __init__(self, session_id: str, options: SessionOptions, runtime: RemoteRuntime
                 ) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.history: list[tuple[str, str]] = list(options.history)[-MAX_HISTORY_ITEMS:]
        self.to_wire = StreamConverter(rt.REALTIME_RATE_HZ)
        self.conn: Connection | None = None
        self.generation = 0
        self.replies: Replies[ReplyWork] = Replies(self, self, runtime.clock, options.playout)
        self.user_turn_open = False
        #: the camera: frames to the server, their items, whether it refuses images
        self.images = RemoteImages(self.settings.camera, self.settings.remote_video)
        self.media_s = 0.0  # the latest unit's time on the media clock (index x 80 ms)
        self.turn_words = ""  # the user's words in this turn so far (transcript deltas)
        #: ``--turn-mode local``: omnicall's listener ends turns (commit + response.create)
        self.listener = Listener(runtime.listening, self, session_id, self.replies)
        self.failovers = 0
        self.garbage_events = 0
        self.truncations: list[int] = []  # audio_end_ms sent
        self.truncated_acks: list[int] = []  # ... and confirmed by the server
        self.log_limit = LogLimiter()
        self._connect_lock = asyncio.Lock()
        super().__init__(session_id, options)

    def now(self) -> float:
        return self.runtime.clock.now()

    @property
    def video(self) -> bool:
        """Whether camera frames go to the model server (on, and not refused)."""
        return self.images.on

    # -- connecting ---------------------------------------------------------------------
    async def _connect(self, avoid: str | None = None) -> None:
        """Open a Realtime session on the best server of the pool (replaying history)."""
        pool = self.runtime.pool
        errors = []
        for url in pool.candidates(self.now(), avoid=avoid):
            try:
                ws = await open_session(self.runtime.http, url, self.settings,
                                        self.options.tools, self.history)
            except (aiohttp.ClientError, OSError, TimeoutError, rt.ProtocolError) as exc:
                pool.failed(url, self.now())
                errors.append(f"{url}: {clip(str(exc) or type(exc).__name__)}")
                logger.warning("model server %s refused: %s", url,
                               exc)
                continue
            pool.opened(url)
            self.generation += 1
            conn = Connection(ws, url, self.generation)
            self.conn = conn
            self.images.new_connection()
            conn.reader = self.tasks.spawn(f"read-{self.generation}", self._read(conn))
            return
        raise NoServer("no model server took the call: " + "; ".join(errors))

    async def _connect_or_say(self, avoid: str | None = None) -> bool:
        """Connect; when no server takes the call, say so (the call cannot go on)."""
        try:
            await self._connect(avoid=avoid)
        except NoServer as exc:
            await self.emit(EngineError(f"the assistant is unavailable: {exc}",
                                        recoverable=False))
            return False
        return True

    async def _failover(self, lost: Connection, reason: str) -> None:
        """The server dropped the call: move it to another server and go on."""
        async with self._connect_lock:
            if self.conn is not lost or self.state.closed:
                return  # already moved (the reader and the sender both noticed)
            self.runtime.pool.failed(lost.url, self.now())
            self.runtime.pool.closed(lost.url)
            self.conn = None
            self.failovers += 1
            logger.warning("model server %s lost (%s); moving the call",
                           lost.url, reason)
            cut = self.replies.live()
            if cut is not None:  # the reply that was cut is not spoken again
                cut.work.server_cut, cut.work.item_id = True, ""  # that server is gone
                await self.emit(self.replies.cut(cut, flush=False))
            if not await self._connect_or_say(avoid=lost.url):
                return
            await self.emit(EngineError("the assistant moved to another server; the "
                                        "conversation goes on", recoverable=True))

    # -- sending ------------------------------------------------------------------------
    async def _send(self, event: Any) -> bool:
        """Send a client event; False when it did not go (no server, or the send failed:
        then the call moves to another server)."""
        conn = self.conn
        if conn is None:
            return False
        try:
            await conn.ws.send_str(rt.dump(event))
        except (ConnectionError, aiohttp.ClientError, RuntimeError) as exc:
            await self._failover(conn, f"send failed: {exc}")
            return False
        return True

    async def process(self) -> None:
        async with self._connect_lock:
            if not await self._connect_or_say():
                return
        while True:
            unit = await self.next_unit()
            await self._on_unit(unit)

    @property
    def hears_ahead(self) -> bool:
        """--turn-mode local: the listener ends turns (the audio still goes whole units)."""
        return self.settings.turn_mode == "local" and self.runtime.listening.listen_ahead

    async def hear_ahead(self, ahead: AudioAhead) -> None:
        await self.listener.hear_ahead(ahead.index, ahead.offset, ahead.samples)

    async def _on_unit(self, unit: MediaUnit) -> None:
        self.media_s = unit.index * UNIT_S
        if unit.video is not None:
            sighting = self.images.see(unit.video, self.media_s, self.user_turn_open)
            if sighting is not None:  # the early send: while the user may still be speaking
                await self._show(sighting)
        await self._send(rt.audio_append(self.to_wire.convert(unit.audio,
                                                                    INPUT_RATE_HZ)))
        if self.conn is not None:
            self.conn.sent_ms += len(unit.audio) * 1000 / INPUT_RATE_HZ
        if self.settings.turn_mode == "local":
            await self.listener.feed(unit.audio, unit.filled, unit.index)

    # -- the listener's hooks (--turn-mode local) ----------------------------------------
    async def on_speech_start(self) -> None:
        await self._user_started()

    async def on_end_of_turn(self, speech_end_s: float) -> None:
        await self.emit(StageTiming(self.state.turn_id, "speech_end", speech_end_s))
        await self._user_ended()
        await self._send(rt.commit())
        await self._send(rt.response_create())

    async def on_audio(self, audio: Int16Array) -> None:
        """Nothing: every unit is appended to the server's buffer as it comes."""

    async def on_lull(self) -> None:
        """Nothing: the server hears the audio as it comes."""

    async def on_pause(self) -> None:
        """Nothing: the server makes the reply at the commit (no speculation)."""

    async def on_resume(self) -> None:
        """Nothing to drop (no speculation)."""

    async def hear_words(self, samples: Int16Array) -> Heard | None:
        """None: no local ASR here; the sound over a reply interrupts it."""
        return None

    def addressed(self, since_s: float) -> bool:
        """Every voice (the camera's addressee is the cascade's)."""
        return True

    async def _user_started(self) -> None:
        reply = self.replies.live()
        if reply is not None:  # the server's VAD heard the caller over the reply
            reply.work.server_cut = True
            await self.replies.barge_in()
        self.state.turn_id += 1
        self.user_turn_open = True
        self.turn_words = ""
        await self.emit(TurnEvent("user", "start", self.state.turn_id))
        await self.emit(StageTiming(self.state.turn_id, "speech_start", self.now()))

    async def _user_ended(self) -> None:
        if self.user_turn_open:
            self.user_turn_open = False
            await self.emit(StageTiming(self.state.turn_id, "end_of_turn", self.now()))
            await self.emit(TurnEvent("user", "end", self.state.turn_id))
            # the turn's freshest frame, unless the server has it (before response.create)
            sighting = self.images.end_turn(self.media_s, self.turn_words,
                                            self.settings.language)
            if sighting is not None:
                await self._show(sighting)

    async def _show(self, sighting: Sighting) -> None:
        """A frame to the server now; the page is told (a thumbnail); images past the
        retention bound are deleted from the server's conversation."""
        item = self.images.item(sighting)
        if await self._send(item):
            self.images.sent(sighting, item)
            await self.emit(seen_event(self.state.turn_id, sighting))
        for delete in self.images.deletes():  # the policy's bound holds, sent or not
            await self._send(delete)

    # -- a reply's life: the conversation layer's (engine.conversation.replies) -------------
    def stop_reply(self, reply: RemoteReply) -> None:
        """The server stops making it (unless its VAD cut it already) and keeps what the
        caller heard of it (``conversation.item.truncate``)."""
        work = reply.work
        if reply.heard_ms is None:
            return
        sends: list[Any] = [] if work.server_cut else [rt.response_cancel()]
        if work.item_id and reply.gate.first_audio_at is not None:
            self.truncations.append(reply.heard_ms)
            sends.append(rt.truncate(work.item_id, reply.heard_ms))
        if sends:
            self.tasks.spawn(f"cut-{reply.turn_id}", self._send_all(sends))

    async def _send_all(self, events: list[Any]) -> None:
        for event in events:
            await self._send(event)

    def remember_reply(self, reply: RemoteReply) -> None:
        if reply.heard_ms is None:
            self._remember("assistant", reply.text)
            return
        heard = reply.heard_text(reply.heard_ms / 1000)
        self._remember("assistant", heard + (" ..." if heard else ""))

    # -- receiving ----------------------------------------------------------------------
    async def _read(self, conn: Connection) -> None:
        ws = conn.ws
        async for message in ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            try:
                event = rt.parse_server_event(message.data)
            except rt.ProtocolError as exc:
                self.garbage_events += 1
                if self.log_limit.allow("garbage", self.now()):
                    logger.warning("unreadable event from %s: %s", conn.url, exc)
                if self.garbage_events >= MAX_GARBAGE_EVENTS:
                    await ws.close()
                    break
                continue
            await self._on_event(event)
        if not conn.closing and not self.state.closed:
            self.tasks.spawn(f"failover-{conn.generation}",
                             self._failover(conn, f"connection closed ({ws.close_code})"))

    async def _on_event(self, event: Any) -> None:
        match event:
            case rt_types.InputAudioBufferSpeechStartedEvent():
                if self.settings.turn_mode == "server":
                    await self._user_started()
            case rt_types.InputAudioBufferSpeechStoppedEvent():
                if self.settings.turn_mode == "server":
                    # audio_end_ms is on the server's input clock: speech ended that long
                    # before the audio sent so far
                    now = self.now()
                    sent_ms = self.conn.sent_ms if self.conn is not None else 0.0
                    behind_s = max(0.0, (sent_ms - event.audio_end_ms) / 1000)
                    await self.emit(StageTiming(self.state.turn_id, "speech_end",
                                                now - min(behind_s, 10.0)))
            case rt_types.InputAudioBufferCommittedEvent():
                if self.settings.turn_mode == "server":
                    await self._user_ended()
            case rt_types.ConversationItemInputAudioTranscriptionCompletedEvent():
                await self.emit(UserTranscript(event.transcript, True, self.state.turn_id))
                self._remember("user", event.transcript)
                if self.user_turn_open:
                    self.turn_words = event.transcript[-MAX_TURN_WORDS_CHARS:]
            case rt_types.ConversationItemInputAudioTranscriptionDeltaEvent():
                if event.delta:
                    await self.emit(UserTranscript(event.delta, False, self.state.turn_id))
                    if self.user_turn_open:
                        self.turn_words = (self.turn_words + event.delta)[-MAX_TURN_WORDS_CHARS:]
            case rt_types.ResponseCreatedEvent():
                await self._user_ended()
                self.replies.new(self.state.turn_id, ReplyWork(event.response.id or ""))
                await self.emit(TurnEvent("assistant", "start", self.state.turn_id))
            case rt_types.ResponseOutputItemAddedEvent():
                reply = self.replies.live()
                if reply is not None and not reply.work.item_id:
                    reply.work.item_id = getattr(event.item, "id", None) or ""
            case rt_types.ResponseAudioTranscriptDeltaEvent() | rt_types.ResponseTextDeltaEvent():
                await self._text(event.delta, event.item_id)
            case rt_types.ResponseAudioDeltaEvent():
                await self._audio(event.delta, event.item_id)
            case rt_types.ResponseDoneEvent():
                await self._done(event.response.status == "cancelled")
            case rt_types.RealtimeErrorEvent():
                await self._error(event.error)
            case rt_types.ConversationItemTruncatedEvent():
                self.truncated_acks.append(event.audio_end_ms)
            case rt_types.ConversationItemDeletedEvent():
                self.images.deleted()
            case rt_types.ResponseFunctionCallArgumentsDoneEvent():
                self.tasks.spawn(f"tool-{event.call_id[:24]}", self._call_tool(event))
            case _:
                pass

    def _current(self, item_id: str) -> RemoteReply | None:
        reply = self.replies.live()
        if reply is None:
            return None  # output of a reply that was barged in on or cancelled
        if not reply.work.item_id:
            reply.work.item_id = item_id
        return reply

    async def _text(self, delta: str, item_id: str) -> None:
        reply = self._current(item_id)
        if reply is None:
            return
        if reply.work.first_text:
            reply.work.first_text = False
            await self.emit(StageTiming(reply.turn_id, "llm_first_token", self.now()))
        reply.text += delta
        await self.emit(AssistantText(delta, reply.turn_id))

    async def _audio(self, delta: str, item_id: str) -> None:
        reply = self._current(item_id)
        if reply is None:
            return
        samples = rt.decode_pcm16(delta)
        await reply.gate.out(AssistantAudio(samples, rt.REALTIME_RATE_HZ,
                                            reply.work.delivered_samples, reply.turn_id))
        reply.work.delivered_samples += len(samples)
        reply.audio_s = reply.work.delivered_samples / rt.REALTIME_RATE_HZ

    async def _done(self, cancelled: bool) -> None:
        """The server ended its reply: whole, or cancelled by the server (then cut where
        the caller is)."""
        reply = self.replies.live()
        if reply is None:
            return
        if cancelled:
            reply.work.server_cut = True
            await self.emit(self.replies.cut(reply, flush=False))
        else:
            await self.replies.end(reply)

    async def _error(self, error: Any) -> None:
        kind = self.images.on_error(error)
        if kind == "images_refused":
            logger.warning("the model server refuses images (%s); this call goes "
                           "on audio only", clip(error.message))
            await self.emit(EngineError("the model server does not accept video: the "
                                        "assistant hears you but cannot see", recoverable=True))
            return
        if kind == "deletes_refused":
            logger.warning("the model server does not delete items (%s); older "
                           "images stay in its conversation", clip(error.message))
            return
        if kind == "ours":
            return
        if self.log_limit.allow("server-error", self.now()):
            logger.warning("model server error %s: %s", error.code, clip(error.message))
        await self.emit(EngineError(f"model server: {error.message[:200]}", recoverable=True))

    async def _call_tool(self, event: rt_types.ResponseFunctionCallArgumentsDoneEvent) -> None:
        """The model asked for a tool: run it here (the operator's --tools), send the result
        back and ask for the answer. Errors go back as the result, and the model apologizes."""
        tools = self.options.tools
        turn_id = self.state.turn_id
        try:
            arguments = json.loads(event.arguments or "{}")
        except json.JSONDecodeError:
            arguments = None
        if tools is None:
            outcome = ToolOutcome(event.call_id, event.name, {}, error="no tools here")
        elif not isinstance(arguments, dict):
            outcome = ToolOutcome(event.call_id, event.name, {},
                                  error="the arguments were not a JSON object")
        else:
            outcome = await tools.call(event.call_id, event.name, arguments)
        await self.emit(ToolCall(turn_id, outcome.call_id, outcome.name, outcome.arguments,
                                 outcome.output, outcome.error, outcome.ms))
        result = outcome.output if outcome.ok else f"error: {outcome.error}"
        await self._send(rt.function_output_item(event.call_id, result))
        await self._send(rt.response_create())

    # -- the conversation ---------------------------------------------------------------
    def _remember(self, role: str, text: str) -> None:
        if text.strip():
            self.history.append((role, text.strip()))
            del self.history[:-MAX_HISTORY_ITEMS]

    # -- control path -------------------------------------------------------------------
    def interrupt(self) -> None:
        self.flush_events()
        self.replies.interrupt(committed_only=False)

    def send_text(self, text: str) -> None:
        self.tasks.spawn("typed", self._typed(text))

    async def _typed(self, text: str) -> None:
        self._remember("user", text)
        await self._send(rt.message_item("user", text))
        await self._send(rt.response_create())

    def add_message(self, role: str, text: str) -> None:
        self._remember(role, text)
        self.tasks.spawn("history", self._send(rt.message_item(role, text)))

    async def close(self) -> None:
        conn = self.conn
        if conn is not None:
            conn.closing = True
        await super().close()
        self.runtime.listening.drop_session(self.session_id)
        if conn is not None:
            self.runtime.pool.closed(conn.url)
            await conn.ws.close()
