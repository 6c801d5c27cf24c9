"""One call: the peer connection, its media plane and its engine session.

Everything a call creates is owned here and released by :meth:`CallSession.close`, which is
idempotent and runs on: the peer leaving (connection closed/failed), no media for
``media_timeout_s`` (a client that vanished without a goodbye), the engine failing for good,
or server shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from aiortc import (
    RTCConfiguration,
    RTCDataChannel,
    RTCIceServer,
    RTCPeerConnection,
    RTCSessionDescription,
)
from aiortc.exceptions import InternalError, InvalidAccessError, InvalidStateError, OperationError
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.rtp import RtpPacket
from aiortc.sdp import SessionDescription

from omnicall.app.access import parse_ice_servers
from omnicall.app.config import ServerConfig
from omnicall.app.events import decode_control, encode, event_message
from omnicall.app.metrics import Metrics, counter_deltas
from omnicall.app.network_quality import NetworkQuality
from omnicall.app.resume import parked_meter
from omnicall.app.store import StoreError, TranscriptStore
from omnicall.app.transcripts import TranscriptFile
from omnicall.engine.base import (
    AssistantAudio,
    AssistantText,
    Engine,
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
from omnicall.engine.tools import ToolRunner
from omnicall.media.aligner import Aligner
from omnicall.media.audio_ring import AudioRing
from omnicall.media.clock import Clock
from omnicall.media.egress import AudioEgress
from omnicall.media.ingest import AudioIngestCore, IngestPump, VideoIngestCore
from omnicall.media.jitter_buffer import JitterBuffer
from omnicall.media.log_limit import LogLimiter, clip
from omnicall.media.negotiated import audio_codecs, opus_payload_types
from omnicall.media.opus_encoder import EncodedAudioTrack
from omnicall.media.opus_receive import OpusPacketDecoder
from omnicall.media.paced_track import PacedAudioTrack
from omnicall.media.playout import PlayoutMeter
from omnicall.media.receive_jitter import ImmediateAudioJitterBuffer, install_low_latency_audio
from omnicall.media.timebase import INPUT_RATE_HZ
from omnicall.media.video_ring import VideoRing

logger = logging.getLogger(__name__)

MAX_CHANNEL_BUFFER_BYTES = 256 * 1024
EARLY_MESSAGES = 64  # page messages kept until the data channel opens
MAX_TYPED_CHARS = 2000
LIVE_SLACK_FRAMES = 8  # realtime engines: queue at most target + 160 ms before dropping
GOODBYE_FLUSH_S = 0.5
class PeerSetupError(ValueError):
    """The offer was parsed but the peer connection could not be set up from it."""


# What applying an offer can raise on a client's SDP: aiortc's own errors, and the plain ones
# its parser and transports raise on input they did not expect.
ACCEPT_ERRORS = (InternalError, InvalidAccessError, InvalidStateError, OperationError,
                 ValueError, TypeError, KeyError, IndexError, AttributeError, AssertionError)
# What closing a half-built peer connection can raise (transports that never started)
CLOSE_ERRORS = (*ACCEPT_ERRORS, RuntimeError, OSError)
# The page hears why the server ended a call; calls the peer ended need no goodbye
GOODBYES = {
    "shutdown": "The server is restarting or shutting down.",
    "engine_error": "The assistant failed and the call was ended. Press Start to try again.",
    "bad_offer": "The call could not be set up.",
}


@dataclass
class SessionTimeouts:
    media_timeout_s: float = 3.0  # connected, but no audio packets this long -> peer gone
    connect_timeout_s: float = 30.0  # never connected -> close
    stats_interval_s: float = 1.0
    reply_timeout_s: float = 20.0  # an assistant reply with no engine event this long: stalled
    network_interval_s: float = 5.0  # WebRTC stats -> network quality histograms


class CallSession:
    def __init__(self, session_id: str, config: ServerConfig, engine: Engine, clock: Clock,
                 on_closed: Callable[[CallSession], None],
                 timeouts: SessionTimeouts | None = None, metrics: Metrics | None = None,
                 on_turn: Callable[[dict[str, float], bool], None] | None = None, *,
                 engine_session: EngineSession | None = None, video_fps: float | None = None,
                 park: Callable[[CallSession], bool] | None = None,
                 store: TranscriptStore | None = None,
                 history: tuple[tuple[str, str], ...] = (),
                 tools: ToolRunner | None = None,
                 transcripts: Path | None = None) -> None:
        """``engine_session``: a parked one to resume (else a new one is opened);
        ``video_fps``: the client's lower frame rate; ``park``: offered the engine session
        when the call drops without a hangup (returns True when it kept it); ``tools``:
        what the assistant may call; ``transcripts``: the --transcripts folder."""
        self.id = session_id
        self.config = config
        self.clock = clock
        self.timeouts = timeouts or SessionTimeouts()
        self._on_closed = on_closed
        self.tasks = TaskOwner(f"call-{session_id}")
        # the server's own ICE servers: none by default (no lookups of a public STUN server)
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[
            RTCIceServer(**server) for server in parse_ice_servers(config.server_ice_servers)]))
        self.channel: RTCDataChannel | None = None
        self._early: deque[dict[str, Any]] = deque(maxlen=EARLY_MESSAGES)
        self.closed = asyncio.Event()
        self._closing = False
        self.dropped_messages = 0
        self.interrupts = 0
        self.turn_origin_s: dict[int, float] = {}
        self.metrics = metrics
        self._on_turn = on_turn
        self.close_reason = "closed"
        self._turn_stages: dict[int, dict[str, float]] = {}
        self._reported: dict[str, int] = {}
        self.log_limit = LogLimiter()
        self.ignored_messages = 0
        self.stalls = 0
        self._reply_open: int | None = None  # turn id of an assistant reply in progress
        self._last_engine_event_s = clock.now()
        self.network = NetworkQuality()

        self.audio_ring = AudioRing()
        self.video_ring = VideoRing()
        self.audio_ingest = AudioIngestCore(self.audio_ring)
        fps = min(config.video_fps, video_fps) if video_fps else config.video_fps
        self.video_fps = fps
        self.video_ingest = VideoIngestCore(
            self.video_ring, fps, (config.video_width, config.video_height),
            lambda: Fraction(self.audio_ring.clock_samples, INPUT_RATE_HZ))
        self.resumed = engine_session is not None or bool(history)
        self._park = park
        self.store = store
        self._reply_text: dict[int, str] = {}  # assistant text per turn, for the store
        # what of each reply left, for the engine session: exists before it is opened
        parked = parked_meter(engine_session)
        self.playout = PlayoutMeter(clock) if parked is None else parked
        self.engine_session = engine_session or engine.open_session(session_id, SessionOptions(
            video_fps=fps, video_size=(config.video_width, config.video_height),
            history=history, tools=tools, playout=self.playout))
        self.transcript = TranscriptFile(transcripts, session_id, engine.name) \
            if transcripts is not None else None
        self.pump = IngestPump(self.audio_ingest, self.video_ingest,
                               Aligner(self.audio_ring, self.video_ring), self.engine_session.push,
                               clock)
        target = config.jitter_frames
        self.jitter = JitterBuffer(
            target_frames=target,
            max_latency_frames=target + LIVE_SLACK_FRAMES if engine.realtime_output else None)
        self.egress = AudioEgress(self.jitter, self.playout)
        self.out_track = PacedAudioTrack(self.jitter, clock, meter=self.playout)
        self.send_track = EncodedAudioTrack(self.out_track)
        self._ingested_kinds: set[str] = set()
        self._audio_in: tuple[ImmediateAudioJitterBuffer, str | None] | None = None
        self.opus_in: OpusPacketDecoder | None = None
        self.ignored_frames = 0

    # -- signaling ---------------------------------------------------------------------
    async def accept(self, offer_sdp: str) -> RTCSessionDescription:
        """Apply the client's offer and return our answer (raises ValueError on bad SDP)."""
        pc = self.pc
        pc.on("track", self._on_track)
        pc.on("datachannel", self._on_datachannel)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
        if any(t.receiver.transport is None for t in pc.getTransceivers()) or (
                pc.sctp is not None and pc.sctp.transport is None):
            raise PeerSetupError("a media section has no transport (check a=group:BUNDLE)")
        sender = pc.addTrack(self.send_track)
        await pc.setLocalDescription(await pc.createAnswer())
        answer = SessionDescription.parse(pc.localDescription.sdp)
        mid = next((t.mid for t in pc.getTransceivers() if t.sender is sender), None)
        self.send_track.use_codec(audio_codecs(answer, mid))
        self._decode_opus_here(answer)
        if self._closing:  # server shutdown while the offer was applied
            raise PeerSetupError("the server closed the call while its offer was applied")
        if pc.connectionState in ("failed", "closed"):  # aiortc gave up on the offer's SDP
            raise PeerSetupError(f"the connection {pc.connectionState} while the offer was "
                                 "applied")
        # watched from here: the caller closes a call whose offer could not be applied
        pc.on("connectionstatechange", self._on_connection_state)
        self.tasks.spawn("events", self._pump_events())
        self.tasks.spawn("watchdog", self._watchdog())
        return pc.localDescription

    def _on_track(self, track: MediaStreamTrack) -> None:
        if self._closing:
            return
        if track.kind in self._ingested_kinds:
            # a second microphone or camera: consumed and dropped (aiortc would otherwise
            # queue its decoded frames without bound)
            logger.info("session %s: ignoring extra %s track", self.id, track.kind)
            self.tasks.spawn(f"drain-{track.kind}", self._drain(track))
            return
        self._ingested_kinds.add(track.kind)
        if track.kind == "audio":
            if self.config.low_latency_receive:
                for transceiver in self.pc.getTransceivers():
                    if transceiver.receiver.track is track:
                        buffer = install_low_latency_audio(transceiver.receiver)
                        if buffer is not None:
                            self._audio_in = (buffer, transceiver.mid)
            self.tasks.spawn("ingest-audio", self.pump.run_audio(track))
        elif track.kind == "video":
            self.tasks.spawn("ingest-video", self.pump.run_video(track))

    def _decode_opus_here(self, answer: SessionDescription) -> None:
        """Once the answer fixed the codecs: the caller's Opus packets skip aiortc's decoder
        thread (:mod:`omnicall.media.opus_receive`); other codecs' packets still take it."""
        if self._audio_in is None:
            return
        buffer, mid = self._audio_in
        opus = opus_payload_types(audio_codecs(answer, mid))
        if not opus:
            return
        decoder = self.opus_in = OpusPacketDecoder()

        def receive(packet: RtpPacket, data: bytes) -> bool:
            if packet.payload_type not in opus:
                return False
            try:
                for frame in decoder.decode(data, packet.timestamp):
                    self.pump.feed_audio(frame)
            except Exception:  # runs inside aiortc's receive path: the call must go on
                logger.exception("session %s: audio ingest failed", self.id)
            return True

        buffer.direct = receive

    async def _drain(self, track: MediaStreamTrack) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                await track.recv()
                self.ignored_frames += 1

    def _on_datachannel(self, channel: RTCDataChannel) -> None:
        self.channel = channel
        channel.on("message", self._on_control)
        self.send({"type": "state", "state": "resumed" if self.resumed else "ready",
                   "session": self.id})
        while self._early:
            self.send(self._early.popleft())

    def _log_ignored(self, key: str, message: str, *args: object) -> None:
        """Log what a client sent at most a few times a minute per kind (no amplification)."""
        self.ignored_messages += 1
        if self.log_limit.allow(key, self.clock.now()):
            suffix = ("; further ones this minute are counted, not logged"
                      if self.log_limit.last_allowed(key) else "")
            logger.info("session %s: " + message + suffix, self.id, *args)

    def _on_control(self, message: str | bytes) -> None:
        """Runs inside aiortc's SCTP loop: nothing a client sends may raise out of here."""
        try:
            self._handle_control(message)
        except Exception:  # a bug here must not end the call from inside aiortc's loop
            logger.exception("session %s: control message handling failed", self.id)

    def _handle_control(self, message: str | bytes) -> None:
        data = decode_control(message)
        if data is None:
            self._log_ignored("malformed", "ignoring a malformed control message (%d bytes)",
                              len(message))
            return
        kind = data["type"]
        if kind in ("interrupt", "stop"):
            self.interrupt()
        elif kind == "ping":
            t = data.get("t")
            self.send({"type": "pong", "t": t if isinstance(t, int | float) else None})
        elif kind == "hangup":
            self.teardown("hangup")
        elif kind == "text":
            self._typed(data.get("text"))
        else:
            self._log_ignored("unknown", "ignoring unknown control message type %s", clip(kind))

    def _typed(self, text: object) -> None:
        """A message typed on the page joins the conversation and is answered."""
        if not isinstance(text, str) or not text.strip():
            self._log_ignored("text", "ignoring an empty or invalid typed message")
            return
        try:
            self.engine_session.send_text(text.strip()[:MAX_TYPED_CHARS])
        except UnsupportedControl as exc:
            self.send({"type": "error", "recoverable": True,
                       "message": f"typed messages are not possible here: {exc}"})

    def _on_connection_state(self) -> None:
        state = self.pc.connectionState
        logger.info("session %s: connection %s", self.id, state)
        if state in ("failed", "closed"):
            self.teardown("peer_failed" if state == "failed" else "peer_closed")

    # -- media and events ----------------------------------------------------------------
    def interrupt(self) -> None:
        """Control path: drop queued audio and stop the reply at once (the audio first: the
        engine's ``interrupt`` may read what of the reply was heard from the playout meter)."""
        self.interrupts += 1
        self.egress.flush()
        self.engine_session.interrupt()

    def send(self, message: dict[str, Any]) -> bool:
        channel = self.channel
        if channel is None and not self._closing:
            # the data channel opens just after the media: what the assistant says first (a
            # greeting) waits for it, in a bounded queue (the oldest dropped, counted)
            if len(self._early) == self._early.maxlen:
                self.dropped_messages += 1
            self._early.append(message)
            return False
        if channel is None or channel.readyState != "open":
            return False
        if channel.bufferedAmount > MAX_CHANNEL_BUFFER_BYTES:
            self.dropped_messages += 1
            return False
        channel.send(encode(message))
        return True

    async def _pump_events(self) -> None:
        async for event in self.engine_session.events():
            await self._route(event)

    async def _route(self, event: EngineEvent) -> None:
        self._last_engine_event_s = self.clock.now()
        if isinstance(event, TurnEvent) and event.role == "assistant":
            self._reply_open = event.turn_id if event.phase == "start" else None
        if isinstance(event, AssistantAudio):
            await self.egress.write(event.samples, event.rate_hz, turn_id=event.turn_id)
            return
        if isinstance(event, TurnEvent) and event.role == "assistant" and event.phase == "end":
            if event.interrupted:
                self.egress.flush()
            else:
                self.egress.end_utterance()
        origin = None
        if isinstance(event, StageTiming):
            origin = self.turn_origin_s.setdefault(event.turn_id, event.at_s)
            self._turn_stages.setdefault(event.turn_id, {})[event.stage] = event.at_s
            for kept in (self.turn_origin_s, self._turn_stages):
                while len(kept) > 16:
                    kept.pop(next(iter(kept)))
        if self.store is not None:
            await self._record(event)
        if self.transcript is not None:
            self.transcript.feed(event)
        if isinstance(event, TurnEvent) and event.role == "assistant" and event.phase == "end":
            stages = self._turn_stages.pop(event.turn_id, {})
            if self._on_turn is not None:
                self._on_turn(stages, event.interrupted)
        message = event_message(event, origin)
        if message is not None:
            self.send(message)
        if isinstance(event, EngineError) and not event.recoverable:
            logger.error("session %s: engine failed: %s", self.id, event.message)
            self.teardown("engine_error")

    async def _record(self, event: EngineEvent) -> None:
        """Keep the conversation in the transcript store (a resume may land elsewhere)."""
        assert self.store is not None
        item: tuple[str, str] | None = None
        if isinstance(event, UserTranscript) and event.final and event.text.strip():
            item = ("user", event.text)
        elif isinstance(event, AssistantText):
            text = self._reply_text.get(event.turn_id, "") + event.delta
            self._reply_text[event.turn_id] = text[-4000:]
            while len(self._reply_text) > 4:
                self._reply_text.pop(next(iter(self._reply_text)))
        elif isinstance(event, TurnEvent) and event.role == "assistant" and event.phase == "end":
            text = self._reply_text.pop(event.turn_id, "").strip()
            if text:
                item = ("assistant", text + (" ..." if event.interrupted else ""))
        if item is None:
            return
        try:
            await self.store.append(self.id, *item)
        except StoreError as exc:
            self._log_ignored("store", "transcript not stored: %s", clip(str(exc)))

    def buffer_frames(self) -> dict[str, int]:
        return {"audio_ring": len(self.audio_ring), "video_ring": len(self.video_ring),
                "jitter_buffer": len(self.jitter)}

    def stats(self) -> dict[str, Any]:
        return {
            "type": "stats",
            "audio_units": self.pump.units_out,
            "audio_ring": len(self.audio_ring),
            "audio_ring_dropped": self.audio_ring.dropped_frames,
            "ingest_refusals": self.pump.refusals,
            "video_sampled": self.video_ingest.sampled_frames,
            "video_dropped": self.video_ring.dropped_frames,
            "jitter_frames": len(self.jitter),
            "underruns": self.jitter.underruns,
            "late_frames": self.out_track.late_frames,
            "sent_frames": self.out_track.sent_frames,
            "silence_frames": self.out_track.silence_frames,
        }

    async def _watchdog(self) -> None:
        started = self.clock.now()
        while True:
            await self.clock.sleep(self.timeouts.stats_interval_s)
            now = self.clock.now()
            connected = self.pc.connectionState == "connected"
            if not connected and now - started > self.timeouts.connect_timeout_s:
                logger.warning("session %s: not connected after %.0f s; closing", self.id,
                               now - started)
                self.close_reason = "connect_timeout"
                break
            last_audio_s = max(self.pump.last_audio_s, started)
            if connected and now - last_audio_s > self.timeouts.media_timeout_s:
                logger.warning("session %s: no audio for %.1f s; closing", self.id,
                               now - last_audio_s)
                self.close_reason = "media_timeout"
                break
            if self._reply_open is not None and (
                    now - self._last_engine_event_s > self.timeouts.reply_timeout_s):
                self._on_stall(self._reply_open, now - self._last_engine_event_s)
            if now - self.network.sampled_at_s >= self.timeouts.network_interval_s and connected:
                await self._sample_network(now)
            stats = self.stats()
            self._report(stats)
            self.send(stats)
        self.teardown()

    def _on_stall(self, turn_id: int, quiet_s: float) -> None:
        """The engine went quiet mid-reply: cancel the reply, tell the page, keep the call."""
        logger.error("session %s: reply %d made no progress for %.1f s; cancelling it",
                     self.id, turn_id, quiet_s)
        self.stalls += 1
        self._reply_open = None
        if self.metrics is not None:
            self.metrics.stalls.inc()
        self.interrupt()
        self.send({"type": "error", "recoverable": True,
                   "message": "the assistant stopped answering; please ask again"})
        self.send({"type": "turn", "role": "assistant", "phase": "end", "turn": turn_id,
                   "interrupted": True})

    async def _sample_network(self, now: float) -> None:
        try:
            report = await asyncio.wait_for(self.pc.getStats(), 1.0)
        except (TimeoutError, *CLOSE_ERRORS) as exc:
            logger.debug("session %s: no WebRTC stats: %s", self.id, exc)
            return
        sample = self.network.update(report.values(), now)
        if self.metrics is not None:
            self.metrics.observe_network(sample)

    # -- teardown ----------------------------------------------------------------------
    def _report(self, stats: dict[str, Any]) -> None:
        if self.metrics is not None:
            self.metrics.add_media(counter_deltas(stats, self._reported))

    def teardown(self, reason: str | None = None) -> None:
        """Start closing from a callback or a task of this session (no-op if closing)."""
        if not self._closing:
            if reason is not None:
                self.close_reason = reason
            self.tasks.spawn("teardown", self.close())

    async def _say_goodbye(self) -> None:
        """Tell the page why the server ends the call, and give the message a moment to go."""
        text = GOODBYES.get(self.close_reason)
        if text is None or not self.send({"type": "goodbye", "reason": self.close_reason,
                                          "message": text}):
            return
        for _ in range(int(GOODBYE_FLUSH_S / 0.02)):  # until SCTP sent it, or 0.5 s
            await asyncio.sleep(0.02)
            if self.channel is None or self.channel.bufferedAmount == 0:
                break
        await asyncio.sleep(0.05)  # the SCTP packet leaves before the transport closes

    async def _close_peer(self) -> None:
        """Close the peer connection, also one that an offer left half-built: whatever
        ``pc.close()`` cannot stop, each transport is stopped on its own (no socket leaks)."""
        try:
            await asyncio.wait_for(self.pc.close(), self.config.shutdown_timeout_s)
            return
        except TimeoutError:
            logger.error("session %s: peer connection did not close in time", self.id)
        except CLOSE_ERRORS as exc:
            logger.info("session %s: peer connection close failed (%s: %s); stopping its "
                        "transports one by one", self.id, type(exc).__name__, clip(str(exc)))
        transports: list[Any] = []
        for transceiver in self.pc.getTransceivers():
            for dtls in {transceiver.sender.transport, transceiver.receiver.transport}:
                if dtls is not None:
                    transports += [dtls, dtls.transport]
        sctp = self.pc.sctp
        if sctp is not None and sctp.transport is not None:
            transports += [sctp, sctp.transport, sctp.transport.transport]
        for transport in transports:
            stop = getattr(transport, "stop", None) or getattr(transport, "close", None)
            if stop is None:
                continue
            try:
                await asyncio.wait_for(stop(), 1.0)
            except (TimeoutError, *CLOSE_ERRORS) as exc:
                logger.debug("session %s: stopping %s: %s", self.id, type(transport).__name__,
                             exc)

    async def close(self) -> None:
        if self._closing:
            await self.closed.wait()
            return
        self._closing = True
        logger.info("session %s: closing (%s)", self.id, self.close_reason)
        try:
            await self._say_goodbye()
            await self.tasks.close(self.config.shutdown_timeout_s)
            self.send_track.stop()
            if self._park is None or not self._park(self):
                await self.engine_session.close()
            if self.store is not None and self.close_reason == "hangup":
                try:
                    await self.store.delete(self.id)  # a hangup is final
                except StoreError as exc:
                    logger.warning("session %s: transcript not deleted: %s", self.id, exc)
            await self._close_peer()
        finally:
            if self.transcript is not None:
                self.transcript.close(self.close_reason)
            self._report(self.stats())
            if self.metrics is not None:
                self.metrics.calls.labels(self.close_reason).inc()
            self.closed.set()
            self._on_closed(self)
