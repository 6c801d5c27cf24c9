"""Long calls: does anything grow? One server process, calls held open for a long time.

Two real aiortc clients (one audio+video, one audio-only, pre-encoded Opus/VP8 looped from
files, as in bench/load.py) stay connected for ``--minutes`` (default 10) to a server running
``--engine`` (default echo: the media plane at full rate). The server's /metrics is sampled
every ``--every-s``: resident memory, asyncio tasks, and queued frames in the rings and jitter
buffers. Growth is measured from the first sample after ``--warmup-s``.
Goal: RSS growth <= 5 MB over 10 minutes and no task growth.
Last line: ``RESULT rss_growth_mb=<> task_growth=<>``.

    .venv/bin/python bench/soak.py [--minutes 10] [--engine loopback]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load import Client, make_media, start_server, stop_server  # noqa: E402


async def sample(http: aiohttp.ClientSession, url: str) -> dict[str, float]:
    async with http.get(url + "metrics") as resp:
        text = await resp.text()
    out: dict[str, float] = {"buffers": 0.0}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "process_resident_memory_bytes":
                out["rss_mb"] = s.value / 1e6
            elif s.name == "omnicall_event_loop_tasks":
                out["tasks"] = s.value
            elif s.name == "omnicall_active_sessions":
                out["sessions"] = s.value
            elif s.name == "omnicall_buffer_frames":
                out["buffers"] += s.value
    return out


async def main(minutes: float, engine: str, every_s: float, warmup_s: float,
               log_level: str) -> None:
    server, url = await start_server(engine, log_level)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            av_media, audio_media = make_media(Path(tmp))
            clients = [Client(av_media), Client(audio_media)]
            async with aiohttp.ClientSession() as http:
                for client in clients:
                    await client.connect(url, http)
                started = time.monotonic()
                rows = []
                while time.monotonic() - started < minutes * 60:
                    await asyncio.sleep(every_s)
                    row = await sample(http, url)
                    row["t"] = elapsed = time.monotonic() - started
                    rows.append(row)
                    print(f"t={elapsed:6.0f} s rss={row['rss_mb']:7.1f} MB "
                          f"tasks={row['tasks']:4.0f} queued frames={row['buffers']:4.0f} "
                          f"calls={row['sessions']:.0f}", flush=True)
                await asyncio.gather(*(c.close() for c in clients))
    finally:
        await stop_server(server)
    steady = [r for r in rows if r["t"] >= warmup_s] or rows
    rss_growth = steady[-1]["rss_mb"] - steady[0]["rss_mb"]
    task_growth = steady[-1]["tasks"] - steady[0]["tasks"]
    print(f"over {steady[-1]['t'] - steady[0]['t']:.0f} s after a {warmup_s:.0f} s warm-up: "
          f"max queued frames {max(r['buffers'] for r in steady):.0f}")
    print("goal: RSS growth <= 5 MB over 10 minutes and no task growth")
    print(f"RESULT rss_growth_mb={rss_growth:.1f} task_growth={task_growth:.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--engine", default="loopback")
    parser.add_argument("--every-s", type=float, default=15.0)
    parser.add_argument("--warmup-s", type=float, default=60.0)
    parser.add_argument("--log-level", default="WARNING", help="the server's log level")
    a = parser.parse_args()
    asyncio.run(main(a.minutes, a.engine, a.every_s, a.warmup_s, a.log_level))
