"""Many calls at once: N real aiortc clients against one server (loopback engine), stepping N.

Clients send pre-encoded media at the page's rates (Opus 20 ms packets; VP8 640x480 at
``--video-fps``, default 5 as web/client/omnicall.js sends it, at ``--video-kbps``, default 250, the
page's cap; 15 fps was the camera rate the page sent before it capped its sender, 500 kbps
what this bench replayed before the page capped the bitrate): the packets of 10 s files
made with ffmpeg are demuxed once and replayed in a loop with continuous timestamps, paced
in real time (no client-side encoding; aiortc's MediaPlayer is not used because its looping restarts
timestamps and then floods the track), and the returned audio is consumed. The server runs
in its own process. For each N it reports, over a measurement window, from the per-call
stats the server sends on each data channel: late output frames, playout underruns, worst
ingest backlog (audio ring frames x 80 ms) and the server process's CPU.

Last line: ``RESULT av_sessions=<max N with 0 late frames> audio_sessions=<same, audio-only>``.

    .venv/bin/python bench/load.py [--av 2,4,6,8] [--audio 4,8,12,16] [--window-s 10]

``--engine remote``: the front-end's calls are echoed by an ``omnicall serve-engine --engine
echo`` process over the Realtime protocol (the front-end only does media and the protocol).

``LOAD_SERVER_CMD="python my_server.py"`` runs another server command instead (it is given
the port as its last argument and must print a line containing "ready").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import av
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaBlackhole
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from omnicall.media.third_party import use_loopback_candidates  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_VIDEO_FPS = 5  # what the page sends (SEND_FPS in web/client/omnicall.js) of its 15 fps camera
PAGE_VIDEO_KBPS = 250  # ... and its bitrate cap (SEND_MAX_BITRATE_BPS)


def make_media(folder: Path, video_fps: int = PAGE_VIDEO_FPS,
               video_kbps: int = PAGE_VIDEO_KBPS) -> tuple[Path, Path]:
    av_file, audio_file = folder / "av.webm", folder / "a.ogg"
    common = ["ffmpeg", "-y", "-loglevel", "error"]
    subprocess.run([*common, "-f", "lavfi", "-i", f"testsrc=size=640x480:rate={video_fps}",
                    "-f", "lavfi",
                    "-i", "sine=frequency=440:sample_rate=48000", "-t", "10", "-c:v", "libvpx",
                    "-b:v", f"{video_kbps}k", "-deadline", "realtime", "-c:a", "libopus",
                    "-b:a", "32k",
                    "-frame_duration", "20", str(av_file)], check=True)
    subprocess.run([*common, "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                    "-t", "10", "-c:a", "libopus", "-b:a", "32k", "-frame_duration", "20",
                    str(audio_file)], check=True)
    return av_file, audio_file


class PacketLoop(MediaStreamTrack):
    """Replays one stream's pre-encoded packets forever, paced by their timestamps."""

    def __init__(self, kind: str, packets: list[av.Packet], period_s: float) -> None:
        super().__init__()
        self.kind = kind
        self._packets = packets
        self._period_s = period_s
        self._i = 0
        self._start: float | None = None

    async def recv(self) -> av.Packet:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        lap, index = divmod(self._i, len(self._packets))
        source = self._packets[index]
        at_s = lap * self._period_s + float(source.pts * source.time_base)
        wait = self._start + at_s - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        packet = av.Packet(bytes(source))
        packet.time_base = source.time_base
        packet.pts = round(at_s / source.time_base)
        self._i += 1
        return packet


def demux(media: Path) -> dict[str, tuple[list[av.Packet], float]]:
    """Each stream's packets (with pts from 0) and its length in seconds."""
    out: dict[str, tuple[list[av.Packet], float]] = {}
    with av.open(str(media)) as container:
        for stream in container.streams:
            packets = [p for p in container.demux(stream) if p.size and p.pts is not None]
            container.seek(0)
            first = packets[0].pts
            for p in packets:
                p.pts -= first
            last = packets[-1]
            period = float((last.pts + (last.duration or 0)) * last.time_base)
            out[stream.type] = (packets, period)
    return out


