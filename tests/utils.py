"""Shared test helpers: frame builders, synthetic tracks, a real aiortc client, a live server."""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np
from aiohttp import web
from aiortc import RTCPeerConnection
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from omnicall.app.app_state import CALLS_KEY
from omnicall.app.calls import SessionTimeouts
from omnicall.app.config import ServerConfig
from omnicall.app.http.server import create_app
from omnicall.app.setup import create_runner
from omnicall.engine.base import Engine
from omnicall.media.playout_queue import PlayoutQueue
from omnicall.media.resample import Int16Array, make_audio_frame

WIRE_RATE = 48_000
#: a question spoken with a mid-sentence pause in the end-of-turn tests of every engine. The
#: tests of wiring use an utterance whose verdicts are far from the 0.5 threshold (Smart
#: Turn's float32 graph, cut at the pause / whole: 0.008 / 0.967); the model's judgement
#: itself is tested over a set in tests/test_smart_turn.py
PAUSED_QUESTION = "What time does the library open on Saturday morning?"
PAUSED_QUESTION_WORDS = ("library", "saturday")
ROOT = Path(__file__).resolve().parent.parent


def pop(queue: PlayoutQueue) -> Int16Array | None:
    """The next frame of ``queue`` the paced track would send (None: silence)."""
    popped = queue.pop_tagged()
    return None if popped is None else popped[0]


class UnplayedSound:
    """A reply's sound where nothing plays it (what a meter's handle falls back to with no
    call output attached): records what it gets."""

    measured = False

    def __init__(self, turn_id: int = 0) -> None:
        self.turn_id = turn_id
        self.written: list[int] = []
        self.ends = self.stops = 0

    async def write(self, samples: np.ndarray, rate_hz: int) -> None:
        self.written.append(len(samples))

    def end(self) -> None:
        self.ends += 1

    def stop(self) -> None:
        self.stops += 1

    def duck(self, gain: float) -> None:
        raise AssertionError("nothing plays it: nothing to duck")

    def playout(self) -> None:
        return None


class RecordingPlayout:
    """The media plane's playout as a reply gate sees it (``Playout``): hands out handles
    that record what the replies do with their sound; ``sent`` is what it measured of each
    reply (set by the test)."""

    def __init__(self) -> None:
        self.sent: dict[int, Any] = {}
        self.written: list[tuple[int, int]] = []  # turn, samples
        self.ended: list[int] = []
        self.stopped: list[int] = []
        self.gains: list[tuple[int, float]] = []

    def open(self, turn_id: int, unplayed: Any) -> RecordedSound:
        return RecordedSound(self, turn_id)

    def reply(self, turn_id: int) -> Any:
        return self.sent.get(turn_id)


class RecordedSound:
    measured = True

    def __init__(self, playout: RecordingPlayout, turn_id: int) -> None:
        self.at = playout
        self.turn_id = turn_id

    async def write(self, samples: np.ndarray, rate_hz: int) -> None:
        self.at.written.append((self.turn_id, len(samples)))

    def end(self) -> None:
        self.at.ended.append(self.turn_id)

    def stop(self) -> None:
        self.at.stopped.append(self.turn_id)

    def duck(self, gain: float) -> None:
        self.at.gains.append((self.turn_id, gain))

    def playout(self) -> Any:
        return self.at.reply(self.turn_id)


def tone(freq_hz: float, seconds: float, rate: int = 16_000, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * freq_hz * t) * amp * 32767).astype(np.int16)


def stereo_frames(mono: np.ndarray, rate: int = WIRE_RATE, samples: int = 960,
                  start_pts: int = 0) -> list[av.AudioFrame]:
    """Cut mono int16 into browser-like s16 packed stereo frames with pts."""
    frames = []
    for i in range(0, len(mono) - samples + 1, samples):
        chunk = mono[i:i + samples]
        inter = np.repeat(chunk, 2)
        frames.append(make_audio_frame(inter, rate, pts=start_pts + i, layout="stereo"))
    return frames


def video_frame(width: int = 640, height: int = 480, pts: int = 0, value: int = 128,
                time_base: fractions.Fraction = fractions.Fraction(1, 90_000)) -> av.VideoFrame:
    img = np.full((height, width, 3), value, dtype=np.uint8)
    frame = av.VideoFrame.from_ndarray(img, format="rgb24").reformat(format="yuv420p")
    frame.pts = pts
    frame.time_base = time_base
    return frame


class PacedVideoTrack(MediaStreamTrack):
    """A camera track that hands out frame ``n`` at ``n / fps`` seconds from its first
    (subclasses make the frames: :meth:`frame`)."""

    kind = "video"

    def __init__(self, fps: float) -> None:
        super().__init__()
        self.fps = fps
        self._n = 0
        self._start: float | None = None

    def frame(self, n: int) -> av.VideoFrame:
        raise NotImplementedError

    async def recv(self) -> av.VideoFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        wait = self._start + self._n / self.fps - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        frame = self.frame(self._n)
        self._n += 1
        return frame


