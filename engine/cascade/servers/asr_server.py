"""The turn's final transcript from any OpenAI-compatible transcription server (``--asr-url``).

``POST /v1/audio/transcriptions`` is served by OpenAI, vLLM (Whisper), ``transformers serve``,
faster-whisper servers, LocalAI and others; the ``openai`` package uploads the turn's audio
(the cleaned 16 kHz mono audio the listener kept: after the echo canceller and noise
suppressor, where those are on) as a WAV file, with ``language`` when one is set. With
``--language auto`` the answer is asked for as ``verbose_json``, whose ``language`` tells the
reply's language; a server that refuses that format is asked for plain ``json`` from then on.

The request runs on the event loop (network waits, no model work here): a speculative reply
cancelled when the caller speaks on cancels its request at once. What happens when the server
fails is :class:`~omnicall.engine.cascade.hearing.Hearing`'s (the local model stands in).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import openai

from omnicall.engine.cascade.asr import clean_transcript
from omnicall.engine.cascade.camera.pictures import wav_bytes
from omnicall.engine.cascade.servers.outage import Outage
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import INPUT_RATE_HZ

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 1.0  # loopback or a LAN: a server that does not accept this fast is down
DEFAULT_MODEL = "whisper-1"  # OpenAI's name; servers that serve one model ignore it
CHECK_SAMPLES = INPUT_RATE_HZ // 2  # the startup check sends 0.5 s of quiet noise


class AsrServerError(RuntimeError):
    """The transcription server failed or cannot be used; the message says which."""


class AsrServer:
    """A transcription server for one engine (its calls share the connection pool and the
    server's :class:`~omnicall.engine.cascade.servers.outage.Outage`)."""

    def __init__(self, base_url: str, model: str = "", key: str = "", language: str = "en",
                 timeout_s: float = 3.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model or DEFAULT_MODEL
        self.key = key or "not-needed"
        self.language = language  # a code, or 'auto' (the server detects it)
        self.timeout = openai.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S)
        self.clock = clock
        self.name = f"{self.model} at {self.base_url}"
        self.outage = Outage(f"ASR server {self.base_url}")
        self.verbose = language == "auto"  # ask for the detected language (verbose_json)
        self.scores = True  # hearing an interruption asks verbose_json for its segments' scores
        self._client: openai.AsyncOpenAI | None = None  # made on the loop that uses it

    def check(self) -> None:
        """At startup: one transcription of quiet noise (it also loads a server's model
        that loads on first use); :class:`AsrServerError` naming the flag when it fails."""
        client = openai.OpenAI(base_url=self.base_url, api_key=self.key, max_retries=0,
                               timeout=openai.Timeout(60.0, connect=CONNECT_TIMEOUT_S * 3))
        noise = (np.random.default_rng(0).standard_normal(CHECK_SAMPLES) * 30).astype(np.int16)
        try:
            with client:
                client.audio.transcriptions.create(**self._request(noise, "json"))
        except openai.NotFoundError as exc:
            raise AsrServerError(f"--asr-url {self.base_url}: no transcriptions there for "
                                 f"model {self.model!r} ({exc.message}); check the URL (it "
                                 "ends in /v1) and --asr-model") from exc
        except openai.APIError as exc:
            raise AsrServerError(f"--asr-url {self.base_url}: {exc}") from exc

    async def transcribe(self, samples: Int16Array) -> tuple[str, str]:
        """The words of a 16 kHz mono utterance and their language code ('' when the server
        did not say); :class:`AsrServerError` when the server failed (the outage noted)."""
        try:
            answer = await self._ask(self._open(), samples)
        except openai.APIError as exc:
            self.outage.failed(self.clock(), _reason(exc))
            raise AsrServerError(_reason(exc)) from exc
        self.outage.answered()
        text = answer if isinstance(answer, str) else str(getattr(answer, "text", "") or "")
        language = "" if isinstance(answer, str) else language_code(
            str(getattr(answer, "language", "") or ""))
        return clean_transcript(text.strip()), language

    async def hear(self, samples: Int16Array) -> tuple[str, float]:
        """The words of a short stretch of speech (the caller's sound over a reply) and the
        mean log-probability of their tokens from ``verbose_json``'s segments (0.0 when the
        server gives none: it cannot tell); :class:`AsrServerError` when it failed."""
        client = self._open()
        try:
            if self.scores:
                try:
                    answer = await client.audio.transcriptions.create(
                        **self._request(samples, "verbose_json"))
                except (openai.BadRequestError, openai.UnprocessableEntityError):
                    self.scores = False  # a server without verbose_json: words only
            if not self.scores:
                answer = await client.audio.transcriptions.create(
                    **self._request(samples, "json"))
        except openai.APIError as exc:
            self.outage.failed(self.clock(), _reason(exc))
            raise AsrServerError(_reason(exc)) from exc
        self.outage.answered()
        text = str(getattr(answer, "text", "") or "")
        return clean_transcript(text.strip()), segments_logprob(answer)

    def _open(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=self.key,
                                              max_retries=0, timeout=self.timeout)
        return self._client

    async def _ask(self, client: openai.AsyncOpenAI, samples: Int16Array) -> object:
        if self.verbose:
            try:
                return await client.audio.transcriptions.create(
                    **self._request(samples, "verbose_json"))
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                logger.info("the ASR server refuses verbose_json (%s); the reply's language "
                            "comes from --language from now on", _reason(exc))
                self.verbose = False
        return await client.audio.transcriptions.create(**self._request(samples, "json"))

    def _request(self, samples: Int16Array, response_format: str) -> dict[str, Any]:
        request: dict[str, Any] = {
            "file": ("turn.wav", wav_bytes(samples), "audio/wav"), "model": self.model,
            "response_format": response_format}
        if self.language != "auto":
            request["language"] = self.language
        return request

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def segments_logprob(answer: object) -> float:
    """The mean token log-probability of a ``verbose_json`` answer's segments, each weighted
    by its tokens (1 when it lists none); 0.0 without segments or scores."""
    total, count = 0.0, 0
    for segment in getattr(answer, "segments", None) or ():
        score = getattr(segment, "avg_logprob", None)
        if score is None and isinstance(segment, dict):
            score = segment.get("avg_logprob")
        if score is None:
            continue
        tokens = getattr(segment, "tokens", None) or (
            segment.get("tokens") if isinstance(segment, dict) else None) or [0]
        total += float(score) * len(tokens)
        count += len(tokens)
    return total / count if count else 0.0


def language_code(language: str) -> str:
    """A server's language as a code: OpenAI's verbose answer names it ('english'),
    faster-whisper servers give the code ('en')."""
    low = language.strip().lower()
    if len(low) <= 3:
        return low
    from omnicall.engine.languages import language_names

    return {name: code for code, name in language_names().items()}.get(low, "")


def _reason(exc: openai.APIError) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"{exc.status_code}: {exc.message}"[:200]
    return f"{type(exc).__name__}: {exc}"[:200]
