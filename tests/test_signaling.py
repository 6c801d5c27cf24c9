"""Bad input over real HTTP: clear 4xx JSON errors, nothing left behind."""

from __future__ import annotations

import json

import aiohttp
import pytest
from aiortc import RTCPeerConnection

from app.config import ServerConfig
from app.server import REGISTRY_KEY
from app.signaling import OfferError, parse_offer
from tests.utils import running_server


async def offer_sdp(kinds: tuple[str, ...] = ("audio",)) -> str:
    pc = RTCPeerConnection()
    for kind in kinds:
        pc.addTransceiver(kind, direction="sendrecv")
    if not kinds:
        pc.createDataChannel("events")
    await pc.setLocalDescription(await pc.createOffer())
    sdp: str = pc.localDescription.sdp
    await pc.close()
    return sdp


@pytest.mark.parametrize(("body", "status", "fragment"), [
    (b"{not json", 400, "not valid JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (b'{"sdp": "v=0", "type": "answer"}', 400, "'type' must be"),
    (b'{"type": "offer"}', 400, "'sdp' must be"),
    (b'{"sdp": "hello there", "type": "offer"}', 400, "not a session description"),
    (b'{"sdp": "v=0\\r\\no=- 1 1 IN IP4 0.0.0.0\\r\\n", "type": "offer"}', 400, "no audio"),
])
async def test_bad_bodies_get_clear_json_errors(body: bytes, status: int, fragment: str) -> None:
    async with running_server() as (url, app), aiohttp.ClientSession() as http, \
            http.post(url + "offer", data=body) as resp:
        assert resp.status == status
        assert fragment in (await resp.json())["error"]
        assert len(app[REGISTRY_KEY]) == 0


async def test_offer_without_audio_is_refused() -> None:
    sdp = await offer_sdp(("video",))
    async with running_server() as (url, _), aiohttp.ClientSession() as http, \
            http.post(url + "offer", json={"sdp": sdp, "type": "offer"}) as resp:
        assert resp.status == 400
        assert "no audio" in (await resp.json())["error"]


async def test_semantically_bad_sdp_is_refused_and_cleaned_up() -> None:
    sdp = (await offer_sdp()).replace("a=ice-ufrag", "a=x-removed").replace("a=fingerprint",
                                                                          "a=x-gone")
    async with running_server() as (url, app), aiohttp.ClientSession() as http, \
            http.post(url + "offer", json={"sdp": sdp, "type": "offer"}) as resp:
        assert resp.status == 400, await resp.text()
        assert "could not be applied" in (await resp.json())["error"]
        assert len(app[REGISTRY_KEY]) == 0


async def test_oversized_body_is_413_json() -> None:
    cfg = ServerConfig(engine="echo", ice_loopback=True, max_body_bytes=4096)
    async with running_server(cfg) as (url, _), aiohttp.ClientSession() as http, \
            http.post(url + "offer", data=b"x" * 100_000) as resp:
        assert resp.status == 413
        assert "larger than" in (await resp.json())["error"]


async def test_token_required_when_configured() -> None:
    cfg = ServerConfig(engine="echo", ice_loopback=True, token="s3cret")
    sdp = await offer_sdp()
    async with running_server(cfg) as (url, _), aiohttp.ClientSession() as http:
        async with http.post(url + "offer", json={"sdp": sdp, "type": "offer"}) as resp:
            assert resp.status == 401
        async with http.post(url + "offer", json={"sdp": sdp, "type": "offer"},
                             headers={"Authorization": "Bearer s3cret"}) as resp:
            assert resp.status == 200


async def test_full_server_answers_503_with_retry_after() -> None:
    cfg = ServerConfig(engine="echo", ice_loopback=True, max_sessions=1)
    async with running_server(cfg) as (url, app), aiohttp.ClientSession() as http:
        async with http.post(url + "offer", json={"sdp": await offer_sdp(), "type": "offer"}) as r:
            assert r.status == 200
        async with http.post(url + "offer", json={"sdp": await offer_sdp(), "type": "offer"}) as r:
            assert r.status == 503 and r.headers["Retry-After"] == "10"
            assert "full" in (await r.json())["error"]
        assert len(app[REGISTRY_KEY]) == 1


async def test_health_and_page() -> None:
    async with running_server() as (url, _), aiohttp.ClientSession() as http:
        async with http.get(url + "health") as resp:
            assert (await resp.json())["engine"] == "echo"
        async with http.get(url) as resp:
            assert "omnicall" in await resp.text()
        async with http.get(url + "static/app.js") as resp:
            assert resp.status == 200


def test_parse_offer_video_flag() -> None:
    import asyncio
    sdp = asyncio.run(offer_sdp(("audio", "video")))
    offer = parse_offer(json.dumps({"sdp": sdp, "type": "offer"}).encode())
    assert offer.has_audio and offer.has_video
    with pytest.raises(OfferError):
        parse_offer(b'{"sdp": "v=0' + b"x" * 70_000 + b'", "type": "offer"}')


async def test_engine_admission_refusal_is_503() -> None:
    from engine.echo import EchoEngine

    class Saturated(EchoEngine):
        def admission_problem(self, active_sessions: int) -> str | None:
            return "the assistant is busy answering other calls"

    async with running_server(engine=Saturated()) as (url, app), \
            aiohttp.ClientSession() as http, \
            http.post(url + "offer", json={"sdp": await offer_sdp(), "type": "offer"}) as r:
        assert r.status == 503 and r.headers["Retry-After"] == "10"
        assert "busy" in (await r.json())["error"]
        assert len(app[REGISTRY_KEY]) == 0
