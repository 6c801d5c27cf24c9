"""HTTP errors come back as JSON on API routes; a bug is a logged 500, never a traceback."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from omnicall.app.http_errors import error_middleware, json_error, reject_reason


async def client() -> TestClient:
    async def not_found(request: web.Request) -> web.Response:
        raise web.HTTPNotFound(reason="no such call")

    async def too_large(request: web.Request) -> web.Response:
        raise web.HTTPRequestEntityTooLarge(max_size=10, actual_size=20)

    async def bug(request: web.Request) -> web.Response:
        raise KeyError("a bug")

    app = web.Application(middlewares=[error_middleware])
    app.router.add_post("/offer", not_found)
    app.router.add_get("/page", not_found)
    app.router.add_get("/upload", too_large)
    app.router.add_get("/bug", bug)
    test = TestClient(TestServer(app))
    await test.start_server()
    return test


async def test_api_errors_are_json_and_page_errors_stay_html(
        caplog: pytest.LogCaptureFixture) -> None:
    test = await client()
    try:
        resp = await test.post("/offer")
        assert resp.status == 404 and await resp.json() == {"error": "no such call"}
        resp = await test.get("/page")
        assert resp.status == 404 and resp.content_type != "application/json"
        resp = await test.get("/upload")
        assert resp.status == 413 and "error" in await resp.json()
        resp = await test.get("/bug")
        assert resp.status == 500
        body = await resp.json()
        assert body == {"error": "internal error (logged on the server)"}
        assert "KeyError" not in str(body)
    finally:
        await test.close()
    assert any(r.exc_info and "GET /bug failed" in r.getMessage() for r in caplog.records)


def test_json_error_and_reject_reasons() -> None:
    response = json_error(429, "slow down", {"Retry-After": "3"})
    assert response.status == 429 and response.headers["Retry-After"] == "3"
    assert reject_reason(503) == "full" and reject_reason(401) == "unauthorized"
    assert reject_reason(418) == "418"
