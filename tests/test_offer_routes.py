"""POST /offer's own decisions: what a refusal is counted as, which offers count as checked
by a sibling, and how a dropped call is parked and swept."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp import web

from omnicall.app.app_state import (
    APP_TASKS_KEY,
    CALLS_KEY,
    CLOCK_KEY,
    METRICS_KEY,
    PARKED_KEY,
)
from omnicall.app.calls import ParkedCall, ParkedCalls
from omnicall.app.config import ServerConfig
from omnicall.app.http.offer_routes import (
    SWEEP_INTERVAL_S,
    forwarded_by_sibling,
    park_call,
    sweep_parked,
)
from omnicall.app.process.worker_group import FORWARDED_HEADER
from omnicall.engine.tasks import TaskOwner
from omnicall.media.clock import ManualClock
from omnicall.media.playout import PlayoutMeter
from tests.test_signaling import offer_sdp
from tests.utils import running_server


class Transport:
    def __init__(self, sockname: object) -> None:
        self.sockname = sockname

    def get_extra_info(self, name: str) -> object:
        return self.sockname if name == "sockname" else None


class Request:
    def __init__(self, headers: dict[str, str], sockname: object) -> None:
        self.headers = headers
        self.transport = Transport(sockname)


def test_only_a_forwarded_offer_on_the_unix_socket_counts_as_checked() -> None:
    header = {FORWARDED_HEADER: "1"}
    assert forwarded_by_sibling(Request(header, "/run/worker-1.sock"))  # type: ignore[arg-type]
    assert not forwarded_by_sibling(Request(header, ("127.0.0.1", 8080)))  # type: ignore[arg-type]
    assert not forwarded_by_sibling(Request({}, "/run/worker-1.sock"))  # type: ignore[arg-type]


def rejected(app: web.Application, reason: str) -> float:
    text = app[METRICS_KEY].exposition().decode()
    line = f'omnicall_offers_rejected_total{{reason="{reason}"}} '
    return float(next(row for row in text.splitlines() if row.startswith(line)).split()[-1])


async def test_refusals_are_counted_by_reason_and_an_answer_starts_a_call() -> None:
    config = ServerConfig(engine="loopback", ice_loopback=True, max_sessions=1,
                          allowed_origins="https://ok.example", resume_window_s=0)
    async with running_server(config) as (url, app), aiohttp.ClientSession() as http:
        async with http.post(url + "offer", data=b"{", headers={
                "Origin": "https://evil.example"}) as resp:
            assert resp.status == 403 and "may not start calls" in (await resp.json())["error"]
        async with http.post(url + "offer", data=b"{") as resp:
            assert resp.status == 400
        sdp = await offer_sdp()
        async with http.post(url + "offer", json={"sdp": sdp, "type": "offer"}) as resp:
            answer = await resp.json()
            assert resp.status == 200 and answer["type"] == "answer" and not answer["resumed"]
        async with http.post(url + "offer", json={"sdp": sdp, "type": "offer"}) as resp:
            assert resp.status == 503 and resp.headers["Retry-After"] == "10"  # full
        assert rejected(app, "origin") == 1 and rejected(app, "bad_request") == 1
        assert rejected(app, "full") == 1
        assert answer["session"] in app[CALLS_KEY].sessions
        await app[CALLS_KEY].sessions[answer["session"]].close()


class Engine:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class Call:
    def __init__(self, session_id: str, reason: str) -> None:
        self.id = session_id
        self.close_reason = reason
        self.engine_session = Engine(session_id)
        self.meter = PlayoutMeter(ManualClock())

    def parked(self) -> ParkedCall:
        return ParkedCall(self.engine_session, self.meter)  # type: ignore[arg-type]


def parking_app(window_s: float, max_parked: int) -> web.Application:
    app = web.Application()
    app[PARKED_KEY] = ParkedCalls(window_s, max_parked)
    app[CLOCK_KEY] = ManualClock()
    app[APP_TASKS_KEY] = TaskOwner("test")
    return app


async def settle(app: web.Application) -> None:
    """Until the app's tasks (closing pushed-out sessions) are done."""
    for _ in range(100):
        if not len(app[APP_TASKS_KEY]):
            return
        await asyncio.sleep(0)
    raise AssertionError(f"tasks still running: {app[APP_TASKS_KEY].names}")


async def test_a_dropped_call_is_parked_and_a_hangup_is_not() -> None:
    app = parking_app(window_s=30, max_parked=1)
    dropped, hung_up = Call("a", "peer_failed"), Call("b", "hangup")
    assert park_call(app, dropped)  # type: ignore[arg-type]
    assert not park_call(app, hung_up)  # type: ignore[arg-type]
    assert len(app[PARKED_KEY]) == 1
    newer = Call("c", "media_timeout")
    assert park_call(app, newer)  # type: ignore[arg-type]  # pushes out the oldest
    await settle(app)
    assert dropped.engine_session.closed and not newer.engine_session.closed
    kept = app[PARKED_KEY].take("c")  # the engine session with the meter it reads
    assert kept is not None and kept.engine_session is newer.engine_session  # type: ignore[comparison-overlap]
    assert kept.meter is newer.meter


async def test_with_no_resume_window_nothing_is_kept() -> None:
    app = parking_app(window_s=0, max_parked=5)
    call = Call("a", "peer_closed")
    assert not park_call(app, call)  # type: ignore[arg-type]
    await settle(app)
    assert call.engine_session.closed


async def test_the_sweep_closes_what_outlived_its_window() -> None:
    app = parking_app(window_s=5, max_parked=5)
    clock: Any = app[CLOCK_KEY]
    call = Call("a", "peer_failed")
    park_call(app, call)  # type: ignore[arg-type]
    sweep = app[APP_TASKS_KEY].spawn("sweep", sweep_parked(app))
    await clock.advance(SWEEP_INTERVAL_S * 3)
    assert not call.engine_session.closed
    await clock.advance(5.0)
    assert call.engine_session.closed and len(app[PARKED_KEY]) == 0
    await app[APP_TASKS_KEY].close(1.0)
    assert sweep.cancelled()
