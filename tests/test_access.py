"""Origin check, per-IP offer rate limit and the page's ICE configuration, over real HTTP."""

from __future__ import annotations

import aiohttp
import pytest

from omnicall.app.access import parse_ice_servers
from omnicall.app.app_state import CALLS_KEY
from omnicall.app.config import ConfigError, ServerConfig
from tests.test_signaling import offer_sdp
from tests.utils import running_server


async def test_cross_origin_offer_is_refused() -> None:
    async with running_server() as (url, app), aiohttp.ClientSession() as http:
        sdp = await offer_sdp()
        async with http.post(url + "offer", json={"sdp": sdp, "type": "offer"},
                             headers={"Origin": "https://evil.example"}) as resp:
            assert resp.status == 403
            assert "origin" in (await resp.json())["error"]
        host = url.split("/")[2]
        async with http.post(url + "offer", json={"sdp": sdp, "type": "offer"},
                             headers={"Origin": f"http://{host}"}) as resp:
            assert resp.status == 200
        assert len(app[CALLS_KEY]) == 1


async def test_listed_origins_are_allowed() -> None:
    cfg = ServerConfig(engine="loopback", ice_loopback=True, allowed_origins="https://app.example")
    async with running_server(cfg) as (url, _), aiohttp.ClientSession() as http:
        sdp = await offer_sdp()
        async with http.post(url + "offer", json={"sdp": sdp, "type": "offer"},
                             headers={"Origin": "https://app.example"}) as resp:
            assert resp.status == 200
        host = url.split("/")[2]
        async with http.post(url + "offer", json={"sdp": sdp, "type": "offer"},
                             headers={"Origin": f"http://{host}"}) as resp:
            assert resp.status == 403


async def test_offer_rate_limit_per_ip() -> None:
    cfg = ServerConfig(engine="loopback", ice_loopback=True, offer_rate_per_min=1)
    async with running_server(cfg) as (url, _), aiohttp.ClientSession() as http:
        statuses = []
        for _ in range(12):
            async with http.post(url + "offer", data=b"{}") as resp:
                statuses.append(resp.status)
                if resp.status == 429:
                    assert int(resp.headers["Retry-After"]) >= 1
        # the burst of 10 is answered (400: empty offer), then the address must wait
        assert statuses[:10] == [400] * 10 and statuses[10:] == [429, 429]


async def test_client_config_lists_ice_servers() -> None:
    cfg = ServerConfig(engine="loopback", ice_loopback=True, token="t",
                       ice_servers="stun:stun.example.org:3478,turn:u%40x:p%3Aw@turn.example:443")
    async with running_server(cfg) as (url, _), aiohttp.ClientSession() as http, \
            http.get(url + "config") as resp:
        body = await resp.json()
    assert body["tokenRequired"] is True
    assert body["iceServers"] == [
        {"urls": "stun:stun.example.org:3478"},
        {"urls": "turn:turn.example:443", "username": "u@x", "credential": "p:w"}]


def test_bad_ice_server_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="STUN/TURN"):
        ServerConfig(ice_servers="http://nope").validate()
    assert parse_ice_servers("") == []