class Client:
    def __init__(self, media: Path) -> None:
        self.tracks = [PacketLoop(kind, packets, period)
                       for kind, (packets, period) in demux(media).items()]
        self.pc = RTCPeerConnection()
        self.sink = MediaBlackhole()
        self.stats: dict[str, Any] = {}
        self.max_ring = 0

    async def connect(self, url: str, http: aiohttp.ClientSession) -> None:
        for track in self.tracks:
            self.pc.addTrack(track)
        channel = self.pc.createDataChannel("events")

        @channel.on("message")
        def on_message(text: str) -> None:
            msg = json.loads(text)
            if msg.get("type") == "stats":
                self.stats = msg
                self.max_ring = max(self.max_ring, msg["audio_ring"])

        @self.pc.on("track")
        def on_track(track: Any) -> None:
            self.sink.addTrack(track)

        await self.pc.setLocalDescription(await self.pc.createOffer())
        async with http.post(url + "offer", json={"sdp": self.pc.localDescription.sdp,
                                                  "type": "offer"}) as resp:
            body = await resp.json()
            if resp.status != 200:
                raise RuntimeError(f"offer refused: {resp.status} {body}")
        await self.pc.setRemoteDescription(RTCSessionDescription(body["sdp"], body["type"]))
        await self.sink.start()

    async def close(self) -> None:
        await self.sink.stop()
        await self.pc.close()


def cpu_seconds(pid: int) -> float:
    """CPU time of the server process and its worker processes (``--workers``)."""
    total = 0.0
    children = Path(f"/proc/{pid}/task/{pid}/children")
    pids = [pid] + [int(p) for p in children.read_text().split()] if children.exists() else [pid]
    for one in pids:
        with contextlib.suppress(FileNotFoundError):
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


async def step(url: str, pid: int, media: Path, n: int, window_s: float,
               engine_pid: int | None = None) -> dict[str, float]:
    clients = [Client(media) for _ in range(n)]
    async with aiohttp.ClientSession() as http:
        for client in clients:
            await client.connect(url, http)
    await asyncio.sleep(4.0)  # connect, settle
    start = [dict(c.stats) for c in clients]
    for c in clients:
        c.max_ring = 0
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    engine0 = cpu_seconds(engine_pid) if engine_pid else 0.0
    await asyncio.sleep(window_s)
    elapsed = time.monotonic() - t0
    cpu = (cpu_seconds(pid) - cpu0) / elapsed * 100
    engine_cpu = (cpu_seconds(engine_pid) - engine0) / elapsed * 100 if engine_pid else 0.0
    end = [dict(c.stats) for c in clients]
    await asyncio.gather(*(c.close() for c in clients))
    await asyncio.sleep(2.0)

    def delta(key: str) -> int:
        return sum(e.get(key, 0) - s.get(key, 0) for s, e in zip(start, end, strict=True))

    missing = sum(1 for e in end if not e)
    return {"late": delta("late_frames"), "underruns": delta("underruns"),
            "sent": delta("sent_frames"), "lag_ms": max(c.max_ring for c in clients) * 80,
            "cpu": cpu, "engine_cpu": engine_cpu, "no_stats": missing}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def start_server(engine: str = "loopback", log_level: str = "WARNING", workers: int = 1,
                       extra: tuple[str, ...] = ()) -> tuple[asyncio.subprocess.Process, str]:
    """``omnicall serve`` (or ``$LOAD_SERVER_CMD <port>``) on loopback, once it is ready."""
    use_loopback_candidates(True)
    port = free_port()
    command = os.environ.get("LOAD_SERVER_CMD")
    argv = [*command.split(), str(port)] if command else [
        str(ROOT / ".venv" / "bin" / "omnicall"), "serve", "--engine", engine, "--ice-loopback",
        "--port", str(port), "--max-sessions", "64", "--offer-rate-per-min", "0",
        "--log-level", log_level, "--workers", str(workers), *extra]
    server = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    assert server.stdout is not None
    if b"ready" not in await asyncio.wait_for(server.stdout.readline(), 120):
        server.terminate()
        raise RuntimeError("server did not start")
    return server, f"http://127.0.0.1:{port}/"


