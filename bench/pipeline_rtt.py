"""Click -> echo round trip through the full omnicall pipeline vs a bare aiortc echo.

Real headless Chromium sends 1 kHz clicks from an AudioWorklet and times their echo on the
same sample clock. Two servers run in this process on loopback:

- omnicall: ``create_app`` with the loopback engine: low-latency receive, 16 kHz resampling,
  80 ms AudioRing, aligner, engine worker thread, 24 kHz -> 48 kHz egress, playout queue,
  paced outgoing track;
- bare aiortc: the remote track sent straight back (aiortc defaults, receive prefetch=4).

Rounds alternate between the two so that machine load hits both alike. The last line is
``RESULT omnicall_ms=<median> aiortc_ms=<median> ratio=<omnicall/aiortc>``.

    .venv/bin/python bench/pipeline_rtt.py [--clicks 30] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
from pathlib import Path
from typing import Any

from aiohttp import web
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamTrack

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from omnicall.app.config import ServerConfig  # noqa: E402
from omnicall.app.http.server import create_app  # noqa: E402
from tests.chromium import chromium_page  # noqa: E402

PAGE = ROOT / "bench" / "rtt.html"


async def _page(_: web.Request) -> web.FileResponse:
    return web.FileResponse(PAGE)


def bare_aiortc_app() -> web.Application:
    """The plainest aiortc echo: whatever track arrives is sent back as is."""
    app = web.Application()
    pcs: set[RTCPeerConnection] = set()

    async def offer(request: web.Request) -> web.Response:
        body = await request.json()
        pc = RTCPeerConnection()
        pcs.add(pc)

        @pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            pc.addTrack(track)

        await pc.setRemoteDescription(RTCSessionDescription(sdp=body["sdp"], type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
        return web.json_response({"sdp": pc.localDescription.sdp, "type": "answer"})

    async def close_all(_: web.Application) -> None:
        await asyncio.gather(*(pc.close() for pc in pcs))

    app.router.add_post("/offer", offer)
    app.router.add_get("/rtt", _page)
    app.on_shutdown.append(close_all)
    return app


async def start(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/rtt"


def summary(name: str, values: list[float]) -> str:
    v = sorted(values)
    p90 = v[int(0.9 * (len(v) - 1))]
    return (f"{name:>10}: n={len(v)} median={statistics.median(v):6.1f} ms  "
            f"min={v[0]:6.1f}  p90={p90:6.1f}  max={v[-1]:6.1f}")


async def main(clicks: int, rounds: int, jitter_frames: int) -> None:
    omni_app = create_app(ServerConfig(engine="loopback", ice_loopback=True, port=0,
                                       jitter_frames=jitter_frames))
    omni_app.router.add_get("/rtt", _page)
    omni_runner, omni_url = await start(omni_app)
    bare_runner, bare_url = await start(bare_aiortc_app())
    results: dict[str, list[float]] = {"omnicall": [], "aiortc": []}
    lost: dict[str, int] = {"omnicall": 0, "aiortc": 0}
    try:
        async with chromium_page() as page:
            for r in range(rounds):
                for name, url in (("omnicall", omni_url), ("aiortc", bare_url)):
                    await page.goto(url)
                    got: list[Any] = await page.evaluate("n => window.measure(n)", clicks)
                    ok = [float(x) for x in got if x is not None]
                    lost[name] += len(got) - len(ok)
                    results[name] += ok
                    print(f"round {r + 1} {name}: median {statistics.median(ok):.1f} ms "
                          f"({len(ok)} clicks)", flush=True)
    finally:
        await omni_runner.cleanup()
        await bare_runner.cleanup()
    for name, values in results.items():
        print(summary(name, values) + f"  lost={lost[name]}")
    omni = statistics.median(results["omnicall"])
    bare = statistics.median(results["aiortc"])
    print(f"goal: ratio <= 1.0 (omnicall median / bare aiortc median); "
          f"omnicall jitter_frames={jitter_frames}")
    print(f"RESULT omnicall_ms={omni:.1f} aiortc_ms={bare:.1f} ratio={omni / bare:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=20, help="clicks per round and server")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jitter-frames", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main(args.clicks, args.rounds, args.jitter_frames))
