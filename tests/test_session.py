"""Call teardown: every way a call ends frees everything (no sessions, no tasks left).

A call that drops without a hangup parks its engine session for the resume window
(tests/test_resume.py); these tests turn the window off to see the rest freed at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest

from omnicall.app.app_state import CALLS_KEY, METRICS_KEY
from omnicall.app.calls import SessionTimeouts
from omnicall.app.config import ServerConfig
from omnicall.client import Microphone, connect
from omnicall.engine.base import EngineSession, SessionOptions
from omnicall.engine.events import AssistantAudio, TurnEvent
from omnicall.engine.loopback import LoopbackEngine, LoopbackSession
from tests.utils import ColorVideoTrack, running_server, tone, vanish, wait_for


def call_tasks() -> list[str]:
    return [t.get_name() for t in asyncio.all_tasks()
            if t.get_name().startswith(("call-", "engine-session-"))]


NO_RESUME = ServerConfig(engine="loopback", ice_loopback=True, resume_window_s=0)


async def test_client_hangup_frees_everything() -> None:
    async with running_server(NO_RESUME) as (url, app):
        registry = app[CALLS_KEY]
        call = await connect(url, Microphone(tone(300, 1, rate=48_000)), ColorVideoTrack())
        await wait_for(lambda: any(s.input.pump.units_out > 5 for s in registry.sessions.values()))
        session = next(iter(registry.sessions.values()))
        await call.close()
        await wait_for(lambda: len(registry) == 0, timeout_s=10)
        await wait_for(lambda: not call_tasks(), timeout_s=5)
        assert session.output.paced_track.readyState == "ended"
        assert session.pc.connectionState == "closed"


async def test_client_vanishing_mid_call_is_detected_and_freed() -> None:
    timeouts = SessionTimeouts(media_timeout_s=2.5, stats_interval_s=0.2)
    async with running_server(NO_RESUME, timeouts=timeouts) as (url, app):
        registry = app[CALLS_KEY]
        survivor = await connect(url, Microphone(tone(300, 10, rate=48_000)))
        doomed = await connect(url, Microphone(tone(300, 10, rate=48_000)),
                                      ColorVideoTrack())
        await wait_for(lambda: len(registry) == 2 and all(
            s.input.pump.units_out > 5 for s in registry.sessions.values()), timeout_s=10)
        vanish(doomed.pc)
        await wait_for(lambda: len(registry) == 1, timeout_s=8)
        assert survivor.session_id in registry.sessions  # the other call kept going
        before = registry.sessions[survivor.session_id].input.pump.units_out
        await wait_for(lambda: registry.sessions[survivor.session_id].input.pump.units_out > before,
                       timeout_s=5)
        assert registry.sessions[survivor.session_id].input.pump.units_out > before
        await survivor.close()
        await doomed.close()
        await wait_for(lambda: len(registry) == 0 and not call_tasks(), timeout_s=10)


async def test_never_connected_offer_times_out() -> None:
    timeouts = SessionTimeouts(connect_timeout_s=0.5, stats_interval_s=0.1)
    async with running_server(timeouts=timeouts) as (url, app):
        call = await connect(url, Microphone())
        vanish(call.pc)  # never completes ICE
        registry = app[CALLS_KEY]
        await wait_for(lambda: len(registry) == 0, timeout_s=5)
        await call.close()


async def test_server_shutdown_closes_live_calls() -> None:
    async with running_server() as (url, app):
        registry = app[CALLS_KEY]
        call = await connect(url, Microphone(tone(300, 5, rate=48_000)))
        await wait_for(lambda: any(s.input.pump.units_out > 2 for s in registry.sessions.values()))
    assert len(registry) == 0
    assert not call_tasks()
    await call.close()


async def test_interrupt_control_flushes_egress() -> None:
    async with running_server() as (url, app):
        registry = app[CALLS_KEY]
        call = await connect(url, Microphone(tone(300, 5, rate=48_000)))
        await wait_for(lambda: any(s.output.queue.played_frames > 10
                                   for s in registry.sessions.values()))
        session = next(iter(registry.sessions.values()))
        assert session.channel is not None
        # the page sends {"type": "interrupt"}; emulate over the real channel from the client
        client_channel = next(iter(call.pc.sctp._data_channels.values()))  # type: ignore[union-attr]
        client_channel.send('{"type": "interrupt"}')
        client_channel.send("not json")  # ignored, logged
        client_channel.send('{"type": "ping", "t": 5}')
        await wait_for(lambda: any(m.get("type") == "pong" for m in call.messages))
        assert session.interrupts == 1
        assert session.engine_session.interrupts == 1  # type: ignore[attr-defined]
        await call.close()


async def test_extra_tracks_are_drained_not_mixed_in() -> None:
    async with running_server() as (url, app):
        registry = app[CALLS_KEY]
        # an offer with two microphones: the second is consumed and ignored
        call = await connect(url, Microphone(tone(300, 3, rate=48_000)),
                                    extra=[Microphone(tone(500, 3, rate=48_000))])
        session = registry.sessions[call.session_id]
        await wait_for(lambda: session.ignored_frames > 20 and session.input.pump.units_out > 5)
        assert f"call-{session.id}/drain-audio" in session.tasks.names
        await call.close()
        await wait_for(lambda: len(registry) == 0, timeout_s=10)


async def test_engine_loop_crash_ends_the_call_with_an_error_message() -> None:
    from omnicall.engine.loopback import LoopbackEngine, LoopbackSession

    class Broken(LoopbackSession):
        async def process(self) -> None:
            await self.state.inputs.get()
            raise KeyError("bug in the engine")

    class BrokenEngine(LoopbackEngine):
        def open_session(self, session_id, options):  # type: ignore[no-untyped-def]
            return Broken(session_id, options, self._worker)

    async with running_server(engine=BrokenEngine()) as (url, app):
        registry = app[CALLS_KEY]
        call = await connect(url, Microphone(tone(300, 3, rate=48_000)))
        await wait_for(lambda: len(registry) == 0, timeout_s=10)  # torn down, not left dead
        from omnicall.app.app_state import METRICS_KEY
        exposition = app[METRICS_KEY].exposition().decode()
        assert 'omnicall_calls_total{outcome="engine_error"} 1.0' in exposition
        await call.close()


async def test_vanished_peer_frees_its_slot_at_the_media_timeout() -> None:
    """Default settings: a client that vanishes is noticed at the media timeout (3.5 s + one
    1 s watchdog tick) and its slot freed, and its conversation stays parked for a resume
    without holding a slot."""
    from omnicall.app.app_state import PARKED_KEY

    cfg = ServerConfig(engine="loopback", ice_loopback=True, max_sessions=1)
    async with running_server(cfg) as (url, app):
        registry = app[CALLS_KEY]
        call = await connect(url, Microphone(tone(300, 30, rate=48_000)))
        await wait_for(lambda: any(s.input.pump.units_out > 5 for s in registry.sessions.values()))
        vanish(call.pc)
        gone_at = asyncio.get_running_loop().time()
        await wait_for(lambda: len(registry) == 0, timeout_s=10)
        # by the watchdog's clock: no audio for 3.5 s, noticed at its next 1 s tick (4.5 s,
        # the "within 5 s" of the docs); the rest is slack for a busy machine's teardown
        defaults = SessionTimeouts()
        assert asyncio.get_running_loop().time() - gone_at < \
            defaults.media_timeout_s + defaults.stats_interval_s + 2.0
        assert len(app[PARKED_KEY]) == 1
        # the parked call holds no slot: a new caller gets in on a one-call server
        other = await connect(url, Microphone(tone(300, 30, rate=48_000)))
        # and the dropped one can still come back
        back = await connect(url, Microphone(tone(300, 30, rate=48_000)),
                                    body={"resume": call.session_id})
        assert back.resumed
        for c in (other, back, call):
            await c.close()


async def test_closing_a_call_stops_the_reorder_timer_of_its_receive_path() -> None:
    """A packet held by the reorder buffer (waiting for a missing one) when the call closes
    is dropped with the call: its release timer does not fire after the teardown."""
    from aiortc.rtp import RtpPacket

    from omnicall.media.audio_reorder import AdaptiveReorderBuffer, ReorderSettings
    from tests.test_opus_receive import encoded

    async with running_server(NO_RESUME) as (url, app):
        registry = app[CALLS_KEY]
        call = await connect(url, Microphone(tone(300, 10, rate=48_000)))
        await wait_for(lambda: any(s.input.pump.units_out > 5 for s in registry.sessions.values()))
        session = registry.sessions[call.session_id]
        buffer = session.input.receive.buffer
        assert buffer is not None and buffer.direct is not None
        vanish(call.pc)  # no more packets from the caller: only the ones given here
        await wait_for(lambda: session.clock.now() - session.input.pump.last_audio_s > 0.3)
        # a gap (1 is missing) with a wait long enough to still be running at the teardown
        buffer.reorder = AdaptiveReorderBuffer(ReorderSettings(min_s=1.0, max_s=1.0))
        opus = next(iter(buffer.direct_types))
        for seq, payload in ((0, encoded(0.04)[0]), (2, encoded(0.04)[1])):
            packet = RtpPacket(payload_type=opus, sequence_number=seq, timestamp=seq * 960)
            packet._data = payload  # type: ignore[attr-defined]
            buffer.add(packet)
        due = buffer.reorder.deadline()
        assert due is not None and buffer.reorder.held == 1 and buffer._timer is not None
        await session.close()
        assert buffer._timer is None  # cancelled by the teardown
        await asyncio.sleep(max(0.0, due - time.monotonic()) + 0.3)  # past when it was due
        assert buffer.reorder.held == 1 and buffer.reorder.skipped == 0  # never released
        await call.close()
        await wait_for(lambda: len(registry) == 0 and not call_tasks(), timeout_s=10)


def stun_of(session: Any) -> Any:
    """The aioice connection behind a call's (bundled) transport."""
    transceiver = session.pc.getTransceivers()[0]
    return transceiver.receiver.transport.transport.iceGatherer._connection


