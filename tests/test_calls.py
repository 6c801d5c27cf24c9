"""The server's calls (app/calls.py): the live ones counted, and a dropped call's conversation
parked and resumed by the next offer that names it."""

from __future__ import annotations

import aiohttp

from omnicall.app.app_state import CALLS_KEY, PARKED_KEY
from omnicall.app.calls import LiveCalls, ParkedCall, ParkedCalls, SessionTimeouts
from omnicall.app.config import ServerConfig
from omnicall.client import Microphone, connect
from omnicall.engine.base import SessionOptions
from omnicall.engine.loopback import LoopbackEngine
from omnicall.media.clock import ManualClock
from omnicall.media.playout import PlayoutMeter
from tests.test_signaling import offer_sdp
from tests.utils import running_server, tone, vanish, wait_for


async def test_parked_calls_expire_and_are_bounded() -> None:
    engine = LoopbackEngine()
    sessions = [engine.open_session(f"s{i}", SessionOptions()) for i in range(3)]
    calls = [ParkedCall(s, PlayoutMeter(ManualClock())) for s in sessions]
    parked = ParkedCalls(window_s=30, max_parked=2)
    assert parked.park("a", calls[0], 0.0) == []
    assert parked.park("b", calls[1], 5.0) == []
    assert parked.park("c", calls[2], 6.0) == [sessions[0]]  # the oldest is pushed out
    assert parked.take("a") is None
    assert parked.take("b") is calls[1]  # the engine session with its meter
    assert parked.expired(35.0) == [] and parked.expired(36.0) == [sessions[2]]
    assert len(parked) == 0
    assert ParkedCalls(window_s=0, max_parked=2).park("x", calls[1], 0.0) == [sessions[1]]
    for session in sessions:
        await session.close()


async def test_vanished_call_resumes_with_the_same_conversation() -> None:
    timeouts = SessionTimeouts(media_timeout_s=1.0, stats_interval_s=0.2)
    async with running_server(timeouts=timeouts) as (url, app):
        registry, parked = app[CALLS_KEY], app[PARKED_KEY]
        call = await connect(url, Microphone(tone(440, 30, rate=48_000)))
        await wait_for(lambda: len(registry) == 1)
        first = registry.sessions[call.session_id]
        await wait_for(lambda: first.input.pump.units_out > 10, timeout_s=10)
        engine_session = first.engine_session
        vanish(call.pc)  # the laptop lid closes: no hangup
        await wait_for(lambda: len(registry) == 0 and len(parked) == 1, timeout_s=10)
        assert first.close_reason == "media_timeout"
        async with aiohttp.ClientSession() as http, http.get(url + "metrics") as resp:
            assert "omnicall_parked_sessions 1.0" in await resp.text()
        again = await connect(url, Microphone(tone(440, 30, rate=48_000)),
                                     body={"resume": call.session_id})
        assert again.resumed and again.session_id == call.session_id
        await wait_for(lambda: len(registry) == 1)
        second = registry.sessions[call.session_id]
        assert second.engine_session is engine_session and len(parked) == 0
        async with aiohttp.ClientSession() as http, http.get(url + "metrics") as resp:
            assert 'omnicall_calls_total{outcome="resumed"} 1.0' in await resp.text()
        await wait_for(lambda: second.input.pump.units_out > 10, timeout_s=10)
        await wait_for(lambda: any(m.get("state") == "resumed" for m in again.messages),
                       timeout_s=5)
        # a hangup is final: nothing is parked
        again.pc.getTransceivers()  # keep the peer referenced until here
        channel_msgs = len(again.messages)
        assert channel_msgs > 0
        await again.close()
        await wait_for(lambda: len(registry) == 0, timeout_s=10)
        await call.close()


async def test_unknown_resume_id_starts_a_new_call() -> None:
    async with running_server() as (url, _app), aiohttp.ClientSession() as http:
        sdp = await offer_sdp()
        async with http.post(url + "offer", json={"sdp": sdp, "type": "offer",
                                                  "resume": "nope"}) as resp:
            body = await resp.json()
        assert resp.status == 200 and body["resumed"] is False and body["session"] != "nope"


async def test_resume_window_expires() -> None:
    cfg = ServerConfig(engine="loopback", ice_loopback=True, resume_window_s=0.5)
    timeouts = SessionTimeouts(media_timeout_s=1.0, stats_interval_s=0.2)
    async with running_server(cfg, timeouts=timeouts) as (url, app):
        call = await connect(url, Microphone(tone(440, 30, rate=48_000)))
        await wait_for(lambda: len(app[CALLS_KEY]) == 1)
        engine_session = app[CALLS_KEY].sessions[call.session_id].engine_session
        first = app[CALLS_KEY].sessions[call.session_id]
        await wait_for(lambda: first.input.pump.units_out > 10, timeout_s=10)
        vanish(call.pc)
        await wait_for(lambda: engine_session.state.closed, timeout_s=10)  # type: ignore[attr-defined]
        assert first.close_reason == "media_timeout" and len(app[PARKED_KEY]) == 0
        late = await connect(url, Microphone(tone(440, 5, rate=48_000)),
                                    body={"resume": call.session_id})
        assert not late.resumed and late.session_id != call.session_id
        await late.close()
        await call.close()


async def test_resume_of_a_live_call_takes_it_over() -> None:
    """The page noticed the drop first: its resume offer replaces the still-open call."""
    async with running_server() as (url, app):
        registry = app[CALLS_KEY]
        call = await connect(url, Microphone(tone(440, 30, rate=48_000)))
        await wait_for(lambda: len(registry) == 1)
        first = registry.sessions[call.session_id]
        engine_session = first.engine_session
        again = await connect(url, Microphone(tone(440, 30, rate=48_000)),
                                     body={"resume": call.session_id})
        assert again.resumed and first.close_reason == "replaced"
        assert registry.sessions[call.session_id].engine_session is engine_session
        await again.close()
        await call.close()


class Call:
    def __init__(self, session_id: str) -> None:
        self.id = session_id


def test_live_calls_count_what_is_open_and_what_ever_opened() -> None:
    calls = LiveCalls(max_sessions=2)
    a, b = Call("a"), Call("b")
    calls.add(a)  # type: ignore[arg-type]
    calls.add(b)  # type: ignore[arg-type]
    assert len(calls) == 2 and calls.sessions["a"] is a
    calls.remove(a)  # type: ignore[arg-type]
    calls.remove(a)  # type: ignore[arg-type]  # twice: no error
    assert len(calls) == 1 and calls.total_opened == 2 and calls.max_sessions == 2
