"""Calls over an impaired network: omnicall's cascade vs a bare aiortc echo, same impairments.

Every packet of each call (STUN, DTLS, RTP, RTCP) goes through the seeded loopback relay
(:mod:`bench.udp_relay`), impaired in both directions alike (each with its own seed). Per
condition, one call to each server speaks the same questions (the bundled Piper voice, real
time, with a 10 fps camera):

- **omnicall**: the default CPU cascade in its own process (``bench.voice_to_voice``'s server).
  ASR WER: the server's final user transcripts vs the script; reply WER: what the client
  received of each reply, transcribed by the product's bundled Whisper, vs its caption;
  v2v: end of the question's speech -> first reply sound at the client; video: frames the
  server sampled;
- **aiortc**: the plainest echo (aiortc's defaults: receive prefetch 4, its own decoder), in
  this process. ASR WER: what it received, placed by pts, transcribed vs the script; reply
  WER: the echo the client received, transcribed, vs the script; v2v: end of speech -> end
  of its echo; video: frames it received.

The client stands in for a browser: it decodes what it receives with FEC and concealment
(as Chromium does once ``useinbandfec=1`` is answered; :mod:`omnicall.media.opus_receive`).
Underruns: the server's egress underruns (omnicall) / 20 ms holes in what the client got.
A call survives when it is still connected at the end and the turns after an outage were
answered. Last line: ``RESULT conditions=N survived=N asr_wer_5pct=X ...`` (docs/network.md).

    .venv/bin/python bench/network.py [--turns 3] [--only loss5,clean]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import statistics
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av
import numpy as np
from aiohttp import web
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.sdp import SessionDescription

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.impair import BurstLoss, Impairment  # noqa: E402
from bench.udp_relay import UdpRelay  # noqa: E402
from bench.voice_to_voice import QUESTIONS, start_server  # noqa: E402
from omnicall.client import Call, Microphone, connect  # noqa: E402
from omnicall.media.low_latency_receive import LowLatencyReceive  # noqa: E402
from omnicall.media.third_party import use_loopback_candidates  # noqa: E402
from tests.cascade_fixtures import wer  # noqa: E402
from tests.utils import ColorVideoTrack, piper_speech  # noqa: E402

LOUD = 800
CONDITIONS: dict[str, Impairment] = {
    "clean": Impairment(),
    "loss2": Impairment(loss=0.02),
    "loss5": Impairment(loss=0.05),
    "loss10": Impairment(loss=0.10),
    "burst2": Impairment(burst=BurstLoss.with_mean(0.02, 3)),
    "burst5": Impairment(burst=BurstLoss.with_mean(0.05, 3)),
    "burst10": Impairment(burst=BurstLoss.with_mean(0.10, 3)),
    "jitter30": Impairment(delay_s=0.04, jitter_s=0.03),
    "jitter80": Impairment(delay_s=0.09, jitter_s=0.08),
    "cap300k": Impairment(rate_bps=300_000),
    "outage3s": Impairment(),
}
OUTAGE_S = 3.0


class Listener:
    """What the client received: 48 kHz mono placed by pts, with arrival times."""

    def __init__(self) -> None:
        self.chunks: list[tuple[float, int, np.ndarray]] = []  # arrival, pts, samples

    def feed(self, frame: av.AudioFrame) -> None:
        samples = frame.to_ndarray().reshape(-1)[::len(frame.layout.channels)]
        self.chunks.append((time.monotonic(), int(frame.pts or 0), samples.copy()))

    async def run(self, track: MediaStreamTrack) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                self.feed(await track.recv())  # type: ignore[arg-type]

    def audio(self, since: float = 0.0, until: float = float("inf")) -> np.ndarray:
        parts = [(pts, s) for at, pts, s in self.chunks if since <= at <= until]
        if not parts:
            return np.zeros(0, np.int16)
        origin = parts[0][0]
        out = np.zeros(parts[-1][0] - origin + len(parts[-1][1]), np.int16)
        for pts, s in parts:
            out[pts - origin:pts - origin + len(s)] = s
        return out

    def holes(self) -> int:
        """20 ms frames missing between the first and the last received (gaps in pts)."""
        pts = sorted({p for _, p, _ in self.chunks})
        return sum(max(0, (b - a) // 960 - 1) for a, b in itertools.pairwise(pts))

    def first_sound(self, after: float) -> float | None:
        return next((at for at, _, s in self.chunks if at > after and np.abs(s).max() > LOUD),
                    None)

    def last_sound(self, after: float, before: float) -> float | None:
        loud = [at for at, _, s in self.chunks if after < at < before and np.abs(s).max() > LOUD]
        return loud[-1] if loud else None


@dataclass
class Row:
    server: str
    condition: str
    asr_wer: float = float("nan")
    reply_wer: float = float("nan")
    v2v_ms: float = float("nan")
    underruns_server: int = -1
    holes_client: int = 0
    video: int = 0
    survived: bool = False
    loss: str = ""
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{self.condition:>9} {self.server:>8}: asr_wer={self.asr_wer:.3f} "
                f"reply_wer={self.reply_wer:.3f} v2v_ms={self.v2v_ms:6.0f} "
                f"underruns={self.underruns_server:3d} client_holes={self.holes_client:3d} "
                f"video={self.video:4d} survived={'yes' if self.survived else 'NO '} "
                f"loss(up/down)={self.loss} {' '.join(self.notes)}")


def to16k(audio48: np.ndarray) -> np.ndarray:
    from omnicall.media.resample import AudioConverter

    converter = AudioConverter(16_000)
    return np.concatenate([converter.convert_array(audio48, 48_000), converter.flush()])


def client_ear(call: Any, listener: Listener) -> LowLatencyReceive:
    """The client's audio decoded like a browser's: reordered (no wait in order, an
    adaptive one on a gap), with FEC and concealment."""
    receive = LowLatencyReceive(listener.feed)
    for transceiver in call.pc.getTransceivers():
        track = transceiver.receiver.track
        if track is not None and track.kind == "audio":
            receive.on_track(call.pc, track)
    receive.on_answer(SessionDescription.parse(call.pc.remoteDescription.sdp))
    if receive.decoder is None:  # no low-latency path: record aiortc's frames
        audio = next(t for t in call.pc.getTransceivers() if t.kind == "audio")
        call.tasks.append(asyncio.ensure_future(listener.run(audio.receiver.track)))
    return receive


def loss_text(relay: UdpRelay) -> str:
    return f"{relay.up.loss_fraction:.3f}/{relay.down.loss_fraction:.3f}"


@contextlib.asynccontextmanager
async def impaired_call(url: str, imp: Impairment, seed: int
                        ) -> AsyncIterator[tuple[UdpRelay, Microphone, Listener, Call,
                                                 LowLatencyReceive]]:
    """A client call through a fresh relay (both directions ``imp``), heard by a browser-like
    ear; the ear (its reorder timer), the call and the relay are closed however it ends."""
    relay = await UdpRelay(imp, imp, seed=seed).start()
    try:
        mouth, listener = Microphone(), Listener()
        call = await connect(url, mouth, ColorVideoTrack(fps=10), route=relay)
        try:
            for task in call.tasks:  # the ear hears the call instead
                task.cancel()
            call.tasks = []
            ear = client_ear(call, listener)
            try:
                yield relay, mouth, listener, call, ear
            finally:
                ear.close()
        finally:
            await call.close()
    finally:
        relay.close()


async def omnicall_call(url: str, name: str, imp: Impairment, seed: int,
                        questions: list[str], asr: Any) -> Row:
    row = Row("omnicall", name)
    async with impaired_call(url, imp, seed) as (relay, mouth, listener, call, ear):
        spoken = [piper_speech(q, rate=48_000, lead_s=0.2, tail_s=0.0) for q in questions]
        await asyncio.sleep(2.0)
        v2v, replies, answered = [], [], 0
        for i, speech in enumerate(spoken):
            if name == "outage3s" and i == 1:
                relay.begin_outage(OUTAGE_S)
                await asyncio.sleep(OUTAGE_S + 0.5)
            ends = sum(1 for m in call.messages if m.get("type") == "turn"
                       and m.get("role") == "assistant" and m.get("phase") == "end")
            mark = len(call.messages)
            mouth.say(speech)
            for _ in range(500):
                if sum(1 for m in call.messages if m.get("type") == "turn" and m.get("role") ==
                       "assistant" and m.get("phase") == "end") > ends:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.6)
            end_at = mouth.speech_end_at
            heard_at = listener.first_sound(end_at) if end_at else None
            new = call.messages[mark:]
            caption = "".join(m.get("delta", "") for m in new if m.get("type") == "assistant_text")
            if heard_at is None or end_at is None or not caption:
                row.notes.append(f"no-reply[{i}]")
                continue
            answered += 1
            v2v.append((heard_at - end_at) * 1000)
            heard = asr.transcribe(to16k(listener.audio(since=end_at)))
            replies.append((caption, heard))
        user = [m for m in call.messages if m.get("type") == "transcript" and m.get("final")]
        by_turn: dict[Any, str] = {}
        for m in user:
            by_turn[m.get("turn")] = m.get("text", "")
        row.asr_wer = wer(" ".join(questions), " ".join(by_turn.values()))
        if replies:
            row.reply_wer = wer(" ".join(c for c, _ in replies), " ".join(h for _, h in replies))
            row.v2v_ms = statistics.median(v2v)
        stats = [m for m in call.messages if m.get("type") == "stats"]
        if stats:
            row.underruns_server = int(stats[-1].get("underruns", -1))
            row.video = int(stats[-1].get("video_sampled", 0))
        row.holes_client = listener.holes()
        row.survived = call.pc.connectionState == "connected" and answered == len(questions)
        row.loss = loss_text(relay)
        reorder = ear.reorder_stats()
        if reorder.get("reordered") or reorder.get("skipped"):  # what the client's buffer did
            row.notes.append("down-reorder=" + ",".join(f"{k}:{v:g}" for k, v in reorder.items()))
    return row


class BareEcho:
    """The plainest aiortc echo; keeps what it received (by pts) and counts video."""

    def __init__(self) -> None:
        self.heard = Listener()
        self.video = 0
        self.pcs: set[RTCPeerConnection] = set()
        self.tasks: set[asyncio.Future[None]] = set()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/offer", self.offer)
        return app

    async def offer(self, request: web.Request) -> web.Response:
        body = await request.json()
        pc = RTCPeerConnection()
        self.pcs.add(pc)

        @pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            if track.kind == "audio":
                relay = _Tee(track, self.heard)
                pc.addTrack(relay)
            else:
                self.tasks.add(asyncio.ensure_future(self._count(track)))

        await pc.setRemoteDescription(RTCSessionDescription(sdp=body["sdp"], type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
        return web.json_response({"sdp": pc.localDescription.sdp, "type": "answer",
                                  "session": "bare"})

    async def _count(self, track: MediaStreamTrack) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                await track.recv()
                self.video += 1


class _Tee(MediaStreamTrack):
    kind = "audio"

    def __init__(self, source: MediaStreamTrack, listener: Listener) -> None:
        super().__init__()
        self.source, self.listener = source, listener

    async def recv(self) -> Any:
        frame = await self.source.recv()
        self.listener.feed(frame)  # type: ignore[arg-type]
        return frame


async def bare_call(url: str, echo: BareEcho, name: str, imp: Impairment, seed: int,
                    questions: list[str], asr: Any) -> Row:
    row = Row("aiortc", name)
    echo.heard, echo.video = Listener(), 0
    async with impaired_call(url, imp, seed) as (relay, mouth, listener, call, _):
        await asyncio.sleep(2.0)
        v2v, answered = [], 0
        for i, question in enumerate(questions):
            if name == "outage3s" and i == 1:
                relay.begin_outage(OUTAGE_S)
                await asyncio.sleep(OUTAGE_S + 0.5)
            started = time.monotonic()
            speech = piper_speech(question, rate=48_000, lead_s=0.2, tail_s=0.0)
            mouth.say(speech)
            await asyncio.sleep(len(speech) / 48_000 + 1.2)
            end_at = mouth.speech_end_at
            last = listener.last_sound(started, time.monotonic()) if end_at else None
            if end_at is None or last is None:
                row.notes.append(f"no-echo[{i}]")
                continue
            answered += 1
            v2v.append((last - end_at) * 1000)
        row.asr_wer = wer(" ".join(questions), asr.transcribe(to16k(echo.heard.audio())))
        row.reply_wer = wer(" ".join(questions), asr.transcribe(to16k(listener.audio())))
        row.v2v_ms = statistics.median(v2v) if v2v else float("nan")
        row.holes_client = listener.holes()
        row.video = echo.video
        row.survived = call.pc.connectionState == "connected" and answered == len(questions)
        row.loss = loss_text(relay)
    return row


def result_line(rows: list[Row]) -> str:
    def get(server: str, cond: str, attr: str) -> float:
        return next((getattr(r, attr) for r in rows if r.server == server
                     and r.condition == cond), float("nan"))

    omni = [r for r in rows if r.server == "omnicall"]
    return (f"RESULT conditions={len(omni)} survived={sum(r.survived for r in omni)} "
            f"asr_wer_5pct={get('omnicall', 'loss5', 'asr_wer'):.3f} "
            f"asr_wer_0pct={get('omnicall', 'clean', 'asr_wer'):.3f} "
            f"reply_wer_5pct={get('omnicall', 'loss5', 'reply_wer'):.3f} "
            f"reply_wer_0pct={get('omnicall', 'clean', 'reply_wer'):.3f} "
            f"underruns_5pct={get('omnicall', 'loss5', 'underruns_server'):.0f} "
            f"v2v_ms_5pct={get('omnicall', 'loss5', 'v2v_ms'):.0f} "
            f"v2v_ms_0pct={get('omnicall', 'clean', 'v2v_ms'):.0f}")


async def main(turns: int, only: list[str], seed: int, out: Path | None) -> None:
    from omnicall.engine.cascade.asr import WhisperAsr

    logging.basicConfig(level=logging.WARNING)
    use_loopback_candidates(True)
    asr = WhisperAsr()
    echo = BareEcho()
    runner = web.AppRunner(echo.app(), handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    bare_url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/"  # type: ignore[union-attr]
    proc, omni_url = await start_server("cascade")
    rows: list[Row] = []
    try:
        for n, (name, imp) in enumerate(CONDITIONS.items()):
            if only and name not in only:
                continue
            questions = [QUESTIONS[(n * turns + i) % len(QUESTIONS)] for i in range(turns)]
            for row in (await omnicall_call(omni_url, name, imp, seed + n, questions, asr),
                        await bare_call(bare_url, echo, name, imp, seed + n, questions, asr)):
                rows.append(row)
                print(row.line(), flush=True)
    finally:
        proc.terminate()
        await proc.wait()
        await asyncio.gather(*(pc.close() for pc in echo.pcs))
        await runner.cleanup()
    if out is not None:
        out.write_text(json.dumps([r.__dict__ for r in rows], indent=1))  # noqa: ASYNC240
    print("goals: all survive; at loss5 asr_wer <= 1.3x clean, reply_wer <= 1.5x "
          "clean, v2v within 100 ms of clean")
    print(result_line(rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=3, help="questions per call")
    parser.add_argument("--only", default="", help="comma-separated conditions")
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args()
    asyncio.run(main(args.turns, [c for c in args.only.split(",") if c], args.seed, args.json))
