"""Bad input over real HTTP: clear 4xx JSON errors, nothing left behind."""

from __future__ import annotations

import json

import aiohttp
import pytest
from aiortc import RTCPeerConnection

from omnicall.app.app_state import CALLS_KEY
from omnicall.app.config import ServerConfig
from omnicall.app.http.signaling import OfferError, parse_offer
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
        assert len(app[CALLS_KEY]) == 0


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
        assert len(app[CALLS_KEY]) == 0


async def test_oversized_body_is_413_json() -> None:
    cfg = ServerConfig(engine="loopback", ice_loopback=True, max_body_bytes=4096)
    async with running_server(cfg) as (url, _), aiohttp.ClientSession() as http, \
            http.post(url + "offer", data=b"x" * 100_000) as resp:
        assert resp.status == 413
        assert "larger than" in (await resp.json())["error"]


async def test_token_required_when_configured() -> None:
    cfg = ServerConfig(engine="loopback", ice_loopback=True, token="s3cret")
    sdp = await offer_sdp()
    async with running_server(cfg) as (url, _), aiohttp.ClientSession() as http:
        async with http.post(url + "offer", json={"sdp": sdp, "type": "offer"}) as resp:
            assert resp.status == 401
        async with http.post(url + "offer", json={"sdp": sdp, "type": "offer"},
                             headers={"Authorization": "Bearer s3cret"}) as resp:
            assert resp.status == 200


async def test_full_server_answers_503_with_retry_after() -> None:
    cfg = ServerConfig(engine="loopback", ice_loopback=True, max_sessions=1)
    async with running_server(cfg) as (url, app), aiohttp.ClientSession() as http:
        async with http.post(url + "offer", json={"sdp": await offer_sdp(), "type": "offer"}) as r:
            assert r.status == 200
        async with http.post(url + "offer", json={"sdp": await offer_sdp(), "type": "offer"}) as r:
            assert r.status == 503 and r.headers["Retry-After"] == "10"
            assert "full" in (await r.json())["error"]
        assert len(app[CALLS_KEY]) == 1


async def test_health_and_page() -> None:
    async with running_server() as (url, _), aiohttp.ClientSession() as http:
        async with http.get(url + "health") as resp:
            assert (await resp.json())["engine"] == "loopback"
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
    from omnicall.engine.loopback import LoopbackEngine

    class Saturated(LoopbackEngine):
        def admission_problem(self, active_sessions: int) -> str | None:
            return "the assistant is busy answering other calls"

    async with running_server(engine=Saturated()) as (url, app), \
            aiohttp.ClientSession() as http, \
            http.post(url + "offer", json={"sdp": await offer_sdp(), "type": "offer"}) as r:
        assert r.status == 503 and r.headers["Retry-After"] == "10"
        assert "busy" in (await r.json())["error"]
        assert len(app[CALLS_KEY]) == 0


async def post_offer(url: str, body: dict[str, object] | bytes,
                     headers: dict[str, str] | None = None) -> tuple[int, dict[str, object]]:
    async with aiohttp.ClientSession() as http, http.post(
            url + "offer", **({"data": body} if isinstance(body, bytes) else {"json": body}),
            headers=headers) as resp:
        return resp.status, await resp.json()


def with_lines(sdp: str, old: str, new: str) -> str:
    assert old in sdp, old
    return sdp.replace(old, new, 1)