class ColorVideoTrack(PacedVideoTrack):
    """640x480 frames at ``fps`` whose gray level counts up."""

    def __init__(self, fps: int = 15) -> None:
        super().__init__(fps)

    def frame(self, n: int) -> av.VideoFrame:
        return video_frame(pts=round(n * 90_000 / self.fps), value=(n * 8) % 256)


def vanish(pc: RTCPeerConnection) -> None:
    """Make a peer disappear without a goodbye: its UDP sockets close, no DTLS alert, no BYE
    (like a laptop lid closing or a phone losing signal)."""
    for transceiver in pc.getTransceivers():
        connection = transceiver.sender.transport.transport.iceGatherer._connection
        for protocol in connection._protocols:
            if protocol.transport is not None:
                protocol.transport.close()


@contextlib.asynccontextmanager
async def running_server(config: ServerConfig | None = None, engine: Engine | None = None,
                         timeouts: SessionTimeouts | None = None
                         ) -> AsyncIterator[tuple[str, web.Application]]:
    config = config or ServerConfig(engine="loopback", ice_loopback=True, port=0)
    app = create_app(config, engine=engine, timeouts=timeouts)
    async with serving(app, create_runner(app)) as port:
        yield f"http://127.0.0.1:{port}/", app


@contextlib.asynccontextmanager
async def serving(app: web.Application, runner: web.AppRunner | None = None
                  ) -> AsyncIterator[int]:
    """Serve ``app`` in this process on a free loopback port (yields the port)."""
    runner = runner or web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def wait_for(predicate: Any, timeout_s: float = 10.0, interval_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval_s)


__all__ = ["CALLS_KEY", "ColorVideoTrack", "running_server", "stereo_frames", "tone", "vanish",
           "video_frame", "wait_for"]


def piper_speech(text: str, rate: int = 16_000, lead_s: float = 0.3,
                 tail_s: float = 1.2) -> np.ndarray:
    """``text`` spoken by the bundled Piper voice, as mono int16 at ``rate``, with silence
    around it (the voice scores a 2.8% WER with tiny.en: bench/asr_wer.py)."""
    from piper import PiperVoice, SynthesisConfig

    from omnicall.engine.bundled_models import joe_voice_onnx
    from omnicall.media.resample import AudioConverter

    # VITS draws noise for every synthesis; without it the same text gives the same samples,
    # so tests that depend on where the VAD sees a pause do not flake
    deterministic = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    voice = _piper_voice_cache.get("joe")
    if voice is None:
        voice = _piper_voice_cache.setdefault("joe", PiperVoice.load(str(joe_voice_onnx())))
    conv = AudioConverter(rate)
    parts = [conv.convert_array(np.asarray(c.audio_int16_array, np.int16), c.sample_rate)
             for c in voice.synthesize(text, syn_config=deterministic)]
    parts.append(conv.flush())
    return np.concatenate([np.zeros(int(lead_s * rate), np.int16), *parts,
                           np.zeros(int(tail_s * rate), np.int16)])


_piper_voice_cache: dict[str, Any] = {}


async def feed_units(session: Any, audio16k: np.ndarray, start_index: int = 0,
                     realtime: bool = False, video: Callable[[int], Any] | None = None) -> int:
    """Push 80 ms MediaUnits into an engine session, waiting while it is full; ``video``
    gives unit ``index`` its camera frame (a ``VideoUnitFrame`` or None)."""
    from omnicall.media.aligner import MediaUnit

    index = start_index
    for i in range(0, len(audio16k) - 1279, 1280):
        unit = MediaUnit(index, audio16k[i:i + 1280], video(index) if video else None)
        for _ in range(3000):  # up to 30 s of back-pressure
            if session.push(unit):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("engine session refused input for 30 s")
        index += 1
        if realtime:
            await asyncio.sleep(0.08)
    return index


@dataclass
class _Listening:
    port: int

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/realtime"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _argv(command: str, port: int, flags: tuple[str, ...]) -> list[str]:
    import sys

    return [sys.executable, "-m", "omnicall", command, "--host", "127.0.0.1", "--port",
            str(port), "--log-level", "WARNING", *flags]


@dataclass
class ServerProcess(_Listening):
    """A real ``omnicall`` process (``serve`` or ``serve-engine``) on a loopback port."""

    proc: asyncio.subprocess.Process
    line: str

    async def stop(self, sig: int = 15) -> int:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
        return await asyncio.wait_for(self.proc.wait(), 30)