async def test_server_peer_connections_use_no_public_stun_by_default() -> None:
    async with running_server() as (url, app):
        call = await connect(url, Microphone(tone(300, 3, rate=48_000)))
        session = app[CALLS_KEY].sessions[call.session_id]
        connection = stun_of(session)
        assert connection.stun_server is None and connection.turn_server is None
        await call.close()
    cfg = ServerConfig(engine="loopback", ice_loopback=True,
                       server_ice_servers="stun:127.0.0.1:3478")
    async with running_server(cfg) as (url, app):
        call = await connect(url, Microphone(tone(300, 3, rate=48_000)))
        session = app[CALLS_KEY].sessions[call.session_id]
        assert stun_of(session).stun_server == ("127.0.0.1", 3478)
        await call.close()


class StallingSession(LoopbackSession):
    """Starts a reply, sends a little audio, then goes quiet (a model that hangs) until it is
    interrupted; the next reply works."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.stalled = asyncio.Event()
        self.interrupted = asyncio.Event()
        self.replies = 0

    async def process(self) -> None:
        while True:
            await self.state.inputs.get()
            if self.stalled.is_set() and not self.interrupted.is_set():
                continue  # hung: no events at all
            self.replies += 1
            turn = self.replies
            await self.emit(TurnEvent("assistant", "start", turn))
            await self.emit(AssistantAudio(np.zeros(1920, np.int16), 24_000, 0, turn))
            if turn == 1:
                self.stalled.set()  # the first reply never finishes
                continue
            await self.emit(TurnEvent("assistant", "end", turn))
            await asyncio.sleep(3600)

    def interrupt(self) -> None:
        super().interrupt()
        if self.stalled.is_set():
            self.interrupted.set()


class StallingEngine(LoopbackEngine):
    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession:
        return StallingSession(session_id, options, self._worker)


async def test_engine_stalling_mid_reply_gets_an_error_and_the_next_turn_works() -> None:
    timeouts = SessionTimeouts(reply_timeout_s=1.0, stats_interval_s=0.2)
    async with running_server(engine=StallingEngine(), timeouts=timeouts) as (url, app):
        registry = app[CALLS_KEY]
        call = await connect(url, Microphone(tone(300, 30, rate=48_000)))
        bystander = await connect(url, Microphone(tone(300, 30, rate=48_000)))
        await wait_for(lambda: any(m.get("type") == "error" for m in call.messages), 10)
        error = next(m for m in call.messages if m.get("type") == "error")
        assert error["recoverable"] and "stopped answering" in error["message"]

        def cut_reply_ended() -> bool:  # sent right after the error: it may still be on its way
            return any(m.get("type") == "turn" and m.get("role") == "assistant"
                       and m.get("phase") == "end" and m.get("interrupted")
                       for m in call.messages)

        await wait_for(cut_reply_ended, timeout_s=5)
        assert cut_reply_ended()
        # the next reply starts and finishes
        await wait_for(lambda: any(m.get("type") == "turn" and m.get("turn") == 2
                                   and m.get("phase") == "end" for m in call.messages), 10)
        session = registry.sessions[call.session_id]
        assert session.stalls >= 1 and call.pc.connectionState == "connected"
        assert bystander.session_id in registry.sessions
        exposition = app[METRICS_KEY].exposition().decode()
        assert "omnicall_engine_stalls_total" in exposition
        await call.close()
        await bystander.close()


async def test_cascade_faults_over_webrtc_error_then_next_turn_and_bystander_unaffected(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The real CPU engine behind the server: the language model raises for one caller and
    hangs for another (it honours cancellation, like a stalled stream). Each gets an error
    event, its next question is answered, and a third caller is answered throughout."""
    from omnicall.app.app_state import ENGINE_KEY
    from omnicall.client import Microphone, connect
    from tests.utils import piper_speech

    cfg = ServerConfig(engine="cascade", ice_loopback=True, max_sessions=3)
    # healthy replies on 2 busy cores can wait a few seconds for a model worker
    timeouts = SessionTimeouts(reply_timeout_s=6.0, stats_interval_s=0.2)
    two_questions = np.concatenate([
        piper_speech("What is two plus two?", rate=48_000, lead_s=0.5, tail_s=10.0),
        piper_speech("What is the capital of Spain?", rate=48_000, lead_s=0.3, tail_s=8.0)])
    async with running_server(cfg, timeouts=timeouts) as (url, app):
        llm = app[ENGINE_KEY].llm  # type: ignore[attr-defined]
        real_stream = llm.stream
        faults = ["raise", "stall"]

        def faulty(messages, cancel, max_tokens=None):  # type: ignore[no-untyped-def]
            fault = faults.pop(0) if faults else None
            if fault == "raise":
                raise TypeError("llama decode failed")
            if fault == "stall":
                return stalled(cancel)
            return real_stream(messages, cancel, max_tokens)

        def stalled(cancel):  # type: ignore[no-untyped-def]
            yield "Well,"
            cancel.wait(60)  # no more tokens until the reply is cancelled

        monkeypatch.setattr(llm, "stream", faulty)
        calls = []
        for delay_s in (0.0, 2.5):  # the first call meets "raise", the second "stall"
            await asyncio.sleep(delay_s)
            calls.append(await connect(url, Microphone(two_questions)))
        await asyncio.sleep(12.0)
        bystander = await connect(url, Microphone(piper_speech(
            "How are you today?", rate=48_000, lead_s=0.5, tail_s=8.0)))

        def answered(call: Any) -> list[dict[str, Any]]:
            return [m for m in call.messages if m.get("type") == "turn" and m.get("role") ==
                    "assistant" and m.get("phase") == "end" and not m.get("interrupted")]

        for call in calls:
            await wait_for(lambda c=call: any(m.get("type") == "error" for m in c.messages), 30)
            await wait_for(lambda c=call: answered(c), 40)
        await wait_for(lambda: answered(bystander), 40)
        errors = [next(m for m in c.messages if m.get("type") == "error") for c in calls]
        assert "failed to answer" in errors[0]["message"]
        assert "stopped answering" in errors[1]["message"]
        assert not any(m.get("type") == "error" for m in bystander.messages)
        assert all(c.session_id in app[CALLS_KEY].sessions for c in [*calls, bystander])
        for call in [*calls, bystander]:
            await call.close()


