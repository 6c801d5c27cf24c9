"""One real call against a deployed omnicall: an aiortc client speaks a question and checks
that the answer comes back in speech.

Used by ``deploy/smoke.sh`` against the container image and the compose stack (too slow for
``make test``). The client is the one the tests and benchmarks use (``tests.utils``: a real
aiortc peer, the bundled Piper voice as the caller's mouth); the reply's sound is heard by the
bundled Whisper tiny.en. Checks, in order:

- ``GET /health`` answers (waits for the models to load);
- ``/metrics`` on the public port is refused when a call token is set (403, or 404 when it
  is on a listener of its own), and answers on ``--metrics-url`` when one is given;
- a call: the user's words are transcribed, the assistant answers in text and in speech;
- with ``--redis-url``: the call's transcript is in Redis while the call is up (the
  front-end's ``--store redis://``).

A second question follows (the latency of a warm call). Last line: ``RESULT ok=<0|1>
first_sound_ms=<> second_sound_ms=<> user=<...> reply=<...> heard=<...> redis=<...>``.

    .venv/bin/python deploy/smoke_call.py https://127.0.0.1:8443/ --token T --insecure
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from omnicall.client import Microphone, connect  # noqa: E402
from omnicall.media.receive_jitter import install_low_latency_audio  # noqa: E402
from omnicall.media.third_party import use_loopback_candidates  # noqa: E402
from tests.utils import piper_speech, wait_for  # noqa: E402

QUESTION = "What is the capital of France?"
SECOND = "How many legs does a spider have?"  # a second turn: the latency of a warm call
LOUD = 800
WIRE_RATE = 48_000


class Ear:
    """What the client hears: (arrival time, mono int16 at 48 kHz) per frame."""

    def __init__(self) -> None:
        self.frames: list[tuple[float, np.ndarray]] = []

    async def run(self, track: MediaStreamTrack) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                frame = await track.recv()
                mono = frame.to_ndarray().reshape(-1)[::len(frame.layout.channels)]
                self.frames.append((time.monotonic(), mono.astype(np.int16)))

    def after(self, t: float, until: float = float("inf")) -> tuple[float | None, np.ndarray]:
        """When the first loud frame after ``t`` arrived, and what was heard until ``until``."""
        later = [(at, pcm) for at, pcm in self.frames if t < at < until]
        first = next((at for at, pcm in later if np.abs(pcm).max() > LOUD), None)
        audio = np.concatenate([pcm for _, pcm in later]) if later else np.zeros(0, np.int16)
        return first, audio


def transcribe(audio48k: np.ndarray) -> str:
    from faster_whisper import WhisperModel

    from omnicall.engine.bundled_models import whisper_tiny_en_dir
    from omnicall.media.resample import AudioConverter

    audio = AudioConverter(16_000).convert_array(audio48k, WIRE_RATE)
    model = WhisperModel(str(whisper_tiny_en_dir()), device="cpu", compute_type="int8")
    segments, _ = model.transcribe(audio.astype(np.float32) / 32768.0, language="en",
                                   beam_size=1)
    return " ".join(s.text.strip() for s in segments).strip()


async def wait_healthy(http: aiohttp.ClientSession, url: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            async with http.get(url + "health") as resp:
                if resp.status == 200:
                    health: dict[str, Any] = await resp.json()
                    return health
        except (aiohttp.ClientError, OSError):
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"{url}health did not answer within {timeout_s:.0f} s")
        await asyncio.sleep(1.0)


async def check_metrics(http: aiohttp.ClientSession, url: str, token: str,
                        metrics_url: str) -> list[str]:
    problems = []
    async with http.get(url + "metrics") as resp:
        print(f"public {url}metrics: {resp.status}", flush=True)
        if token and resp.status not in (403, 404):
            problems.append(f"public /metrics answered {resp.status} on a server with a token")
    if metrics_url:
        async with http.get(metrics_url) as resp:
            text = await resp.text()
            print(f"private {metrics_url}: {resp.status}, {len(text)} bytes", flush=True)
            if resp.status != 200 or "omnicall_build_info" not in text:
                problems.append(f"{metrics_url} answered {resp.status}")
    return problems


async def redis_holds(redis_url: str, session_id: str) -> bool:
    import redis.asyncio as redis

    client = redis.from_url(redis_url)
    try:
        return bool(await client.exists(f"omnicall:transcript:{session_id}"))
    finally:
        await client.aclose()


async def call(args: argparse.Namespace) -> int:
    url = args.url if args.url.endswith("/") else args.url + "/"
    connector = aiohttp.TCPConnector(ssl=False if args.insecure else None)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    problems: list[str] = []
    if args.loopback:
        use_loopback_candidates(True)
    async with aiohttp.ClientSession(connector=connector) as http:
        for other in args.wait_for:
            other = other if other.endswith("/") else other + "/"
            print(f"{other}health: {json.dumps(await wait_healthy(http, other, args.wait_s))}",
                  flush=True)
        health = await wait_healthy(http, url, args.wait_s)
        print(f"health: {json.dumps(health)}", flush=True)
        problems += await check_metrics(http, url, args.token, args.metrics_url)
        mouth, ear = Microphone(), Ear()
        started = time.monotonic()
        client = await connect(url, mouth, http=http, headers=headers)
        for transceiver in client.pc.getTransceivers():
            install_low_latency_audio(transceiver.receiver)
        for task in client.tasks:  # the ear records with arrival times instead
            task.cancel()
        track = next(t.receiver.track for t in client.pc.getTransceivers())
        client.tasks = [asyncio.ensure_future(ear.run(track))]
        await asyncio.sleep(2.0)
        print(f"connected in {time.monotonic() - started:.1f} s; asking {QUESTION!r}",
              flush=True)
        ends: list[float | None] = []
        asked: list[float] = []
        for number, question in enumerate((QUESTION, SECOND), start=1):
            asked.append(time.monotonic())
            mouth.say(piper_speech(question, rate=WIRE_RATE, lead_s=0.2, tail_s=0.0))
            with contextlib.suppress(AssertionError):  # no answer in time: reported below
                await wait_for(lambda n=number: sum(
                    m.get("type") == "turn" and m.get("role") == "assistant"
                    and m.get("phase") == "end" for m in client.messages) >= n,
                    timeout_s=args.reply_s)
            await asyncio.sleep(0.5)
            ends.append(mouth.speech_end_at)
            if number == 1:
                in_redis = await redis_holds(args.redis_url, client.session_id) \
                    if args.redis_url else None
        await client.close()
    finals = [m["text"] for m in client.messages
              if m.get("type") == "transcript" and m.get("final")]
    user = finals[0] if finals else ""
    first_turn = next((m.get("turn") for m in client.messages
                       if m.get("type") == "assistant_text"), None)
    reply = "".join(m.get("delta", "") for m in client.messages
                    if m.get("type") == "assistant_text" and m.get("turn") == first_turn).strip()
    end = ends[0]
    first, audio = ear.after(end, asked[1]) if end is not None else (None, np.zeros(0, np.int16))
    heard = transcribe(audio) if first is not None else ""
    first_ms = (first - end) * 1000 if first is not None and end is not None else None
    second_end = ends[1]
    second = ear.after(second_end)[0] if second_end is not None else None
    second_ms = (second - second_end) * 1000 if second is not None and second_end else None
    errors = [m for m in client.messages if m.get("type") == "error"]
    print(f"user said (server's ASR): {user!r}", flush=True)
    print(f"assistant text: {reply!r}", flush=True)
    print(f"assistant speech (client's Whisper): {heard!r}", flush=True)
    if errors:
        problems.append(f"errors from the server: {errors}")
    if "capital" not in user.lower():  # tiny.en on the Realtime path may hear "friends"
        problems.append("the server did not hear the question")
    if not reply:
        problems.append("no assistant text")
    if first is None or not heard:
        problems.append("no assistant speech")
    if args.redis_url and not in_redis:
        problems.append("the call's transcript was not in Redis")
    for problem in problems:
        print(f"PROBLEM: {problem}", flush=True)
    ok = not problems
    print(f"second turn {SECOND!r}: {finals[1:]!r}", flush=True)
    print(f"RESULT ok={int(ok)} first_sound_ms="
          f"{'none' if first_ms is None else f'{first_ms:.0f}'} second_sound_ms="
          f"{'none' if second_ms is None else f'{second_ms:.0f}'} user={user!r} "
          f"reply={reply!r} heard={heard!r} redis={in_redis}", flush=True)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url", help="the server's page URL (http(s)://HOST:PORT/)")
    parser.add_argument("--token", default="", help="the call token (--token of the server)")
    parser.add_argument("--insecure", action="store_true",
                        help="do not check the TLS certificate (self-signed)")
    parser.add_argument("--metrics-url", default="", help="the metrics listener's /metrics URL")
    parser.add_argument("--redis-url", default="", help="the front-end's --store redis://")
    parser.add_argument("--wait-for", action="append", default=[],
                        help="another server's base URL whose /health must answer first "
                             "(the engine server of a two-tier stack)")
    parser.add_argument("--loopback", action="store_true",
                        help="the client offers 127.0.0.1 ICE candidates only (a server on "
                             "this machine with --ice-loopback: no media leaves loopback)")
    parser.add_argument("--wait-s", type=float, default=300.0,
                        help="how long to wait for /health (models load first)")
    parser.add_argument("--reply-s", type=float, default=60.0,
                        help="how long to wait for the spoken answer")
    return asyncio.run(call(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
