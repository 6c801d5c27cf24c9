"""/health, /metrics and /config of one process, and the live sample the gauges read."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from omnicall.app.app_state import CALLS_KEY
from omnicall.app.config import ServerConfig
from omnicall.app.server import create_app
from omnicall.app.status_routes import buffer_totals, live_sample


class Call:
    def __init__(self, session_id: str, frames: dict[str, int]) -> None:
        self.id = session_id
        self.frames = frames

    def buffer_frames(self) -> dict[str, int]:
        return self.frames

    def send(self, message: dict[str, Any]) -> bool:
        return False


def test_buffer_totals_sum_over_calls() -> None:
    calls = [Call("a", {"audio_ring": 2, "jitter_buffer": 5}), Call("b", {"audio_ring": 1}),
             Call("c", {"realtime_input": 3})]
    assert buffer_totals(calls) == {"audio_ring": 3, "jitter_buffer": 5, "realtime_input": 3}
    assert buffer_totals([]) == {}


async def test_the_routes_say_what_this_process_holds() -> None:
    config = ServerConfig(engine="loopback", max_sessions=3, ice_servers="stun:stun.example:3478",
                          token="t0ken", video_fps=1.5)
    app = create_app(config)
    test = TestClient(TestServer(app))
    await test.start_server()
    try:
        app[CALLS_KEY].add(Call("a", {"jitter_buffer": 4}))  # type: ignore[arg-type]
        health = await (await test.get("/health")).json()
        assert health["status"] == "ok" and health["engine"] == "loopback"
        assert (health["sessions"], health["max_sessions"], health["parked"]) == (1, 3, 0)
        page = await (await test.get("/config")).json()
        assert page["tokenRequired"] and page["maxVideoFps"] == 1.5
        assert page["video"] is True
        assert page["iceServers"] == [{"urls": "stun:stun.example:3478"}]
        metrics = await (await test.get("/metrics")).text()
        assert "omnicall_active_sessions 1.0" in metrics
        assert 'omnicall_buffer_frames{buffer="jitter_buffer"} 4.0' in metrics
        sample = live_sample(app)
        assert sample["sessions"] == 1 and sample["buffers"] == {"jitter_buffer": 4}
        assert sample["degrade_level"] == 0 and sample["tasks"] > 0
    finally:
        app[CALLS_KEY].sessions.clear()
        await test.close()


async def test_the_page_is_told_when_video_is_off() -> None:
    test = TestClient(TestServer(create_app(ServerConfig(engine="loopback", video=False))))
    await test.start_server()
    try:
        assert (await (await test.get("/config")).json())["video"] is False
    finally:
        await test.close()
