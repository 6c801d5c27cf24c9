"""Real aiortc calls to an omnicall server, every packet through the impairing relay."""

from __future__ import annotations

import asyncio

import aiohttp
import numpy as np
import pytest

from bench.impair import BurstLoss, Impairment
from bench.udp_relay import RelayError, UdpRelay, rewrite_candidates, signaling_proxy
from omnicall.app.app_state import CALLS_KEY
from omnicall.app.calls import SessionTimeouts
from omnicall.app.config import ServerConfig
from omnicall.client import Call, Microphone, connect
from tests.utils import piper_speech, running_server, serving, tone, wait_for

OFFER = """v=0\r
o=- 1 1 IN IP4 0.0.0.0\r
m=audio 9 UDP/TLS/RTP/SAVPF 96\r
a=candidate:1 1 udp 2130706431 10.0.0.5 5000 typ host\r
a=candidate:2 1 udp 2130706431 127.0.0.1 5001 typ host\r
a=candidate:3 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active\r
a=end-of-candidates\r
"""


def test_candidates_are_pointed_at_the_relay_and_loopback_is_the_target() -> None:
    sdp, original = rewrite_candidates(OFFER, ("127.0.0.1", 7000))
    assert original == ("127.0.0.1", 5001)
    candidates = [line for line in sdp.splitlines() if line.startswith("a=candidate")]
    assert candidates == ["a=candidate:1 1 udp 2130706431 127.0.0.1 7000 typ host",
                          "a=candidate:2 1 udp 2130706431 127.0.0.1 7000 typ host"]
    with pytest.raises(RelayError):
        rewrite_candidates("v=0\r\nm=audio 9 RTP/AVP 0\r\n", ("127.0.0.1", 7000))


def _loud_ms(call_audio: np.ndarray) -> float:
    return float(np.count_nonzero(np.abs(call_audio) > 1000)) / 48


async def test_a_lossy_jittery_call_connects_recovers_packets_and_flows_both_ways() -> None:
    relay = await UdpRelay(up=Impairment(burst=BurstLoss.with_mean(0.08, 2.0), delay_s=0.02,
                                         jitter_s=0.01),
                           down=Impairment(loss=0.08, delay_s=0.02), seed=11).start()
    try:
        async with running_server() as (url, app):
            call = await connect(url, Microphone(tone(440, 30, rate=48_000)),
                                        route=relay)
            try:
                await wait_for(lambda: call.pc.connectionState == "connected", 10)
                await wait_for(lambda: _loud_ms(call.received_audio()) > 2000, 15)
                session = next(iter(app[CALLS_KEY].sessions.values()))
                decoder = session.opus_in
                assert decoder is not None
                await wait_for(lambda: decoder.recovered > 0, 10)
            finally:
                await call.close()
    finally:
        relay.close()
    summary = relay.summary()
    assert summary["up"]["delivered"] > 100 and summary["down"]["delivered"] > 100
    assert summary["up"].get("burst", 0) > 0 and summary["down"].get("loss", 0) > 0
    assert relay.client_addr is not None and relay.server_addr is not None


async def test_a_client_posting_its_own_offer_is_routed_through_the_signaling_proxy() -> None:
    """What a browser page does (it posts its own offer): through the proxy, both
    descriptions are rewritten, so each peer knows only the relay and every packet goes
    through it; the page's other requests pass through unchanged."""
    relay = await UdpRelay(seed=5).start()
    try:
        async with running_server() as (url, app), \
                serving(signaling_proxy(relay, url)) as port:
            proxy = f"http://127.0.0.1:{port}/"
            async with aiohttp.ClientSession() as http:
                async with http.get(proxy + "config") as via, http.get(url + "config") as direct:
                    assert via.status == 200 and await via.json() == await direct.json()
                async with http.post(proxy + "offer", json={"sdp": "v=0", "type": "offer"}) \
                        as refused:
                    assert refused.status == 400  # no candidate to route: not sent on
            call = await connect(proxy, Microphone(tone(440, 30, rate=48_000)))
            try:
                await wait_for(lambda: _loud_ms(call.received_audio()) > 1000, 15)
                await wait_for(lambda: min(relay.up.counts["delivered"],
                                           relay.down.counts["delivered"]) > 100, 15)
                relay_at = {relay.address("client"), relay.address("server")}
                session = app[CALLS_KEY].sessions[call.session_id]
                remote = session.pc.getTransceivers()[0].receiver.transport.transport \
                    .iceGatherer._connection.remote_candidates
                assert {(c.host, c.port) for c in remote} == {relay.address("server")}
                answered = call.pc.remoteDescription.sdp
                assert {(c.split()[4], int(c.split()[5])) for c in answered.splitlines()
                        if c.startswith("a=candidate")} <= relay_at
            finally:
                await call.close()
    finally:
        relay.close()
    assert relay.client_addr is not None and relay.server_addr is not None


def _replies(call: Call, phase: str = "end") -> list[int]:
    """The assistant turns the client was told of (their ids), in order."""
    return [m["turn"] for m in call.messages if m.get("type") == "turn"
            and m.get("role") == "assistant" and m.get("phase") == phase]


async def test_a_call_survives_a_three_second_outage_and_the_conversation_goes_on() -> None:
    """The server's default timeouts (media_timeout_s 3.5 s) against a 3 s outage both ways:
    the call rides it out on the same session, and a turn after it is answered."""
    from examples.parrot import ParrotEngine
    from omnicall.engine.conversation.settings import TurnSettings

    relay = await UdpRelay(seed=3).start()
    engine = ParrotEngine(TurnSettings(turn_model="fixed"))
    config = ServerConfig(engine="loopback", ice_loopback=True)
    assert SessionTimeouts().media_timeout_s == config.media_timeout_s == 3.5
    try:
        async with running_server(config, engine=engine) as (url, app):
            mouth = Microphone()
            call = await connect(url, mouth, route=relay)
            sessions = app[CALLS_KEY].sessions
            try:
                await wait_for(lambda: call.pc.connectionState == "connected", 10)
                mouth.say(piper_speech("Hello there, parrot.", rate=48_000, tail_s=0.0))
                await wait_for(lambda: len(_replies(call)) == 1, 20)
                session = sessions[call.session_id]
                relay.begin_outage(3.0)
                await asyncio.sleep(3.5)
                assert call.pc.connectionState == "connected"
                assert sessions.get(call.session_id) is session  # not closed, not resumed
                heard = len(call.received)
                mouth.say(piper_speech("Are you still there?", rate=48_000, tail_s=0.0))
                await wait_for(lambda: len(_replies(call)) == 2, 20)
                assert _replies(call) == [1, 2]
                assert _loud_ms(np.concatenate(call.received[heard:])) > 200  # and spoken
                assert sessions.get(call.session_id) is session
            finally:
                await call.close()
    finally:
        relay.close()
    assert relay.down.counts["outage"] > 0 and relay.up.counts["outage"] > 0
    assert session.close_reason != "media_timeout"
