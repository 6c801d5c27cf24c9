"""One call: the peer connection, its media plane and its engine session.

Everything a call creates is owned here and released by :meth:`CallSession.close`, which is
idempotent and runs on: the peer leaving (connection closed/failed), no media for
``media_timeout_s`` (a client that vanished without a goodbye), the engine failing for good,
or server shutdown.

Its parts: the peer connection (:mod:`omnicall.app.call.peer`), the media in and out
(:class:`~omnicall.media.call_input.CallInput`: receive, ingest, rings, aligner, into the
engine session; :class:`~omnicall.media.call_output.CallOutput`: egress, playout queue, paced
track, Opus encoder, playout meter, from it), the data channel and its controls
(:mod:`omnicall.app.call.control_channel`, :mod:`omnicall.app.turns.user_controls`), the
engine's events (:mod:`omnicall.app.turns.event_pump`, routed by :meth:`CallSession._route`),
the watchdog's verdicts (:mod:`omnicall.app.call.watchdog`) and the conversation kept for a resume
(:mod:`omnicall.app.storage.stored_conversation`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from aiortc import RTCDataChannel, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from omnicall.app.call.control_channel import ControlChannel
from omnicall.app.call.messages import event_message
from omnicall.app.call.peer import (
    CLOSE_ERRORS,
    PeerSetupError,
    answer_offer,
    check_answered,
    close_peer,
    new_peer_connection,
)
from omnicall.app.call.watchdog import CallWatchdog
from omnicall.app.calls import ParkedCall, SessionTimeouts
from omnicall.app.config import ServerConfig
from omnicall.app.metrics import Metrics, counter_deltas
from omnicall.app.network_quality import NetworkQuality
from omnicall.app.storage.recordings import start_recording
from omnicall.app.storage.store import StoreError, TranscriptStore
from omnicall.app.storage.stored_conversation import StoredConversation
from omnicall.app.storage.transcripts import TranscriptFile
from omnicall.app.tracing import CallTrace
from omnicall.app.turns.event_pump import EventPump
from omnicall.app.turns.user_controls import UserControls
from omnicall.engine.base import Engine, InterruptBy, InterruptRule, SessionOptions
from omnicall.engine.events import EngineError, EngineEvent, StageTiming
from omnicall.engine.tasks import TaskOwner
from omnicall.engine.tools import ToolRunner
from omnicall.media.call_input import CallInput
from omnicall.media.call_output import CallOutput
from omnicall.media.clock import Clock
from omnicall.media.echo_canceller import EchoCanceller, RoomSettings
from omnicall.media.log_context import call_context
from omnicall.media.log_limit import clip
from omnicall.media.negotiated import audio_codecs
from omnicall.media.opus_receive import OpusPacketDecoder
from omnicall.media.playout import PlayoutMeter

logger = logging.getLogger(__name__)

GOODBYE_FLUSH_S = 1.0  # a goodbye's wait for the page's acknowledgement (a loaded server)
NETWORK_STATS_TIMEOUT_S = 1.0
# The page hears why the server ended a call; calls the peer ended need no goodbye
GOODBYES = {
    "shutdown": "The server is restarting or shutting down.",
    "engine_error": "The assistant failed and the call was ended. Press Start to try again.",
    "bad_offer": "The call could not be set up.",
}


#: frames a second sampled from the camera when the assistant answers the person facing it:
#: the page's rate, so a short question's moving mouth is seen in several frames
ADDRESSEE_FPS = 5.0


def listening_to(addressee: str, config: ServerConfig) -> str:
    """Whose words a call's assistant answers (``addressee``: ``ServerConfig.addressee_for``;
    the cascade engine's rule, the only one that tells voices apart)."""
    if config.engine != "cascade" or addressee == "any":
        return "any"
    if addressee == "auto":
        return "wake" if config.cascade.wake_phrase.strip() else "any"
    return addressee


