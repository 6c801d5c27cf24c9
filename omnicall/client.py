"""A Python client for an omnicall server: a real WebRTC call (aiortc), as the page makes one.

Connect, speak (a WAV file, or samples as they come), read the server's messages (captions,
turns, timings, errors: the data channel's JSON, ``docs/protocol.md``) and the assistant's
voice as it was received::

    from omnicall.client import Microphone, connect, read_wav

    mic = Microphone()
    call = await connect("http://localhost:8080/", mic, mode="call")
    mic.say(*read_wav("question.wav"))
    turn = await call.wait_for(lambda m: m["type"] == "turn" and m["role"] == "assistant"
                               and m["phase"] == "end", timeout_s=30)
    reply = call.received_audio()  # 48 kHz mono int16
    await call.hang_up()

``omnicall call URL --wav FILE`` does that from the command line (:func:`main`): it prints
the captions as they come and saves the reply's audio. The offer's ``mode`` says what kind of
client this is (a headset or its own echo canceller: ``call``; a loudspeaker: ``kiosk``;
none: the server finds out). What the call keeps is bounded: the last ``keep_audio_s`` of
received audio and ``keep_messages`` messages (the oldest dropped, counted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
import wave
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import av
import numpy as np
from aiortc import RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from omnicall.media.resample import Int16Array, StreamConverter, make_audio_frame

WIRE_RATE_HZ = 48_000
FRAME_SAMPLES = 960  # 20 ms at 48 kHz: what a browser's microphone sends
FRAME_S = FRAME_SAMPLES / WIRE_RATE_HZ
MODES = ("call", "kiosk", "companion")
MAX_PENDING = 64  # messages sent before the data channel opened, waiting for it


class OfferRefused(RuntimeError):
    """The server did not take the call (its HTTP status and error message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"offer refused: {status} {message}")
        self.status = status
        self.message = message


