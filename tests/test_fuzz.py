"""Fuzz suite: thousands of hostile requests and messages against a real server.

Deterministic (seeded). Offer bodies and SDP mutations of a real Chromium offer and a real
aiortc offer go over real HTTP; control messages go over a real aiortc data channel. Nothing
may answer >= 500, and afterwards no session, task or file descriptor may be left behind.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random

import aiohttp
import pytest

from omnicall.app.app_state import CALLS_KEY, METRICS_KEY
from omnicall.app.calls import SessionTimeouts
from omnicall.app.config import ServerConfig
from omnicall.client import Microphone, connect
from tests.fuzz_cases import CHROMIUM_OFFER, control_messages, json_bodies, sdp_offers
from tests.test_signaling import offer_sdp
from tests.utils import running_server, tone, wait_for

SEED = 20261201
JSON_CASES = 700
SDP_CASES = 900  # half mutate the Chromium offer, half the aiortc one
CHANNEL_CASES = 600

FUZZ_CONFIG = ServerConfig(engine="loopback", ice_loopback=True, offer_rate_per_min=0,
                           max_sessions=2000, resume_window_s=0)
FUZZ_TIMEOUTS = SessionTimeouts(connect_timeout_s=1.0, stats_interval_s=0.2)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def server_tasks() -> list[str]:
    return [t.get_name() for t in asyncio.all_tasks()
            if t.get_name().startswith(("call-", "engine-session-"))]


async def post_all(url: str, bodies: list[bytes]) -> dict[int, int]:
    """POST each body (8 at a time); returns status -> count."""
    statuses: dict[int, int] = {}
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)

    async def client(http: aiohttp.ClientSession) -> None:
        while not queue.empty():
            body = queue.get_nowait()
            async with http.post(url + "offer", data=body,
                                 headers={"Content-Type": "application/json"}) as resp:
                payload = await resp.read()
                statuses[resp.status] = statuses.get(resp.status, 0) + 1
                if resp.status >= 400:
                    assert "error" in json.loads(payload), payload[:200]
                assert resp.status < 500, (resp.status, payload[:300], body[:300])

    async with aiohttp.ClientSession() as http:
        await asyncio.gather(*(client(http) for _ in range(8)))
    return statuses


async def fuzz_offers(url: str, rng: random.Random) -> dict[int, int]:
    base = [CHROMIUM_OFFER.read_text().replace("\n", "\r\n").replace("\r\r", "\r"),
            await offer_sdp(("audio", "video"))]
    bodies = list(json_bodies(rng, JSON_CASES, base[1]))
    bodies += list(sdp_offers(rng, SDP_CASES // 2, base[:1]))
    bodies += list(sdp_offers(rng, SDP_CASES // 2, base[1:]))
    return await post_all(url, bodies)


@pytest.mark.timeout(600)
async def test_fuzzed_offers_never_5xx_and_leave_nothing(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    caplog.set_level(logging.INFO)
    async with running_server(FUZZ_CONFIG, timeouts=FUZZ_TIMEOUTS) as (url, app):
        await offer_sdp()  # aiortc's first peer connection loads its certificate code
        fds_before, tasks_before = open_fds(), len(asyncio.all_tasks())
        statuses = await fuzz_offers(url, random.Random(SEED))
        assert sum(statuses.values()) == JSON_CASES + SDP_CASES
        assert all(status < 500 for status in statuses), statuses
        assert statuses.get(400, 0) > JSON_CASES  # most are refused...
        assert statuses.get(200, 0) > 10  # ...and mutations that keep an offer valid work
        registry = app[CALLS_KEY]
        # accepted offers never connect: each is closed by its connect timeout
        await wait_for(lambda: len(registry) == 0, timeout_s=30)
        await wait_for(lambda: not server_tasks(), timeout_s=10)
        await wait_for(lambda: open_fds() <= fds_before + 2, timeout_s=10)
        # aiortc's and aiohttp's own tasks of the closed calls end a little after them
        await wait_for(lambda: len(asyncio.all_tasks()) <= tasks_before + 2, timeout_s=10)
        assert len(asyncio.all_tasks()) <= tasks_before + 2
        exposition = app[METRICS_KEY].exposition().decode()
        assert 'omnicall_offers_rejected_total{reason="bad_request"}' in exposition
    messages = [r.getMessage() for r in caplog.records]
    assert not any("Task exception was never retrieved" in m for m in messages)
    assert not any(r.levelno >= logging.ERROR and "failed" in r.getMessage()
                   and "internal" in r.getMessage() for r in caplog.records)


@pytest.mark.timeout(300)
async def test_fuzzed_control_messages_keep_the_call(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with running_server(FUZZ_CONFIG) as (url, app):
        registry = app[CALLS_KEY]
        call = await connect(url, Microphone(tone(300, 60, rate=48_000)))
        bystander = await connect(url, Microphone(tone(500, 60, rate=48_000)))
        await wait_for(lambda: any(m.get("type") == "state" for m in call.messages))
        channel = next(iter(call.pc.sctp._data_channels.values()))  # type: ignore[union-attr]
        sent_bytes = 0
        log_chars_before = sum(len(r.getMessage()) for r in caplog.records)
        for index, message in enumerate(control_messages(random.Random(SEED), CHANNEL_CASES)):
            channel.send(message)
            sent_bytes += len(message)
            if index % 50 == 0:
                await asyncio.sleep(0.05)  # let SCTP drain
        channel.send('{"type": "ping", "t": 42}')
        await wait_for(lambda: any(m.get("type") == "pong" and m.get("t") == 42
                                   for m in call.messages), timeout_s=20)
        assert call.session_id in registry.sessions and bystander.session_id in registry.sessions
        session = registry.sessions[call.session_id]
        assert session.ignored_messages > CHANNEL_CASES // 2
        assert call.pc.connectionState == "connected"
        logged = sum(len(r.getMessage()) for r in caplog.records) - log_chars_before
        # a client can make the server log little, whatever it sends
        assert logged < 20_000, logged
        assert sent_bytes > 1_000_000
        await call.close()
        await bystander.close()
        await wait_for(lambda: len(registry) == 0, timeout_s=10)