class RecordingSession(LoopbackSession):
    """The loopback engine, keeping whether each unit pushed to it carried a picture."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.pushed_video: list[bool] = []

    def push(self, unit: Any) -> bool:
        self.pushed_video.append(unit.video is not None)
        return super().push(unit)


class RecordingEngine(LoopbackEngine):
    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession:
        return RecordingSession(session_id, options, self._worker)


@pytest.mark.parametrize("video", [True, False], ids=["video-on", "no-video"])
async def test_no_video_refuses_the_camera_and_no_frame_reaches_the_engine(video: bool) -> None:
    """--no-video: a client offering a camera gets its video section answered inactive, so
    it sends nothing and the server decodes nothing; the engine sees only audio. With video
    on, the same call's frames reach the engine."""
    cfg = ServerConfig(engine="loopback", ice_loopback=True, video=video)
    camera = ColorVideoTrack()
    async with running_server(cfg, engine=RecordingEngine()) as (url, app):
        call = await connect(url, Microphone(tone(300, 5, rate=48_000)), camera)
        session = app[CALLS_KEY].sessions[call.session_id]
        engine_session: Any = session.engine_session
        if video:
            await wait_for(lambda: engine_session.video_units >= 2, timeout_s=10)
        else:  # 2.4 s of audio: at --video-fps 2 a camera would have given ~4 frames by now
            await wait_for(lambda: session.input.pump.units_out >= 30, timeout_s=15)
        server_video = [t for t in session.pc.getTransceivers() if t.kind == "video"]
        client_video = [t for t in call.pc.getTransceivers() if t.kind == "video"]
        sampled, sent = session.stats()["video_sampled"], camera._n
        pushed = list(engine_session.pushed_video)
        await call.close()
    assert len(server_video) == len(client_video) == 1
    if video:
        assert server_video[0].currentDirection == "recvonly"
        assert sampled >= 2 and sent > 0 and any(pushed)
        return
    assert server_video[0].currentDirection == client_video[0].currentDirection == "inactive"
    assert sent == 0  # the client's camera track was never even read: no packet was sent
    assert sampled == 0 and engine_session.video_units == 0
    assert len(pushed) >= 30 and not any(pushed)  # every unit the engine got: video None
    assert session.input.video_ring.dropped_frames == 0 and len(session.input.video_ring) == 0