class Microphone(MediaStreamTrack):
    """The client's microphone: the speech it is given (:meth:`say`), paced in real time as
    20 ms 48 kHz frames, silence in between, as long as the call lasts. ``speech_end_at``
    is the monotonic time the last loud sample (above ``loud``) of the latest speech was
    sent: where a voice-to-voice delay starts."""

    kind = "audio"

    def __init__(self, speech: Int16Array | None = None, rate_hz: int = WIRE_RATE_HZ,
                 loud: int = 800, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.loud = loud
        self._clock = clock
        self._queue = np.zeros(0, np.int16)
        self._end_sample: int | None = None
        self.speech_end_at: float | None = None
        self._sent = 0  # frames
        self._start: float | None = None
        if speech is not None:
            self.say(speech, rate_hz)

    def say(self, samples: Int16Array, rate_hz: int = WIRE_RATE_HZ) -> None:
        """Speak ``samples`` (mono int16) after whatever is still queued."""
        if rate_hz != WIRE_RATE_HZ:
            converter = StreamConverter(WIRE_RATE_HZ)
            samples = np.concatenate([converter.convert(samples, rate_hz), converter.flush()])
        loud = np.nonzero(np.abs(samples) > self.loud)[0]
        self._end_sample = len(self._queue) + int(loud[-1]) if len(loud) else None
        self._queue = np.concatenate([self._queue, samples.astype(np.int16)])
        self.speech_end_at = None

    @property
    def speaking(self) -> bool:
        """Speech is still queued."""
        return len(self._queue) > 0

    def next_chunk(self) -> Int16Array:
        chunk, self._queue = self._queue[:FRAME_SAMPLES], self._queue[FRAME_SAMPLES:]
        if self._end_sample is not None:
            if self._end_sample < FRAME_SAMPLES:
                self.speech_end_at = self._clock() + self._end_sample / WIRE_RATE_HZ
                self._end_sample = None
            else:
                self._end_sample -= FRAME_SAMPLES
        return chunk

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = self._clock()
        wait = self._start + self._sent * FRAME_S - self._clock()
        if wait > 0:
            await asyncio.sleep(wait)
        chunk = self.next_chunk()
        if len(chunk) < FRAME_SAMPLES:
            chunk = np.concatenate([chunk, np.zeros(FRAME_SAMPLES - len(chunk), np.int16)])
        frame = make_audio_frame(np.repeat(chunk, 2), WIRE_RATE_HZ,
                                 pts=self._sent * FRAME_SAMPLES, layout="stereo")
        self._sent += 1
        return frame


class SdpRoute(Protocol):
    """Rewrites the offer's and the answer's SDP (a relay in between: ``bench/udp_relay``)."""

    def route_offer(self, sdp: str) -> str: ...

    def route_answer(self, sdp: str) -> str: ...


@dataclass
class Call:
    """One call: the peer connection, the server's messages (oldest first) and the audio
    received (20 ms 48 kHz mono frames, oldest first)."""

    pc: RTCPeerConnection
    session_id: str = ""
    resumed: bool = False
    channel: Any = None  # the "events" data channel
    received: list[Int16Array] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    keep_audio_s: float = 600.0
    keep_messages: int = 10_000
    dropped_frames: int = 0  # received audio forgotten past keep_audio_s
    dropped_messages: int = 0
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _ended: asyncio.Event = field(default_factory=asyncio.Event)  # the server closed it
    _pending: list[dict[str, Any]] = field(default_factory=list)  # sent before it opened

    # -- what arrives ------------------------------------------------------------------
    def _message(self, raw: str | bytes) -> None:
        try:
            message = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return  # the server sends JSON objects only
        if not isinstance(message, dict):
            return
        self.messages.append(message)
        if len(self.messages) > self.keep_messages * 5 // 4:
            drop = len(self.messages) - self.keep_messages
            del self.messages[:drop]
            self.dropped_messages += drop
        self._arrived.set()

    def _audio(self, samples: Int16Array) -> None:
        self.received.append(samples)
        keep = max(1, int(self.keep_audio_s / FRAME_S))
        if len(self.received) > keep * 5 // 4:
            drop = len(self.received) - keep
            del self.received[:drop]
            self.dropped_frames += drop

    def received_audio(self) -> Int16Array:
        """The assistant's voice as received (48 kHz mono int16; silence included)."""
        return np.concatenate(self.received) if self.received else np.zeros(0, np.int16)

    async def wait_for(self, match: Callable[[dict[str, Any]], bool], timeout_s: float = 30.0,
                       after: int = 0) -> dict[str, Any]:
        """The first message from index ``after`` on that ``match`` accepts, waiting for it
        (``TimeoutError`` after ``timeout_s``)."""
        async with asyncio.timeout(timeout_s):
            while True:
                self._arrived.clear()
                for message in self.messages[after:]:
                    if match(message):
                        return message
                await self._arrived.wait()

    # -- what it sends -----------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> bool:
        """A data-channel message (``docs/protocol.md``). Sent at once when the channel is
        open; before it opens (just after :func:`connect`) it waits for it (at most
        ``MAX_PENDING`` messages: beyond, False); False once the channel closed."""
        state = None if self.channel is None else self.channel.readyState
        if state == "open":
            self.channel.send(json.dumps(message))
            return True
        if state == "connecting" and len(self._pending) < MAX_PENDING:
            self._pending.append(message)
            return True
        return False

    def _opened(self) -> None:
        pending, self._pending = self._pending, []
        for message in pending:
            self.send(message)

    def send_text(self, text: str) -> None:
        """A typed message: answered in speech and captions."""
        self.send({"type": "text", "text": text})

    def interrupt(self) -> None:
        """Stop the assistant's reply now."""
        self.send({"type": "interrupt"})

    def talk(self, held: bool) -> None:
        """Push-to-talk: held, the microphone is the caller's turn; released, it is
        answered (send the release ~200 ms after the user lets go)."""
        self.send({"type": "talk", "held": held})

    # -- the end -----------------------------------------------------------------------
    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.pc.close()

    async def hang_up(self, timeout_s: float = 2.0) -> None:
        """End the call for good (``hangup``: the server keeps nothing for a resume),
        waiting for the server to close it first, then close."""
        if self.channel is not None and self.channel.readyState == "open":
            self.send({"type": "hangup"})
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._ended.wait()
        await self.close()


async def _record(track: MediaStreamTrack, call: Call) -> None:
    with contextlib.suppress(MediaStreamError):
        while True:
            frame = await track.recv()
            if not isinstance(frame, av.AudioFrame):
                continue
            channels = len(frame.layout.channels)
            call._audio(frame.to_ndarray().reshape(-1)[::channels].astype(np.int16))


async def connect(url: str, audio: MediaStreamTrack | None = None,
                  video: MediaStreamTrack | None = None, *, mode: str | None = None,
                  token: str | None = None, resume: str | None = None,
                  extra: Sequence[MediaStreamTrack] = (), body: dict[str, Any] | None = None,
                  audio_codec: str | None = None, http: aiohttp.ClientSession | None = None,
                  headers: dict[str, str] | None = None, route: SdpRoute | None = None,
                  keep_audio_s: float = 600.0) -> Call:
    """Call the server at ``url`` (its page's URL, ``http://HOST:PORT/``): ``audio`` is the
    microphone (a :class:`Microphone`, or any aiortc audio track; the server refuses a call
    without one), ``video`` the camera (any aiortc video track). ``mode``: the offer's
    (``call``, ``kiosk``, ``companion``); ``token``: the server's ``--token``; ``resume``: a
    dropped call's session id. ``audio_codec`` ('audio/PCMU', ...) restricts the offer's
    audio codecs; ``http`` posts on that session. :class:`OfferRefused` when the server says
    no."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    pc = RTCPeerConnection()
    call = Call(pc=pc, keep_audio_s=keep_audio_s)
    try:
        if audio is not None:
            pc.addTrack(audio)
            if audio_codec is not None:
                codecs = [c for c in RTCRtpSender.getCapabilities("audio").codecs
                          if c.mimeType.lower() == audio_codec.lower()]
                pc.getTransceivers()[-1].setCodecPreferences(codecs)
        if video is not None:
            pc.addTrack(video)
        for track in extra:
            pc.addTrack(track)
        call.channel = pc.createDataChannel("events")
        call.channel.on("message", call._message)
        call.channel.on("close", call._ended.set)
        call.channel.on("open", call._opened)

        @pc.on("connectionstatechange")
        def on_state() -> None:
            if pc.connectionState in ("closed", "failed"):
                call._ended.set()

        @pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            call.tasks.append(asyncio.ensure_future(_record(track, call)))

        await pc.setLocalDescription(await pc.createOffer())
        offer: dict[str, Any] = {"sdp": pc.localDescription.sdp, "type": "offer"}
        if route is not None:
            offer["sdp"] = route.route_offer(offer["sdp"])
        offer.update({k: v for k, v in (("mode", mode), ("resume", resume)) if v is not None})
        offer.update(body or {})
        sent_headers = dict(headers or {})
        if token is not None:
            sent_headers["Authorization"] = f"Bearer {token}"
        async with contextlib.AsyncExitStack() as stack:
            if http is None:
                http = await stack.enter_async_context(aiohttp.ClientSession())
            response = await stack.enter_async_context(http.post(
                url.rstrip("/") + "/offer", json=offer, headers=sent_headers))
            try:
                answer = await response.json(content_type=None)
            except ValueError:
                answer = {"error": (await response.text())[:200]}
            if response.status != 200:
                raise OfferRefused(response.status, str(answer.get("error", answer)))
        call.session_id = answer["session"]
        call.resumed = bool(answer.get("resumed"))
        sdp = answer["sdp"] if route is None else route.route_answer(answer["sdp"])
        await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type=answer["type"]))
    except BaseException:
        await call.close()
        raise
    return call


# -- files ---------------------------------------------------------------------------------
def read_wav(path: str | Path) -> tuple[Int16Array, int]:
    """A 16-bit PCM WAV file as mono int16 samples (channels averaged) and its rate."""
    with wave.open(str(path), "rb") as wav:
        if wav.getsampwidth() != 2:
            raise ValueError(f"{path}: 16-bit PCM WAV expected, not {8 * wav.getsampwidth()}-bit")
        channels, rate = wav.getnchannels(), wav.getframerate()
        data = np.frombuffer(wav.readframes(wav.getnframes()), np.int16)
    if channels > 1:
        data = data.reshape(-1, channels).mean(axis=1).astype(np.int16)
    return data, rate


def write_wav(path: str | Path, samples: Int16Array, rate_hz: int = WIRE_RATE_HZ) -> None:
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate_hz)
        wav.writeframes(np.asarray(samples, np.int16).tobytes())


# -- omnicall call URL --wav FILE ----------------------------------------------------------
class Captions:
    """The server's messages as the lines a person reads: ``you: ...`` for the caller's
    final transcripts, ``assistant: ...`` streamed as its text arrives, errors."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self._open = False  # an assistant line is being written

    def __call__(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "transcript" and message.get("final"):
            self._end()
            self.write(f"you: {message.get('text', '')}\n")
        elif kind == "assistant_text":
            if not self._open:
                self.write("assistant: ")
                self._open = True
            self.write(str(message.get("delta", "")))
        elif kind == "turn" and message.get("role") == "assistant" \
                and message.get("phase") == "end":
            if self._open and message.get("interrupted"):
                self.write(" [interrupted]")
            self._end()
        elif kind == "error":
            self._end()
            self.write(f"[error] {message.get('message', '')}\n")

    def _end(self) -> None:
        if self._open:
            self.write("\n")
            self._open = False


def _answered(messages: Sequence[dict[str, Any]]) -> bool:
    """The caller's turn ended and an assistant reply after it ended."""
    asked = False
    for message in messages:
        if message.get("type") != "turn":
            continue
        if message.get("role") == "user" and message.get("phase") == "end":
            asked = True
        elif asked and message.get("role") == "assistant" and message.get("phase") == "end":
            return True
    return False


async def call_with_wav(url: str, wav: str | Path, *, out: str | Path | None = None,
                        mode: str | None = None, token: str | None = None,
                        timeout_s: float = 60.0, write: Callable[[str], None] = print
                        ) -> Call:
    """Say the WAV file to the server, write the captions (:class:`Captions`) until the
    reply to it ended (or ``timeout_s``), save what was received from the question's start
    on to ``out``, hang up. Returns the finished call (its messages and audio)."""
    samples, rate = read_wav(wav)
    mic = Microphone()
    captions = Captions(write)
    call = await connect(url, mic, mode=mode, token=token)
    try:
        await call.wait_for(lambda m: m.get("type") == "state", timeout_s=10)
        heard_from = len(call.received)
        mic.say(samples, rate)
        seen = 0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while not _answered(call.messages[:seen]):
                    await call.wait_for(lambda m: True, timeout_s=timeout_s, after=seen)
                    for message in call.messages[seen:]:
                        captions(message)
                    seen = len(call.messages)
                await asyncio.sleep(0.5)  # the reply's last frames reach the client
        if out is not None:
            write_wav(out, np.concatenate(call.received[heard_from:])
                      if len(call.received) > heard_from else np.zeros(0, np.int16))
    finally:
        await call.hang_up()
    return call


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="omnicall call", description="call an omnicall server with a WAV file: print "
        "the captions, save the reply")
    parser.add_argument("url", help="the server's page URL, e.g. http://localhost:8080/")
    parser.add_argument("--wav", required=True, help="what to say: a 16-bit PCM WAV file")
    parser.add_argument("--out", default="reply.wav",
                        help="where the reply's audio is saved (48 kHz mono WAV; '' = not)")
    parser.add_argument("--mode", choices=MODES, default=None,
                        help="the offer's mode (default: none; the server finds out)")
    parser.add_argument("--token", default=None, help="the server's --token")
    parser.add_argument("--timeout-s", type=float, default=60.0,
                        help="give up waiting for the reply after this long")
    args = parser.parse_args(argv)

    def show(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    try:
        call = asyncio.run(call_with_wav(args.url, args.wav, out=args.out or None,
                                         mode=args.mode, token=args.token,
                                         timeout_s=args.timeout_s, write=show))
    except (OfferRefused, aiohttp.ClientError, OSError, ValueError, wave.Error) as exc:
        print(f"omnicall call: {exc}", file=sys.stderr)
        return 2
    if not _answered(call.messages):
        print(f"omnicall call: no reply within {args.timeout_s:.0f} s", file=sys.stderr)
        return 1
    if args.out:
        print(f"reply saved to {args.out}", file=sys.stderr)
    return 0
