"""Call teardown: every way a call ends frees everything (no sessions, no tasks left).

A call that drops without a hangup parks its engine session for the resume window
(tests/test_resume.py); these tests turn the window off to see the rest freed at once."""

from __future__ import annotations

import asyncio

from app.config import ServerConfig
from app.server import REGISTRY_KEY
from app.session import SessionTimeouts
from tests.utils import (
    ColorVideoTrack,
    SignalTrack,
    connect_client,
    running_server,
    tone,
    vanish,
    wait_for,
)


def call_tasks() -> list[str]:
    return [t.get_name() for t in asyncio.all_tasks()
            if t.get_name().startswith(("call-", "engine-session-"))]


NO_RESUME = ServerConfig(engine="echo", ice_loopback=True, resume_window_s=0)


async def test_client_hangup_frees_everything() -> None:
    async with running_server(NO_RESUME) as (url, app):
        registry = app[REGISTRY_KEY]
        call = await connect_client(url, SignalTrack(tone(300, 1, rate=48_000)), ColorVideoTrack())
        await wait_for(lambda: any(s.pump.units_out > 5 for s in registry.sessions.values()))
        session = next(iter(registry.sessions.values()))
        await call.close()
        await wait_for(lambda: len(registry) == 0, timeout_s=10)
        await wait_for(lambda: not call_tasks(), timeout_s=5)
        assert session.out_track.readyState == "ended"
        assert session.pc.connectionState == "closed"


async def test_client_vanishing_mid_call_is_detected_and_freed() -> None:
    timeouts = SessionTimeouts(media_timeout_s=1.0, stats_interval_s=0.2)
    async with running_server(NO_RESUME, timeouts=timeouts) as (url, app):
        registry = app[REGISTRY_KEY]
        survivor = await connect_client(url, SignalTrack(tone(300, 10, rate=48_000)))
        doomed = await connect_client(url, SignalTrack(tone(300, 10, rate=48_000)),
                                      ColorVideoTrack())
        await wait_for(lambda: len(registry) == 2 and all(
            s.pump.units_out > 5 for s in registry.sessions.values()), timeout_s=10)
        vanish(doomed.pc)
        await wait_for(lambda: len(registry) == 1, timeout_s=8)
        assert survivor.session_id in registry.sessions  # the other call kept going
        before = registry.sessions[survivor.session_id].pump.units_out
        await asyncio.sleep(0.5)
        assert registry.sessions[survivor.session_id].pump.units_out > before
        await survivor.close()
        await doomed.close()
        await wait_for(lambda: len(registry) == 0 and not call_tasks(), timeout_s=10)


async def test_never_connected_offer_times_out() -> None:
    timeouts = SessionTimeouts(connect_timeout_s=0.5, stats_interval_s=0.1)
    async with running_server(timeouts=timeouts) as (url, app):
        call = await connect_client(url, SignalTrack())
        vanish(call.pc)  # never completes ICE
        registry = app[REGISTRY_KEY]
        await wait_for(lambda: len(registry) == 0, timeout_s=5)
        await call.close()


async def test_server_shutdown_closes_live_calls() -> None:
    async with running_server() as (url, app):
        registry = app[REGISTRY_KEY]
        call = await connect_client(url, SignalTrack(tone(300, 5, rate=48_000)))
        await wait_for(lambda: any(s.pump.units_out > 2 for s in registry.sessions.values()))
    assert len(registry) == 0
    assert not call_tasks()
    await call.close()


async def test_interrupt_control_flushes_egress() -> None:
    async with running_server() as (url, app):
        registry = app[REGISTRY_KEY]
        call = await connect_client(url, SignalTrack(tone(300, 5, rate=48_000)))
        await wait_for(lambda: any(s.jitter.played_frames > 10 for s in registry.sessions.values()))
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
        registry = app[REGISTRY_KEY]
        # an offer with two microphones: the second is consumed and ignored
        call = await connect_client(url, SignalTrack(tone(300, 3, rate=48_000)),
                                    extra=[SignalTrack(tone(500, 3, rate=48_000))])
        session = registry.sessions[call.session_id]
        await wait_for(lambda: session.ignored_frames > 20 and session.pump.units_out > 5)
        assert f"call-{session.id}/drain-audio" in session.tasks.names
        await call.close()
        await wait_for(lambda: len(registry) == 0, timeout_s=10)


async def test_engine_loop_crash_ends_the_call_with_an_error_message() -> None:
    from engine.echo import EchoEngine, EchoSession

    class Broken(EchoSession):
        async def process(self) -> None:
            await self.state.inputs.get()
            raise KeyError("bug in the engine")

    class BrokenEngine(EchoEngine):
        def open_session(self, session_id, options):  # type: ignore[no-untyped-def]
            return Broken(session_id, options, self._worker)

    async with running_server(engine=BrokenEngine()) as (url, app):
        registry = app[REGISTRY_KEY]
        call = await connect_client(url, SignalTrack(tone(300, 3, rate=48_000)))
        await wait_for(lambda: len(registry) == 0, timeout_s=10)  # torn down, not left dead
        from app.server import METRICS_KEY
        exposition = app[METRICS_KEY].exposition().decode()
        assert 'omnicall_calls_total{outcome="engine_error"} 1.0' in exposition
        await call.close()
