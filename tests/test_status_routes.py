"""/health, /metrics and /config of one process, and the live sample the gauges read."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from omnicall.app.app_state import CALLS_KEY
from omnicall.app.config import ServerConfig
from omnicall.app.http.server import create_app
from omnicall.app.status_routes import buffer_totals, create_metrics_app, live_sample
from tests.utils import start_process

METRICS_AUTH = {"Authorization": "Bearer m3trics"}


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
                          token="t0ken", metrics_token="m3trics", video_fps=1.5)
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
        metrics = await (await test.get("/metrics", headers=METRICS_AUTH)).text()
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


async def test_with_a_token_metrics_are_private_and_the_public_routes_stay_public() -> None:
    """Measured before: 200 for anyone on a server with --token (build info, versions, call
    figures). Now 403 on the main port; /, /config and /health are public by design."""
    test = TestClient(TestServer(create_app(ServerConfig(engine="loopback", token="t0ken"))))
    await test.start_server()
    try:
        for headers in ({}, {"Authorization": "Bearer t0ken"}):  # the call token is no key
            resp = await test.get("/metrics", headers=headers)
            assert resp.status == 403
            body = await resp.json()
            assert "--metrics-listen" in body["error"] and "omnicall_" not in body["error"]
        for path in ("/", "/config", "/health"):
            assert (await test.get(path)).status == 200, path
    finally:
        await test.close()


async def test_a_metrics_token_guards_metrics_with_or_without_a_call_token() -> None:
    for token in ("", "t0ken"):
        config = ServerConfig(engine="loopback", token=token, metrics_token="m3trics")
        test = TestClient(TestServer(create_app(config)))
        await test.start_server()
        try:
            missing = await test.get("/metrics")
            assert missing.status == 401 and "Bearer" in missing.headers["WWW-Authenticate"]
            wrong = await test.get("/metrics", headers={"Authorization": "Bearer t0ken"})
            assert wrong.status == 401
            assert (await wrong.json())["error"] == "wrong metrics token"
            right = await test.get("/metrics", headers=METRICS_AUTH)
            assert right.status == 200
            assert "omnicall_build_info" in await right.text()
        finally:
            await test.close()


async def test_without_a_token_metrics_answer_on_the_main_port_as_before() -> None:
    test = TestClient(TestServer(create_app(ServerConfig(engine="loopback"))))
    await test.start_server()
    try:
        resp = await test.get("/metrics")
        assert resp.status == 200 and "omnicall_build_info" in await resp.text()
    finally:
        await test.close()


async def test_metrics_listen_moves_metrics_to_their_own_listener() -> None:
    config = ServerConfig(engine="loopback", token="t0ken", metrics_listen="0")
    app = create_app(config)
    main = TestClient(TestServer(app))
    await main.start_server()
    own = TestClient(TestServer(create_metrics_app(app)))
    await own.start_server()
    try:
        app[CALLS_KEY].add(Call("a", {"jitter_buffer": 4}))  # type: ignore[arg-type]
        assert (await main.get("/metrics")).status == 404
        resp = await own.get("/metrics")  # no token: the listener is private (loopback)
        assert resp.status == 200
        assert "omnicall_active_sessions 1.0" in await resp.text()
        assert (await (await own.get("/health")).json())["sessions"] == 1
        for path in ("/", "/config"):  # nothing else of the server is there
            assert (await own.get(path)).status == 404, path
        assert (await own.post("/offer", json={})).status in (404, 405)
    finally:
        app[CALLS_KEY].sessions.clear()
        await own.close()
        await main.close()


async def test_a_sibling_worker_reads_metrics_over_its_private_socket(tmp_path: Path) -> None:
    """With --workers the worker asked for /metrics asks its siblings over their Unix sockets
    (``scope=worker``): that path stays open whatever guards the public port."""
    app = create_app(ServerConfig(engine="loopback", token="t0ken", metrics_listen="0"))
    runner = web.AppRunner(app)
    await runner.setup()
    path = tmp_path / "worker-1.sock"
    await web.UnixSite(runner, str(path)).start()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(path))) as http:
            async with http.get("http://worker/metrics?scope=worker") as resp:
                assert resp.status == 200 and "omnicall_build_info" in await resp.text()
            async with http.get("http://worker/metrics") as resp:
                assert resp.status == 404  # only a sibling's own-view request
        async with aiohttp.ClientSession() as http, \
                http.get(f"http://127.0.0.1:{port}/metrics?scope=worker") as resp:
            assert resp.status == 404  # the public port: scope=worker opens nothing
    finally:
        await runner.cleanup()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_serve_puts_metrics_on_the_loopback_listener_it_is_given() -> None:
    """A real ``omnicall serve`` process: --metrics-listen PORT listens on 127.0.0.1; the
    public port keeps /health and loses /metrics. With --workers 2 both workers answer
    on it, for the whole group."""
    for workers in ("1", "2"):
        metrics_port = _free_port()
        server = await start_process("serve", "--engine", "loopback", "--token", "t0ken",
                                     "--metrics-listen", str(metrics_port),
                                     "--workers", workers)
        try:
            async with aiohttp.ClientSession() as http:
                async with http.get(server.http_url + "metrics") as resp:
                    assert resp.status == 404
                async with http.get(server.http_url + "health") as resp:
                    assert resp.status == 200
                async with http.get(f"http://127.0.0.1:{metrics_port}/metrics") as resp:
                    assert resp.status == 200
                    text = await resp.text()
                assert "omnicall_build_info" in text
                if workers == "2":
                    assert "omnicall_workers_serving 2.0" in text
        finally:
            assert await server.stop() == 0
