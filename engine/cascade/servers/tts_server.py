"""The cascade's voice on any OpenAI-compatible speech server (``--tts-url``).

``POST /v1/audio/speech`` is served by OpenAI, Kokoro and Piper servers, LocalAI and others.
Each clause the Talker is given is one request with ``response_format: pcm`` (16-bit mono;
24 kHz as OpenAI sends it, or the rate in the server's ``X-Sample-Rate`` header; a server
that answers with a WAV file anyway is read from its header), and its body is played as it
arrives - a server that streams (Kokoro's, loudness-tts) is heard before the clause is
finished, one that answers whole is heard when it has. The request runs on the event loop (a
network wait): a barge-in cancels the Talker and with it the ``async with`` that holds the
response, which closes the stream at once.

Errors and time-outs (:data:`~omnicall.engine.cascade.settings.CascadeSettings.tts_timeout_s`
to the first or the next piece of sound) are :class:`TtsServerError`; the Talker then has the
local voice say the clause (:attr:`ServerVoice.local`), and the page is told once per outage.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx2  # the openai package's HTTP client: errors mid-stream come from it unwrapped
import numpy as np
import openai

from omnicall.engine.cascade.servers.outage import Outage
from omnicall.engine.cascade.tts import Tts
from omnicall.media.resample import Int16Array

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 1.0
DEFAULT_MODEL = "tts-1"  # OpenAI's name; servers with one model ignore it
PCM_RATE_HZ = 24_000  # OpenAI's response_format pcm: 24 kHz, 16-bit, little-endian, mono
RATE_HEADER = "x-sample-rate"  # a server's own rate for its pcm (Piper voices: 22050)
READ_BYTES = 4_800  # ~100 ms at 24 kHz: pieces as the server sends them, at most this long
MAX_WAV_HEADER_BYTES = 4_096  # a WAV answer's header larger than this is not one


class TtsServerError(RuntimeError):
    """The speech server failed or cannot be used; the message says which."""


class PcmReader:
    """A speech response's bytes as int16 samples, piece by piece: raw PCM16 (an odd byte
    held for the next piece), or a WAV file whose header gives the rate. Pure."""

    def __init__(self, rate_hz: int = PCM_RATE_HZ) -> None:
        self.rate_hz = rate_hz
        self._held = b""
        self._header_done = False

    def feed(self, data: bytes) -> Int16Array:
        data = self._held + data
        if not self._header_done:
            if len(data) < 12 and b"RIFF".startswith(data[:4]):
                self._held = data  # too short to tell a WAV header from sound
                return np.zeros(0, np.int16)
            if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
                start = self._wav_data(data)
                if start is None:
                    if len(data) > MAX_WAV_HEADER_BYTES:
                        raise TtsServerError("the speech server's WAV header is unreadable")
                    self._held = data
                    return np.zeros(0, np.int16)
                data = data[start:]
            self._header_done = True
        usable = len(data) - len(data) % 2
        self._held = data[usable:]
        return np.frombuffer(data[:usable], "<i2").astype(np.int16)

    def _wav_data(self, data: bytes) -> int | None:
        """Where a WAV file's samples start (its rate read on the way); None: not yet."""
        at = 12
        while at + 8 <= len(data):
            chunk, size = data[at:at + 4], struct.unpack("<I", data[at + 4:at + 8])[0]
            if chunk == b"data":
                return at + 8
            if chunk == b"fmt " and at + 16 <= len(data):
                channels, rate = struct.unpack("<HI", data[at + 10:at + 16])
                if channels != 1:
                    raise TtsServerError(f"the speech server sent {channels} channels")
                self.rate_hz = rate
            at += 8 + size + size % 2
        return None


class ServerVoice:
    """A voice on a speech server, for one engine (its calls share the connection pool and
    the :class:`~omnicall.engine.cascade.servers.outage.Outage`), with the local voice that stands
    in for it. :meth:`synthesize` is the local voice's (the engine's warm-up): the Talker
    streams from the server with :meth:`stream`."""

    def __init__(self, base_url: str, local: Tts, model: str = "", voice: str = "alloy",
                 key: str = "", timeout_s: float = 3.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.base_url = base_url.rstrip("/")
        self.local = local
        self.model = model or DEFAULT_MODEL
        self.voice = voice
        self.key = key or "not-needed"
        self.timeout = openai.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S)
        self.clock = clock
        self.name = f"{self.model}/{voice} at {self.base_url}"
        self.outage = Outage(f"speech server {self.base_url}")
        self.spoken = 0  # clauses the server said to their end
        self._client: openai.AsyncOpenAI | None = None  # made on the loop that uses it

    def synthesize(self, text: str) -> Iterator[tuple[Int16Array, int]]:
        """The local voice's synthesis (the server's is :meth:`stream`)."""
        return self.local.synthesize(text)

    def check(self) -> None:
        """At startup: one short phrase must come back as sound; :class:`TtsServerError`
        naming the flag when it does not."""
        client = openai.OpenAI(base_url=self.base_url, api_key=self.key, max_retries=0,
                               timeout=openai.Timeout(60.0, connect=CONNECT_TIMEOUT_S * 3))
        reader = PcmReader()
        try:
            with client, client.audio.speech.with_streaming_response.create(
                    **self._request("Hello.")) as response:
                reader.rate_hz = _rate(response.headers)
                samples = np.concatenate([reader.feed(b) for b in response.iter_bytes()]
                                         or [np.zeros(0, np.int16)])
        except openai.NotFoundError as exc:
            raise TtsServerError(f"--tts-url {self.base_url}: no speech there for model "
                                 f"{self.model!r} ({exc.message}); check the URL (it ends in "
                                 "/v1) and --tts-model") from exc
        except (openai.APIError, httpx2.HTTPError) as exc:
            raise TtsServerError(f"--tts-url {self.base_url}: {exc}") from exc
        if not len(samples):
            raise TtsServerError(f"--tts-url {self.base_url}: answered 'Hello.' without sound")

    async def stream(self, text: str) -> AsyncIterator[tuple[Int16Array, int]]:
        """(int16 samples, rate) pieces of ``text`` as the server sends them;
        :class:`TtsServerError` when it fails (the outage noted)."""
        if self._client is None:
            self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=self.key,
                                              max_retries=0, timeout=self.timeout)
        reader = PcmReader()
        try:
            async with self._client.audio.speech.with_streaming_response.create(
                    **self._request(text)) as response:
                reader.rate_hz = _rate(response.headers)
                async for data in response.iter_bytes(READ_BYTES):
                    samples = reader.feed(data)
                    if len(samples):
                        yield samples, reader.rate_hz
        except (openai.APIError, httpx2.HTTPError) as exc:
            reason = (f"{exc.status_code}: {exc.message}" if isinstance(
                exc, openai.APIStatusError) else f"{type(exc).__name__}: {exc}")[:200]
            self.outage.failed(self.clock(), reason)
            raise TtsServerError(reason) from exc
        self.outage.answered()
        self.spoken += 1

    def _request(self, text: str) -> dict[str, Any]:
        return {"model": self.model, "voice": self.voice, "input": text,
                "response_format": "pcm"}

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def _rate(headers: object) -> int:
    """The server's pcm rate from its ``X-Sample-Rate`` header (OpenAI's 24 kHz without)."""
    raw = getattr(headers, "get", lambda _key: None)(RATE_HEADER)
    try:
        rate = int(raw) if raw else PCM_RATE_HZ
    except ValueError:
        return PCM_RATE_HZ
    return rate if 8_000 <= rate <= 96_000 else PCM_RATE_HZ