async def stop_server(server: asyncio.subprocess.Process) -> None:
    server.terminate()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(server.wait(), 10)


async def main(av_steps: list[int], audio_steps: list[int], window_s: float,
               workers: int, engine: str, video_fps: int = PAGE_VIDEO_FPS,
               video_kbps: int = PAGE_VIDEO_KBPS) -> None:
    engine_server = None
    extra: tuple[str, ...] = ()
    if engine == "remote":  # the front-end only does media; echo runs in a model server
        from tests.utils import start_process

        engine_server = await start_process("serve-engine", "--engine", "loopback",
                                            "--max-sessions", "64")
        extra = ("--engine-url", engine_server.ws_url)
    server, url = await start_server(engine, workers=workers, extra=extra)
    await asyncio.sleep(3.0 if workers > 1 else 0.0)  # let every worker start listening
    try:
        with tempfile.TemporaryDirectory() as tmp:
            av_media, audio_media = make_media(Path(tmp), video_fps, video_kbps)
            best = {"av": 0, "audio": 0}
            for kind, steps, media in (("av", av_steps, av_media),
                                       ("audio", audio_steps, audio_media)):
                for n in steps:
                    r = await step(url, server.pid, media, n, window_s,
                                   engine_server.proc.pid if engine_server else None)
                    print(f"{kind:>5} N={n:>2}: late={r['late']:>4} underruns={r['underruns']:>4} "
                          f"frames={r['sent']:>6} max ingest lag={r['lag_ms']:>5.0f} ms "
                          f"server cpu={r['cpu']:5.1f}% (of one core; {workers} worker(s))"
                          + (f" engine server cpu={r['engine_cpu']:5.1f}%"
                             if engine_server else "")
                          + (f" [{r['no_stats']} calls sent no stats]" if r["no_stats"] else ""),
                          flush=True)
                    if r["late"] == 0 and not r["no_stats"]:
                        best[kind] = max(best[kind], n)
                    else:
                        break
    finally:
        await stop_server(server)
        if engine_server is not None:
            await engine_server.stop()
    print(f"engine: {engine}; video {video_fps} fps, {video_kbps} kbps")
    print("goal: >= 8 audio+video or >= 16 audio-only sessions with 0 late output frames")
    print(f"RESULT av_sessions={best['av']} audio_sessions={best['audio']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--av", default="2,4,6,8,10", help="audio+video steps")
    parser.add_argument("--audio", default="4,8,12,16,20", help="audio-only steps")
    parser.add_argument("--window-s", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2,
                        help="server processes (omnicall serve --workers); 2 on 2 cores")
    parser.add_argument("--engine", default="loopback", choices=("loopback", "remote", "cascade"),
                        help="remote: the front-end's engine is an echo serve-engine process; "
                             "cascade: the CPU assistant in-process (it admits 3 calls)")
    parser.add_argument("--video-fps", type=int, default=PAGE_VIDEO_FPS,
                        help="the clients' camera rate (the page sends 5; 15 before)")
    parser.add_argument("--video-kbps", type=int, default=PAGE_VIDEO_KBPS,
                        help="the clients' VP8 bitrate (the page caps it at 250; 500 before)")
    a = parser.parse_args()
    asyncio.run(main([int(x) for x in a.av.split(",")], [int(x) for x in a.audio.split(",")],
                     a.window_s, a.workers, a.engine, a.video_fps, a.video_kbps))
