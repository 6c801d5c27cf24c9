"""A loopback UDP relay that impairs a WebRTC call's packets (test and bench infrastructure).

Two sockets on 127.0.0.1: one faces the client, one the server. Each datagram from the
client goes out of the server-facing socket to the server's real ICE candidate, each one
from the server out of the client-facing socket to the client, and :mod:`bench.impair`
decides, per direction (``up``: client -> server, ``down``: server -> client), whether and
when. Everything the call sends takes that path: STUN checks and consent, DTLS, RTP and
RTCP.

A call is routed through it by rewriting the candidates of its SDP (no change to either
peer): :meth:`UdpRelay.route_offer` records the client's candidate and replaces it with the
server-facing socket's address, :meth:`UdpRelay.route_answer` the same for the server's with
the client-facing one. So each peer only ever sees the relay (the client's address is then
kept up to date from its datagrams). An aiortc client's offer and answer are rewritten by
the test itself (``omnicall.client.connect(..., route=relay)``); a browser page posts its
own offer, so :func:`signaling_proxy` stands in front of the server: the page is loaded from
it and its ``/offer`` goes both ways through the same two rewrites. (Rewriting only the
answer is not enough: the server would still check the page's real candidates, around the
relay, and the browser could pick that path.)

Bounded: at most ``max_pending`` datagrams are held (more are dropped and counted) and none
longer than :data:`bench.impair.MAX_DELAY_S`; :meth:`UdpRelay.close` cancels what is held.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import ClientSession, web

from bench.impair import Deliver, Impairment, ImpairmentCore

logger = logging.getLogger(__name__)

Address = tuple[str, int]
_CANDIDATE = re.compile(
    r"^a=candidate:(\S+) (\d+) (\S+) (\d+) (\S+) (\d+) (typ .*)$", re.IGNORECASE)


class RelayError(RuntimeError):
    """The relay cannot route this call (no UDP candidate to reach, not started)."""


def rewrite_candidates(sdp: str, to: Address) -> tuple[str, Address]:
    """``sdp`` with every UDP candidate pointing at ``to`` (other candidates removed), and the
    first UDP candidate's original address (127.0.0.1's when there is one)."""
    lines, found = [], []
    for line in sdp.splitlines():
        match = _CANDIDATE.match(line)
        if match is None:
            lines.append(line)
            continue
        foundation, component, transport, priority, host, port, rest = match.groups()
        if transport.lower() != "udp":
            continue
        found.append((host, int(port)))
        lines.append(f"a=candidate:{foundation} {component} {transport} {priority} {to[0]} "
                     f"{to[1]} {rest}")
    if not found:
        raise RelayError("the SDP has no UDP candidate to relay")
    original = next((a for a in found if a[0] == "127.0.0.1"), found[0])
    return "\r\n".join(lines) + "\r\n", original


class _Side(asyncio.DatagramProtocol):
    def __init__(self, relay: UdpRelay, facing: str) -> None:
        self.relay, self.facing = relay, facing
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.relay.received(self.facing, data, (addr[0], addr[1]))

    def error_received(self, exc: Exception) -> None:
        self.relay.counts[f"{self.facing}_socket_error"] += 1


class UdpRelay:
    """Client <-> relay <-> server on loopback, each direction impaired by its own core."""

    def __init__(self, up: Impairment | None = None, down: Impairment | None = None,
                 seed: int = 0, max_pending: int = 4096) -> None:
        self.up = ImpairmentCore(up or Impairment(), seed, "up")
        self.down = ImpairmentCore(down or Impairment(), seed, "down")
        self.max_pending = max_pending
        self.client_addr: Address | None = None
        self.server_addr: Address | None = None
        self.counts: Counter[str] = Counter()
        self._sides: dict[str, _Side] = {}
        self._pending: set[asyncio.TimerHandle] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> UdpRelay:
        self._loop = asyncio.get_running_loop()
        for facing in ("client", "server"):
            _, side = await self._loop.create_datagram_endpoint(
                lambda f=facing: _Side(self, f), local_addr=("127.0.0.1", 0))  # type: ignore[misc]
            self._sides[facing] = side
        return self

    def address(self, facing: str) -> Address:
        side = self._sides.get(facing)
        if side is None or side.transport is None:
            raise RelayError("the relay is not started")
        host, port = side.transport.get_extra_info("sockname")[:2]
        return host, port

    def route_offer(self, sdp: str) -> str:
        """The client's offer as the server should see it: candidates -> the relay."""
        sdp, self.client_addr = rewrite_candidates(sdp, self.address("server"))
        return sdp

    def route_answer(self, sdp: str) -> str:
        """The server's answer as the client should see it: candidates -> the relay."""
        sdp, self.server_addr = rewrite_candidates(sdp, self.address("client"))
        return sdp

    def now(self) -> float:
        if self._loop is None:
            raise RelayError("the relay is not started")
        return self._loop.time()

    def begin_outage(self, duration_s: float) -> None:
        """Both directions go dark now for ``duration_s``."""
        now = self.now()
        self.up.add_outage(now, duration_s)
        self.down.add_outage(now, duration_s)

    def received(self, facing: str, data: bytes, addr: Address) -> None:
        if facing == "client":
            self.client_addr = addr  # the client's latest address (it may have moved)
            core, out, to = self.up, "server", self.server_addr
        else:
            core, out, to = self.down, "client", self.client_addr
        if to is None:
            self.counts["no_peer"] += 1
            return
        verdict = core.decide(len(data), self.now())
        if not isinstance(verdict, Deliver):
            return
        if len(self._pending) >= self.max_pending:
            self.counts["overflow"] += 1
            return
        assert self._loop is not None
        handle: asyncio.TimerHandle | None = None

        def send() -> None:
            self._pending.discard(handle)  # type: ignore[arg-type]
            transport = self._sides[out].transport
            if transport is not None and not transport.is_closing():
                transport.sendto(data, to)

        handle = self._loop.call_at(verdict.at_s, send)
        self._pending.add(handle)

    def summary(self) -> dict[str, Any]:
        return {"up": dict(self.up.counts), "down": dict(self.down.counts), **self.counts}

    def close(self) -> None:
        for handle in self._pending:
            handle.cancel()
        self._pending.clear()
        for side in self._sides.values():
            if side.transport is not None:
                side.transport.close()