async def test_regressions_from_the_fuzzer_are_clear_400s() -> None:
    """Each of these was once a 500: deep JSON, and aiortc's parser raising
    AssertionError, IndexError or StopIteration (as RuntimeError) on bad lines."""
    sdp = await offer_sdp(("audio", "video"))
    rtpmap = next(line for line in sdp.split("\r\n") if line.startswith("a=rtpmap:"))
    pt = rtpmap.split(":")[1].split()[0]
    bad = {
        "nested body": b"[" * 30_000 + b"]" * 30_000,
        "nested field": (b'{"type": "offer", "sdp": "v=0", "resume": ' + b"[" * 5000
                         + b"]" * 5000 + b"}"),
        "short candidate": with_lines(sdp, "a=mid:0", "a=mid:0\r\na=candidate:1"),
        "fmtp without rtpmap": with_lines(sdp, rtpmap, f"a=fmtp:{pt} minptime=10"),
        "rtcp-fb without a type": with_lines(sdp, rtpmap, f"{rtpmap}\r\na=rtcp-fb:{pt}"),
        "bad m= line": with_lines(sdp, "m=video", "m=video x"),
        "bundle of unknown mid": with_lines(sdp, "a=group:BUNDLE 0 1", "a=group:BUNDLE 7 0 1"),
        "unknown audio codecs": sdp.replace("opus", "opux").replace("PCMU", "XXXX").replace(
            "PCMA", "YYYY").replace("G722", "ZZZZ"),
    }
    async with running_server() as (url, app):
        for name, payload in bad.items():
            body = payload if isinstance(payload, bytes) else {"sdp": payload, "type": "offer"}
            status, answer = await post_offer(url, body)
            assert status == 400, (name, status, answer)
            assert isinstance(answer["error"], str) and answer["error"], name
        assert len(app[CALLS_KEY]) == 0


async def test_unsupported_codecs_never_hold_a_slot() -> None:
    """Four offers with unknown audio codecs used to lock every slot for good."""
    sdp = (await offer_sdp()).replace("opus", "opux").replace("PCMU", "XXXX").replace(
        "PCMA", "YYYY").replace("G722", "ZZZZ")
    cfg = ServerConfig(engine="loopback", ice_loopback=True, max_sessions=4, offer_rate_per_min=0)
    async with running_server(cfg) as (url, app):
        for _ in range(6):
            status, answer = await post_offer(url, {"sdp": sdp, "type": "offer"})
            assert status == 400 and "unsupported" in str(answer["error"])
        status, _ = await post_offer(url, {"sdp": await offer_sdp(), "type": "offer"})
        assert status == 200
        assert len(app[CALLS_KEY]) == 1


async def test_offer_that_fails_inside_aiortc_is_cleaned_up() -> None:
    """An offer that passes our checks but that aiortc refuses while applying it: 400, and the
    session, its tasks and its peer connection are gone."""
    sdp = with_lines(await offer_sdp(), "a=setup:actpass", "a=setup:weird")
    async with running_server() as (url, app):
        status, answer = await post_offer(url, {"sdp": sdp, "type": "offer"})
        assert status == 400, answer
        assert len(app[CALLS_KEY]) == 0
        import asyncio
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("call-")]


async def test_wrong_and_missing_tokens_are_told_apart_and_spend_no_offer_budget() -> None:
    cfg = ServerConfig(engine="loopback", ice_loopback=True, token="s3cret", offer_rate_per_min=1)
    sdp = await offer_sdp()
    async with running_server(cfg) as (url, _):
        status, missing = await post_offer(url, {"sdp": sdp, "type": "offer"})
        assert status == 401 and "needs an access token" in str(missing["error"])
        status, wrong = await post_offer(url, {"sdp": sdp, "type": "offer"},
                                         {"Authorization": "Bearer nope"})
        assert status == 401 and "wrong access token" in str(wrong["error"])
        for _ in range(6):  # more unauthenticated tries: they have their own budget
            await post_offer(url, {"sdp": sdp, "type": "offer"}, {"Authorization": "Bearer x"})
        # the same address still has its whole offer budget (burst of 10)
        for _ in range(3):
            status, answer = await post_offer(url, {"sdp": await offer_sdp(), "type": "offer"},
                                              {"Authorization": "Bearer s3cret"})
            assert status == 200, answer
        # guessing is limited too
        statuses = [(await post_offer(url, {"sdp": sdp, "type": "offer"},
                                      {"Authorization": "Bearer guess"}))[0] for _ in range(10)]
        assert 429 in statuses


async def test_the_offer_says_the_pages_mode() -> None:
    """The page's mode picks the server's echo canceller and noise suppressor (auto)."""
    sdp = await offer_sdp()
    assert parse_offer(json.dumps({"sdp": sdp, "type": "offer"}).encode()).mode is None
    body = {"sdp": sdp, "type": "offer", "mode": "kiosk"}
    assert parse_offer(json.dumps(body).encode()).mode == "kiosk"
    with pytest.raises(OfferError, match="mode"):
        parse_offer(json.dumps(body | {"mode": "stadium"}).encode())