async def start_process(command: str, *flags: str, timeout_s: float = 120) -> ServerProcess:
    """``omnicall COMMAND --port P FLAGS`` on 127.0.0.1, once its ready line is printed."""
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(*_argv(command, port, flags), cwd=ROOT,
                                                stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), timeout_s)).decode()
    if "ready" not in line:
        proc.kill()
        raise AssertionError(f"{command} did not start: {line!r}")
    return ServerProcess(port, proc, line)


@dataclass
class SyncServerProcess(_Listening):
    """Like :class:`ServerProcess`, for fixtures that outlive one test's event loop."""

    proc: Any
    line: str

    def stop(self) -> int:
        import subprocess

        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return int(self.proc.wait(30))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return int(self.proc.wait(10))


def spawn_process(command: str, *flags: str) -> SyncServerProcess:
    import subprocess

    port = _free_port()
    proc = subprocess.Popen(_argv(command, port, flags), cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "ready" not in line:
        proc.kill()
        raise AssertionError(f"{command} did not start: {line!r}")
    return SyncServerProcess(port, proc, line)


@contextlib.contextmanager
def redis_server(folder: Any, password: str | None = None) -> Any:
    """A real Debian ``redis-server`` on a free loopback port (no persistence); with
    ``password``, clients must authenticate (``--requirepass``, as compose.yaml runs it)."""
    import shutil
    import socket
    import subprocess

    binary = shutil.which("redis-server")
    if binary is None:
        raise AssertionError("redis-server is missing: make system-deps installs it")
    port = _free_port()
    auth = ["--requirepass", password] if password else []
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(folder), *auth],
                            stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith((b"+PONG", b"-NOAUTH")):  # up (and locked)
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"redis://{f':{password}@' if password else ''}127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


def espeak_speech(text: str, voice: str = "en-us", rate: int = 16_000, lead_s: float = 0.3,
                  tail_s: float = 1.2, words_per_min: int = 160) -> np.ndarray:
    """``text`` spoken by espeak-ng (``voice``: en-us, en-gb, en-us+f3, ...), mono int16."""
    import io
    import subprocess
    import wave

    from omnicall.media.resample import AudioConverter

    out = subprocess.run(["espeak-ng", "-v", voice, "-s", str(words_per_min), "--stdout", text],
                         check=True, capture_output=True, timeout=30).stdout
    with wave.open(io.BytesIO(out)) as wav:
        source_rate = wav.getframerate()
        data = np.frombuffer(wav.readframes(wav.getnframes()), dtype=np.int16)
    conv = AudioConverter(rate)
    speech = np.concatenate([conv.convert_array(data, source_rate), conv.flush()])
    return np.concatenate([np.zeros(int(lead_s * rate), np.int16), speech,
                           np.zeros(int(tail_s * rate), np.int16)])


def splice_pause(speech: np.ndarray, pause_s: float, rate: int = 16_000,
                 where: tuple[float, float] = (0.35, 0.65)) -> tuple[np.ndarray, int]:
    """Insert ``pause_s`` of silence mid-sentence: at the quietest 30 ms (most likely a gap
    between words) inside the ``where`` share of the voiced span. Returns the audio and the
    sample where the pause starts."""
    loud = np.flatnonzero(np.abs(speech.astype(np.int32)) > 500)
    first, last = int(loud[0]), int(loud[-1])
    window = int(0.03 * rate)
    lo = first + int((last - first) * where[0])
    hi = first + int((last - first) * where[1])
    energy = np.convolve(np.abs(speech[lo:hi].astype(np.float64)), np.ones(window), "valid")
    cut = lo + int(np.argmin(energy)) + window // 2
    pause = np.zeros(int(pause_s * rate), np.int16)
    return np.concatenate([speech[:cut], pause, speech[cut:]]), cut


class ScriptedVad:
    """A stand-in for :class:`~omnicall.engine.vad.SileroVad` in the listener's tests: each 32 ms
    chunk's speech probability is its loudest sample / 10000 (so a unit of constant level 9000 is
    0.9 speech). Keeps the real VAD's chunking (leftover samples carry over)."""

    def probabilities(self, state: Any, samples: np.ndarray) -> list[float]:
        audio = np.concatenate([state.leftover, samples.astype(np.float32)])
        whole = len(audio) // 512 * 512
        state.leftover = audio[whole:]
        return [float(np.abs(audio[i:i + 512]).max()) / 10_000 for i in range(0, whole, 512)]


async def settled(session: Any, timeout_s: float = 20) -> None:
    """Every model operation queued before now has run (its state is quiescent): a marker
    operation goes through the session's ordered queue and is waited for. (An empty queue
    and an idle worker are not enough: a reply's operation waits on its sound between its
    model calls, and closes the assistant message after it.)"""
    passed = asyncio.Event()

    async def marker() -> None:
        passed.set()

    await session._enqueue(marker)
    await asyncio.wait_for(passed.wait(), timeout_s)