#: response headers not passed on by the proxy (the body is re-sent whole and decoded)
_HOP_HEADERS = frozenset({"connection", "content-length", "content-encoding",
                          "transfer-encoding", "keep-alive"})
#: request headers passed on (Origin is not: the server would compare it with its own host)
_PASSED_HEADERS = ("Authorization", "Content-Type", "Accept")


def signaling_proxy(relay: UdpRelay, upstream: str) -> web.Application:
    """An HTTP front for the server at ``upstream`` (its base URL, ending in ``/``) whose
    calls all go through ``relay``: load the page from it, and the ``POST /offer`` the page
    makes has its offer's candidates pointed at the relay before the server sees them
    (:meth:`UdpRelay.route_offer`) and the answer's before the page does
    (:meth:`UdpRelay.route_answer`). Every other request is passed through as it is. One
    call at a time (the relay routes one)."""
    http_key = web.AppKey("http", ClientSession)

    async def http_session(app: web.Application) -> AsyncIterator[None]:
        async with ClientSession() as http:
            app[http_key] = http
            yield

    def headers(request: web.Request) -> dict[str, str]:
        return {name: request.headers[name] for name in _PASSED_HEADERS
                if name in request.headers}

    async def offer(request: web.Request) -> web.Response:
        body = await request.json()
        try:
            body["sdp"] = relay.route_offer(str(body.get("sdp", "")))
        except RelayError as exc:
            return web.json_response({"error": f"not routed through the relay: {exc}"},
                                     status=400)
        async with request.app[http_key].post(upstream + "offer", json=body,
                                              headers=headers(request)) as resp:
            answer = await resp.json()
            if resp.status == 200:
                answer["sdp"] = relay.route_answer(answer["sdp"])
            return web.json_response(answer, status=resp.status)

    async def passthrough(request: web.Request) -> web.Response:
        async with request.app[http_key].request(
                request.method, upstream + request.path_qs.lstrip("/"),
                headers=headers(request), data=await request.read()) as resp:
            return web.Response(body=await resp.read(), status=resp.status, headers={
                k: v for k, v in resp.headers.items() if k.lower() not in _HOP_HEADERS})

    app = web.Application()
    app.cleanup_ctx.append(http_session)
    app.router.add_post("/offer", offer)
    app.router.add_route("*", "/{tail:.*}", passthrough)
    return app
