"""What the internet does to a server, against a real ``omnicall serve`` process.

Tries, in order: fuzzed ``POST /offer`` bodies (broken and deeply nested JSON, wrong types),
SDP mutations of a real Chromium offer and a real aiortc offer, hostile data-channel messages
on a live call (with a second call that must not notice), slow-header connections, an
oversized body, a peer that vanishes, and ``kill -9`` of one of two workers. Prints a table of
what was tried and what held, then one line:

    RESULT fuzz_cases=N fuzz_5xx=N leaked_sessions=N vanish_free_s=X worker_restart_s=X

Goals: fuzz_cases >= 2000, fuzz_5xx = 0, leaked_sessions = 0, vanish_free_s <= 5,
worker_restart_s <= 5. All traffic stays on 127.0.0.1.

    .venv/bin/python bench/reliability.py [--seed N] [--cases 2400]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load import free_port  # noqa: E402
from omnicall.client import Microphone, connect  # noqa: E402
from tests.fuzz_cases import (  # noqa: E402
    CHROMIUM_OFFER,
    control_messages,
    json_bodies,
    sdp_offers,
)
from tests.test_signaling import offer_sdp  # noqa: E402
from tests.utils import tone, vanish, wait_for  # noqa: E402

CONNECT_TIMEOUT_S = 3.0


async def start(*flags: str) -> tuple[asyncio.subprocess.Process, str]:
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        str(ROOT / ".venv" / "bin" / "omnicall"), "serve", "--engine", "loopback", "--ice-loopback",
        "--port", str(port), "--offer-rate-per-min", "0", "--log-level", "WARNING",
        "--connect-timeout-s", str(CONNECT_TIMEOUT_S), *flags,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert server.stdout is not None
    if b"ready" not in await asyncio.wait_for(server.stdout.readline(), 120):
        raise RuntimeError("server did not start")
    return server, f"http://127.0.0.1:{port}/"


async def stop(server: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        server.send_signal(signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(server.wait(), 20)


async def get_json(url: str) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http, http.get(url) as resp:
        data: dict[str, Any] = await resp.json()
        return data


async def metric(url: str, name: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(url + "metrics") as resp:
        text = await resp.text()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name)


async def post_many(url: str, bodies: list[bytes]) -> dict[int, int]:
    statuses: dict[int, int] = {}
    pending = list(reversed(bodies))

    async def client(http: aiohttp.ClientSession) -> None:
        while pending:
            body = pending.pop()
            async with http.post(url + "offer", data=body,
                                 headers={"Content-Type": "application/json"}) as resp:
                await resp.read()
                statuses[resp.status] = statuses.get(resp.status, 0) + 1

    async with aiohttp.ClientSession() as http:
        await asyncio.gather(*(client(http) for _ in range(8)))
    return statuses


def fmt(statuses: dict[int, int]) -> str:
    return " ".join(f"{code}x{n}" for code, n in sorted(statuses.items()))


async def slowloris(url: str, connections: int) -> float:
    """Seconds until the server closed the last of ``connections`` slow-header clients."""
    port = int(url.rsplit(":", 1)[1].strip("/"))
    began = time.monotonic()

    async def one() -> float:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        while True:
            try:
                writer.write(b"X-Slow: 1\r\n")
                await writer.drain()
                if await asyncio.wait_for(reader.read(100), 0.5) == b"":
                    break
            except TimeoutError:
                continue
            except ConnectionError:
                break
        writer.close()
        return time.monotonic() - began

    return max(await asyncio.wait_for(asyncio.gather(*(one() for _ in range(connections))), 60))


async def fuzz(url: str, seed: int, cases: int, rows: list[tuple[str, str, str]]) -> dict[str, int]:
    rng = random.Random(seed)
    chromium = CHROMIUM_OFFER.read_text().replace("\n", "\r\n").replace("\r\r", "\r")
    aiortc_offer = await offer_sdp(("audio", "video"))
    per = cases // 4
    totals = {"cases": 0, "5xx": 0}
    for name, bodies in (
            ("offer bodies: broken/nested JSON, wrong types", list(json_bodies(rng, per,
                                                                              aiortc_offer))),
            ("SDP mutations of a real Chromium offer", list(sdp_offers(rng, per, [chromium]))),
            ("SDP mutations of a real aiortc offer", list(sdp_offers(rng, per,
                                                                    [aiortc_offer])))):
        began = time.monotonic()
        statuses = await post_many(url, bodies)
        fives = sum(n for code, n in statuses.items() if code >= 500)
        totals["cases"] += len(bodies)
        totals["5xx"] += fives
        rows.append((name, str(len(bodies)),
                     f"{fmt(statuses)} in {time.monotonic() - began:.1f} s; "
                     f"{'held' if not fives else 'FAILED'}"))
    # data-channel messages on a live call, with a bystander call
    call = await connect(url, Microphone(tone(300, 120, rate=48_000)))
    bystander = await connect(url, Microphone(tone(500, 120, rate=48_000)))
    with contextlib.suppress(AssertionError):
        await wait_for(lambda: any(m.get("type") == "state" for m in call.messages), 15)
    channel = next(iter(call.pc.sctp._data_channels.values()))  # type: ignore[union-attr]
    messages = cases - 3 * per
    for index, message in enumerate(control_messages(rng, messages)):
        channel.send(message)
        if index % 50 == 0:
            await asyncio.sleep(0.05)
    channel.send(json.dumps({"type": "ping", "t": 7}))
    with contextlib.suppress(AssertionError):
        await wait_for(lambda: any(m.get("type") == "pong" and m.get("t") == 7
                                   for m in call.messages), 20)
    alive = (call.pc.connectionState == "connected"
             and bystander.pc.connectionState == "connected"
             and any(m.get("type") == "pong" for m in call.messages))
    totals["cases"] += messages
    rows.append(("data-channel messages (nested, huge, binary, unknown)", str(messages),
                 "call and bystander still connected, ping answered; held" if alive
                 else "call lost; FAILED"))
    totals["channel_failures"] = 0 if alive else 1
    await call.close()
    await bystander.close()
    return totals


async def vanish_free(url: str) -> float:
    """A client disappears without a goodbye: seconds until its slot is free."""
    call = await connect(url, Microphone(tone(300, 60, rate=48_000)))
    await asyncio.sleep(2.0)
    before = (await get_json(url + "health"))["sessions"]
    vanish(call.pc)
    began = time.monotonic()
    while (await get_json(url + "health"))["sessions"] >= before:
        if time.monotonic() - began > 30:
            break
        await asyncio.sleep(0.05)
    freed_s = time.monotonic() - began
    await call.close()
    return freed_s


async def worker_restart() -> float:
    server, url = await start("--workers", "2")
    try:
        health = await get_json(url + "health")
        victim = health["workers"][0]["pid"]
        os.kill(victim, signal.SIGKILL)
        began = time.monotonic()
        while time.monotonic() - began < 30:
            health = await get_json(url + "health")
            serving = {w.get("pid") for w in health["workers"] if w.get("status") == "ok"}
            if len(serving) == 2 and victim not in serving:
                break
            await asyncio.sleep(0.05)
        return time.monotonic() - began
    finally:
        await stop(server)


async def main(seed: int, cases: int) -> None:
    rows: list[tuple[str, str, str]] = []
    server, url = await start("--max-sessions", "3000", "--header-timeout-s", "5")
    try:
        await asyncio.sleep(0.5)
        fds_before = await metric(url, "process_open_fds")
        totals = await fuzz(url, seed, cases, rows)
        async with aiohttp.ClientSession() as http, http.post(
                url + "offer", data=b"x" * 1_000_000) as resp:
            verdict = "held" if resp.status == 413 else "FAILED"
            rows.append(("1 MB offer body", "1", f"{resp.status}; {verdict}"))
        closed_s = await slowloris(url, 100)
        rows.append(("slow-header connections (slowloris)", "100",
                     f"all closed after {closed_s:.1f} s (--header-timeout-s 5); "
                     f"{'held' if closed_s < 8 else 'FAILED'}"))
        await asyncio.sleep(CONNECT_TIMEOUT_S + 2)  # fuzzed offers that were answered expire
        health = await get_json(url + "health")
        leaked = int(health["sessions"])
        fds_after = await metric(url, "process_open_fds")
        rows.append(("left behind afterwards", "-",
                     f"{leaked} sessions, {int(fds_after - fds_before):+d} file descriptors"))
        vanish_s = await vanish_free(url)
        rows.append(("peer vanishes (no hangup, sockets gone)", "1",
                     f"slot free after {vanish_s:.2f} s, call parked for a resume"))
    finally:
        await stop(server)
    restart_s = await worker_restart()
    rows.append(("kill -9 of one of 2 workers", "1", f"replaced and serving in {restart_s:.2f} s"))
    width = max(len(r[0]) for r in rows)
    print(f"{'what was tried'.ljust(width)}  cases  what held")
    for name, count, result in rows:
        print(f"{name.ljust(width)}  {count:>5}  {result}")
    fuzz_5xx = totals["5xx"] + totals["channel_failures"]
    print(f"RESULT fuzz_cases={totals['cases']} fuzz_5xx={fuzz_5xx} leaked_sessions={leaked} "
          f"vanish_free_s={vanish_s:.2f} worker_restart_s={restart_s:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--cases", type=int, default=2400)
    args = parser.parse_args()
    from omnicall.media.third_party import use_loopback_candidates

    use_loopback_candidates(True)  # the client side offers 127.0.0.1 only
    asyncio.run(main(args.seed, args.cases))