class CallSession:
    def __init__(self, session_id: str, config: ServerConfig, engine: Engine, clock: Clock,
                 on_closed: Callable[[CallSession], None],
                 timeouts: SessionTimeouts | None = None, metrics: Metrics | None = None,
                 on_turn: Callable[[dict[str, float], bool], None] | None = None, *,
                 resume: ParkedCall | None = None, video_fps: float | None = None,
                 room: RoomSettings | None = None,
                 interrupt_by: InterruptBy | Literal["echo"] = "sound",
                 addressee: str = "auto",
                 park: Callable[[CallSession], bool] | None = None,
                 store: TranscriptStore | None = None,
                 history: tuple[tuple[str, str], ...] = (),
                 tools: ToolRunner | None = None,
                 transcripts: Path | None = None, recordings: Path | None = None,
                 trace: CallTrace | None = None) -> None:
        """``resume``: a dropped call's engine session and playout meter to go on with
        (else a new engine session is opened);
        ``video_fps``: the client's lower frame rate; ``room``: the echo canceller and noise
        suppressor on the caller's audio (``ServerConfig.room_settings``; None: neither);
        ``addressee``: who the assistant talks to (``ServerConfig.addressee_for``);
        ``park``: offered the engine session
        when the call drops without a hangup (returns True when it kept it); ``tools``:
        what the assistant may call; ``transcripts``: the --transcripts folder;
        ``recordings``: the --record folder (None: not recorded); ``trace``: this call's
        OpenTelemetry trace (--otel-endpoint; None: not traced)."""
        self.id = session_id
        self.config = config
        #: whose words are answered, as the page shows it: 'camera', 'wake' or 'any'
        self.listening_to = listening_to(addressee, config)
        self.clock = clock
        self.timeouts = timeouts or SessionTimeouts()
        self._on_closed = on_closed
        self.tasks = TaskOwner(f"call-{session_id}")
        self.pc = new_peer_connection(config.server_ice_servers)
        self.closed = asyncio.Event()
        self._closing = False
        self.metrics = metrics
        self.close_reason = "closed"
        self._reported: dict[str, int] = {}
        self.watchdog = CallWatchdog(self.timeouts, clock.now())
        self.network = NetworkQuality()

        fps = config.video_fps
        if self.listening_to == "camera":  # whose mouth moves: the page's whole rate
            fps = max(fps, ADDRESSEE_FPS)
        fps = min(fps, video_fps) if video_fps else fps
        self.video_fps = fps
        self.resumed = resume is not None or bool(history)
        self._park = park
        self.store = store
        self.stored = StoredConversation()
        # the room: one echo canceller, its reference from the output, cleaning the input
        self.room = EchoCanceller(room) if room is not None and room.any else None
        # --record: both sides on the call's clock, and the transcript beside them
        self.recorded = start_recording(recordings, session_id, engine.name, clock) \
            if recordings is not None else None
        heard = None if self.recorded is None else self.recorded.audio
        # media out: what of each reply left is measured into the meter the engine session
        # reads (a resumed one's own: its options cannot change)
        self.output = CallOutput(clock, PlayoutMeter(clock) if resume is None else resume.meter,
                                 target_frames=config.jitter_frames, live=engine.realtime_output,
                                 room=self.room, hold_ducked=config.duck == "pause",
                                 record=None if heard is None else heard.assistant)
        self.engine_session = resume.engine_session if resume is not None else \
            engine.open_session(session_id, SessionOptions(
                history=history, tools=tools, playout=self.output.meter,
                interrupt_by=self._interrupt_rule(interrupt_by), addressee=addressee))
        self.transcript = TranscriptFile(transcripts, session_id, engine.name) \
            if transcripts is not None else None
        # media in; --no-video: no video core, so no frame could reach the engine
        self.input = CallInput(self.engine_session.push, clock,
                               ahead=self.engine_session.listen_ahead,
                               video_fps=fps if config.video else None,
                               video_size=(config.video_width, config.video_height),
                               low_latency=config.low_latency_receive, room=self.room,
                               record=None if heard is None else heard.caller)
        # the page's stop control: the engine cuts its reply, whose sound handle stops it;
        # then the sound still queued of a reply the engine already ended
        self.controls = UserControls(self.engine_session, flush_sound=self.output.stop)
        self.control = ControlChannel(clock, self.controls,
                                      lambda: self.teardown("hangup"))
        self.trace = trace
        self.events = EventPump(self._route, on_turn, trace=trace)
        self._ingested_kinds: set[str] = set()
        self.ignored_frames = 0

    # -- what tests and metrics read -----------------------------------------------------
    @property
    def channel(self) -> RTCDataChannel | None:
        return self.control.channel

    @property
    def interrupts(self) -> int:
        return self.controls.interrupts

    @property
    def ignored_messages(self) -> int:
        return self.control.ignored_messages

    @property
    def dropped_messages(self) -> int:
        return self.control.dropped_messages

    @property
    def stalls(self) -> int:
        return self.watchdog.stalls

    @property
    def opus_in(self) -> OpusPacketDecoder | None:
        return self.input.opus_in

    def parked(self) -> ParkedCall:
        """What this call leaves for a resume: its engine session and the meter it reads."""
        return ParkedCall(self.engine_session, self.output.meter)

    # -- signaling ---------------------------------------------------------------------

    def _interrupt_rule(self, interrupt_by: InterruptBy | Literal["echo"]) -> InterruptRule:
        """'echo' (a client that did not say its mode): words while the call's microphone
        may hear the assistant, sound once its echo canceller found it does not."""
        room = self.room
        if interrupt_by != "echo":
            return interrupt_by
        if room is None or not room.cancels_echo:
            return "sound"
        return lambda: "sound" if room.no_echo else "words"

    async def accept(self, offer_sdp: str) -> RTCSessionDescription:
        """Apply the client's offer and return our answer (raises ValueError on bad SDP)."""
        pc = self.pc
        pc.on("track", self._on_track)
        pc.on("datachannel", self._on_datachannel)
        answer, mid = await answer_offer(pc, offer_sdp, self.output.send_track,
                                         video=self.config.video)
        self.output.use_codec(audio_codecs(answer, mid))
        self.input.on_answer(answer)
        if self._closing:  # server shutdown while the offer was applied
            raise PeerSetupError("the server closed the call while its offer was applied")
        check_answered(pc)
        # watched from here: the caller closes a call whose offer could not be applied
        pc.on("connectionstatechange", self._on_connection_state)
        self.tasks.spawn("events", self.events.run(self.engine_session.events()))
        self.tasks.spawn("watchdog", self._watch())
        return pc.localDescription

    def _on_track(self, track: MediaStreamTrack) -> None:
        if self._closing:
            return
        if track.kind == "video" and not self.config.video:
            # --no-video: its section is answered inactive (no packets come, aiortc starts no
            # receiver), and the track is never read
            logger.info("video is off on this server; not receiving the camera")
            return
        if track.kind in self._ingested_kinds:
            # a second microphone or camera: consumed and dropped (aiortc would otherwise
            # queue its decoded frames without bound)
            logger.info("ignoring extra %s track", track.kind)
            self.tasks.spawn(f"drain-{track.kind}", self._drain(track))
            return
        self._ingested_kinds.add(track.kind)
        if track.kind == "audio":
            self.tasks.spawn("ingest-audio", self.input.audio_track(self.pc, track))
        elif track.kind == "video":
            self.tasks.spawn("ingest-video", self.input.video_track(track))

    async def _drain(self, track: MediaStreamTrack) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                await track.recv()
                self.ignored_frames += 1

    def _on_datachannel(self, channel: RTCDataChannel) -> None:
        state = {"type": "state", "state": "resumed" if self.resumed else "ready",
                 "session": self.id, "listening_to": self.listening_to,
                 "recording": self.recorded is not None}
        if self.listening_to == "wake":
            state["wake_phrase"] = self.config.cascade.wake_phrase
        self.control.open(channel, state)

    def _on_connection_state(self) -> None:
        state = self.pc.connectionState
        logger.info("connection %s", state)
        if state in ("failed", "closed"):
            self.teardown("peer_failed" if state == "failed" else "peer_closed")

    # -- media and events ----------------------------------------------------------------
    def interrupt(self) -> None:
        """Control path: stop the reply and all queued sound at once (the page's stop)."""
        self.controls.interrupt()

    def send(self, message: dict[str, Any]) -> bool:
        """A message to the page (waits for the data channel to open, bounded)."""
        return self.control.send(message)

    async def _route(self, event: EngineEvent) -> None:
        """One engine event (booked by the event pump): to the page, the transcript store and
        file (a reply's sound goes straight to the call output, through its handle); a fatal
        engine error ends the call."""
        self.watchdog.engine_event(event, self.clock.now())
        if self.store is not None:
            await self._record(event)
        if self.transcript is not None:
            self.transcript.feed(event)
        if self.recorded is not None:
            self.recorded.transcript.feed(event)
        origin_s = self.events.stages.origin_s(event.turn_id) \
            if isinstance(event, StageTiming) else None
        message = event_message(event, origin_s)
        if message is not None:
            self.send(message)
        if isinstance(event, EngineError) and not event.recoverable:
            logger.error("engine failed: %s", event.message)
            self.teardown("engine_error")

    async def _record(self, event: EngineEvent) -> None:
        """Keep the conversation in the transcript store (a resume may land elsewhere)."""
        assert self.store is not None
        item = self.stored.item(event)
        if item is None:
            return
        try:
            await self.store.append(self.id, *item)
        except StoreError as exc:
            self.control.log_ignored("store", "transcript not stored: %s", clip(str(exc)))

    def buffer_frames(self) -> dict[str, int]:
        return {**self.input.buffer_frames(), **self.output.buffer_frames()}

    def stats(self) -> dict[str, Any]:
        return {"type": "stats", **self.input.stats(), **self.output.stats()}

    # -- the watchdog ------------------------------------------------------------------
    async def _watch(self) -> None:
        """Once a stats tick: end a call that never connected or went silent, cancel a
        stalled reply, sample the network, send the page its stats."""
        watchdog = self.watchdog
        watchdog.start(self.clock.now())
        while True:
            await self.clock.sleep(self.timeouts.stats_interval_s)
            now = self.clock.now()
            connected = self.pc.connectionState == "connected"
            reason = watchdog.close_reason(now, connected, self.input.last_audio_s)
            if reason == "connect_timeout":
                logger.warning("not connected after %.0f s; closing", now - watchdog.started_s)
            elif reason == "media_timeout":
                logger.warning("no audio for %.1f s; closing",
                               now - max(self.input.last_audio_s, watchdog.started_s))
            if reason is not None:
                self.close_reason = reason
                break
            quiet_s = watchdog.quiet_s(now)
            stalled = watchdog.stalled_reply(now, playing=len(self.output.queue) > 0)
            if stalled is not None:
                self._on_stall(stalled, quiet_s)
            if watchdog.network_due(now, self.network.sampled_at_s, connected):
                await self._sample_network(now)
            if self.recorded is not None:
                self.recorded.audio.write(now)
            stats = self.stats()
            self._report(stats)
            self.send(stats)
        self.teardown()

    def _on_stall(self, turn_id: int, quiet_s: float) -> None:
        """The engine went quiet mid-reply: cancel the reply, tell the page, keep the call."""
        logger.error("reply %d made no progress for %.1f s; cancelling it",
                     turn_id, quiet_s)
        if self.metrics is not None:
            self.metrics.stalls.inc()
        self.interrupt()
        for message in CallWatchdog.stall_messages(turn_id):
            self.send(message)

    async def _sample_network(self, now: float) -> None:
        try:
            report = await asyncio.wait_for(self.pc.getStats(), NETWORK_STATS_TIMEOUT_S)
        except (TimeoutError, *CLOSE_ERRORS) as exc:
            logger.debug("no WebRTC stats: %s", exc)
            return
        sample = self.network.update(report.values(), now)
        self.output.expect_loss(sample.loss_out)  # the Opus encoder's FEC follows it
        if self.metrics is not None:
            self.metrics.observe_network(sample)

    def _report(self, stats: dict[str, Any]) -> None:
        if self.metrics is not None:
            self.metrics.add_media(counter_deltas(stats, self._reported))

    # -- teardown ----------------------------------------------------------------------
    def teardown(self, reason: str | None = None) -> None:
        """Start closing from a callback or a task of this session (no-op if closing)."""
        if not self._closing:
            if reason is not None:
                self.close_reason = reason
            self.tasks.spawn("teardown", self.close())

    async def _say_goodbye(self) -> None:
        """Tell the page why the server ends the call, and give the message a moment to go."""
        text = GOODBYES.get(self.close_reason)
        if text is not None and self.send({"type": "goodbye", "reason": self.close_reason,
                                           "message": text}):
            await self.control.flush(GOODBYE_FLUSH_S)

    async def close(self) -> None:
        with call_context(self.id):  # also when the app closes it (shutdown, a replaced call)
            await self._close()

    async def _close(self) -> None:
        if self._closing:
            await self.closed.wait()
            return
        self._closing = self.control.closing = True
        logger.info("closing (%s)", self.close_reason)
        try:
            await self._say_goodbye()
            await self.tasks.close(self.config.shutdown_timeout_s)
            self.output.close()  # a parked engine's stops no longer reach this call
            if self._park is None or not self._park(self):
                await self.engine_session.close()
            if self.store is not None and self.close_reason == "hangup":
                try:
                    await self.store.delete(self.id)  # a hangup is final
                except StoreError as exc:
                    logger.warning("transcript not deleted: %s", exc)
            await close_peer(self.pc, self.config.shutdown_timeout_s)
        finally:
            self.input.close()  # the reorder buffer's release timer must not outlive the call
            if self.transcript is not None:
                self.transcript.close(self.close_reason)
            if self.recorded is not None:
                self.recorded.close(self.close_reason, self.clock.now())
            if self.trace is not None:
                self.trace.end(self.close_reason)
            self._report(self.stats())
            if self.metrics is not None:
                self.metrics.calls.labels(self.close_reason).inc()
            self.closed.set()
            self._on_closed(self)
