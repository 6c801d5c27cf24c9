"""The cascade's language model on any OpenAI-compatible server (``--llm-url``).

llama.cpp's server, Ollama, vLLM, LM Studio and hosted APIs all speak Chat Completions;
the ``openai`` package streams from them. Everything downstream is the same as with the
local model: the text deltas feed the clause splitter, a barge-in cancels (the HTTP stream
is closed at the next chunk), and tools use the protocol's own function calling (``tools``
in the request, streamed ``tool_calls`` deltas, the result sent back as a ``tool`` message).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import logging
import threading
import wave
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import openai

from omnicall.engine.cascade.camera.pictures import carries_media
from omnicall.engine.cascade.language_model import MediaRefused, SpokenAudio, ToolRequest
from omnicall.engine.cascade.reply_filters import SpokenReply
from omnicall.engine.tools import new_call_id

if TYPE_CHECKING:
    from omnicall.engine.tools import ToolSpec

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 30.0  # a server silent this long mid-reply: the reply fails (and is said)
CHARS_PER_TOKEN = 4  # the server's tokenizer is out of reach: memory is bounded by estimate


SERVER_AUDIO_RATE_HZ = 24_000  # raw PCM16 from vllm-omni (Qwen3-Omni) and OpenAI
DEFAULT_VOICE = "alloy"  # OpenAI's; vllm-omni reads no voice here and uses its default
WARM_TIMEOUT_S = 10.0  # an early prefill still going this long is dropped
#: statuses with which servers refuse a request's images (vLLM, llama.cpp's server: 400;
#: others 404, 415, 422 or 500 with a message about images / multimodal input)
REFUSAL_STATUSES = frozenset({400, 404, 415, 422, 500, 501})


class LlmServerError(RuntimeError):
    """The server cannot be used (unreachable, no such model); the message says which."""


class OpenAiLlm:
    """Chat Completions over HTTP (a
    :class:`~omnicall.engine.cascade.language_model.LanguageModel`); ``stream`` has the same
    contract as ``LlamaLlm.stream``."""

    prompt_tools = False  # tools go in the request, not in the system prompt
    can_prefill = False  # nothing to fill on the think worker: see :meth:`warm`
    can_warm = True  # an early request puts the prompt in the server's prompt cache

    def __init__(self, base_url: str, model: str = "", key: str = "",
                 max_reply_tokens: int = 64, vision: bool = False, audio_in: bool = False,
                 audio_out: bool = False, voice: str = DEFAULT_VOICE) -> None:
        self.client = openai.OpenAI(
            base_url=base_url.rstrip("/"), api_key=key or "not-needed", max_retries=0,
            timeout=openai.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S))
        self.base_url = base_url
        self.max_reply_tokens = max_reply_tokens
        try:
            served = [m.id for m in self.client.models.list()]
        except openai.APIError as exc:
            raise LlmServerError(f"--llm-url {base_url}: {exc}") from exc
        if model and served and model not in served:
            raise LlmServerError(f"--llm-model {model}: not served by {base_url} (it serves "
                                 f"{', '.join(served[:8])})")
        if not model and not served:
            raise LlmServerError(f"--llm-url {base_url} lists no models; name one with "
                                 "--llm-model")
        self.model = model or served[0]
        self.name = f"{self.model} at {base_url}"
        self.sees = vision  # --llm-vision: camera frames go with the user's turns
        self.hears = audio_in  # --llm-audio-in: the user's speech goes in their message
        self.speaks = audio_out  # --llm-audio-out: the server's voice, where it sends one
        self.voice = voice
        self._async: openai.AsyncOpenAI | None = None
        self._key = key or "not-needed"
        self._cache_prompt = True  # llama.cpp's field; dropped for a server refusing it
        self.warmed = 0  # early prefills the server answered

    async def warm(self, messages: list[dict[str, Any]]) -> bool:
        """Send the prompt so far with a one-token answer, so a server that caches prompts
        (llama.cpp's ``cache_prompt``, vLLM's prefix caching) has its images and words
        prefilled when the turn's own request comes. False (logged) when it failed: the
        turn's own request will tell what is wrong."""
        if self._async is None:  # created on the event loop that uses it
            self._async = openai.AsyncOpenAI(
                base_url=self.base_url.rstrip("/"), api_key=self._key, max_retries=0,
                timeout=openai.Timeout(WARM_TIMEOUT_S, connect=CONNECT_TIMEOUT_S))
        try:
            await self._async.chat.completions.create(
                model=self.model, messages=messages,  # type: ignore[arg-type]
                max_tokens=1, temperature=0.0,
                extra_body={"cache_prompt": True} if self._cache_prompt else None)
        except openai.UnprocessableEntityError as exc:
            if not self._cache_prompt:
                logger.info("early prefill refused: %s", str(exc)[:200])
                return False
            # a server that refuses unknown fields (transformers serve): plain requests
            # from now on (vLLM caches prefixes without being asked; llama.cpp does too)
            self._cache_prompt = False
            return await self.warm(messages)
        except openai.APIError as exc:
            logger.info("early prefill failed: %s", str(exc)[:200])
            return False
        self.warmed += 1
        return True

    async def aclose(self) -> None:
        """Close the early prefill's connection pool (the engine's close)."""
        if self._async is not None:
            await self._async.close()
            self._async = None

    def count_tokens(self, text: str) -> int:
        return len(text) // CHARS_PER_TOKEN + 1

    def prefill(self, messages: list[dict[str, Any]]) -> int:
        """Nothing to fill ahead: the server caches prompts on its own (if it does)."""
        return 0

    def cruise(self) -> None:
        """The server decodes on its own cores: nothing to hand back."""

    def tool_result_messages(self, request: ToolRequest, output: str) -> list[dict[str, Any]]:
        """The call and its result, as the protocol has them."""
        return [{"role": "assistant", "content": None, "tool_calls": [{
                    "id": request.call_id, "type": "function", "function": {
                        "name": request.name, "arguments": json.dumps(request.arguments)}}]},
                {"role": "tool", "tool_call_id": request.call_id, "content": output}]

    def stream(self, messages: list[dict[str, Any]], cancel: threading.Event,
               max_tokens: int | None = None, tools: list[ToolSpec] | None = None,
               greedy: bool = False) -> Iterator[str | ToolRequest | SpokenAudio]:
        extra: dict[str, Any] = {"tools": [s.openai() for s in tools]} if tools else {}
        if self.speaks:  # OpenAI's fields; vllm-omni reads modalities and audio.format too
            extra |= {"modalities": ["text", "audio"],
                      "audio": {"voice": self.voice, "format": "pcm16"}}
        try:
            stream: Any = self.client.chat.completions.create(
                model=self.model, messages=messages,  # type: ignore[arg-type]
                stream=True, max_tokens=max_tokens or self.max_reply_tokens,
                temperature=0.0 if greedy else 0.3, top_p=0.9, **extra)
        except openai.APIStatusError as exc:
            if exc.status_code in REFUSAL_STATUSES and carries_media(messages):
                raise MediaRefused(f"{exc.status_code}: {exc.message}"[:300]) from exc
            raise
        calls: dict[int, dict[str, str]] = {}
        reply = SpokenReply()
        with stream:
            for chunk in stream:
                if cancel.is_set():
                    return
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                for call in delta.tool_calls or ():
                    slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = call.id or slot["id"]
                    if call.function is not None:
                        slot["name"] += call.function.name or ""
                        slot["arguments"] += call.function.arguments or ""
                if calls:
                    continue
                content, audio = chunk_parts(chunk)
                if audio is not None:
                    yield audio
                if not content or reply.done:
                    continue
                text = reply.feed(content)
                if text:
                    yield text
                if reply.done and not self.speaks:  # the server's audio plays to its end
                    return
        if calls:  # the first call is run (one tool per turn, like the local model)
            first = calls[min(calls)]
            try:
                arguments = json.loads(first["arguments"] or "{}")
            except json.JSONDecodeError:
                logger.warning("tool call %s: arguments are not JSON: %.80s", first["name"],
                               first["arguments"])
                arguments = {}
            yield ToolRequest(first["name"], arguments if isinstance(arguments, dict) else {},
                              first["id"] or new_call_id())


def chunk_parts(chunk: Any) -> tuple[str, SpokenAudio | None]:
    """A streamed chunk's text and audio, in the two formats servers send audio in:
    vllm-omni's (``modality: "audio"`` on the chunk, the audio base64 in ``delta.content``:
    a WAV file, or raw 16-bit PCM at 24 kHz with ``format: pcm16``) and OpenAI's
    (``delta.audio`` with base64 PCM16 at 24 kHz in ``data``, its words in ``transcript``)."""
    delta = chunk.choices[0].delta
    extra = chunk.model_extra or {}
    if extra.get("modality") == "audio":
        return "", decode_audio(delta.content or "")
    spoken = getattr(delta, "audio", None) or (delta.model_extra or {}).get("audio")
    if spoken is not None and hasattr(spoken, "model_dump"):  # the SDK's typed ChoiceDeltaAudio
        spoken = spoken.model_dump()
    if isinstance(spoken, dict):
        data, words = spoken.get("data") or "", spoken.get("transcript") or ""
        return (delta.content or "") + words, decode_audio(data) if data else None
    return delta.content or "", None


def decode_audio(data: str) -> SpokenAudio | None:
    """Base64 audio from a chunk: a WAV file (its own rate) or raw PCM16 at 24 kHz."""
    if not data:
        return None
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        logger.warning("an audio chunk is not base64; skipped")
        return None
    if raw[:4] == b"RIFF":
        try:
            with wave.open(io.BytesIO(raw)) as wav:
                if wav.getsampwidth() != 2:
                    raise wave.Error(f"{8 * wav.getsampwidth()}-bit samples")
                pcm = np.frombuffer(wav.readframes(wav.getnframes()), "<i2")
                if wav.getnchannels() > 1:
                    pcm = pcm.reshape(-1, wav.getnchannels())[:, 0]
                return SpokenAudio(pcm.astype(np.int16), wav.getframerate())
        except (wave.Error, EOFError) as exc:
            logger.warning("an audio chunk's WAV is unreadable (%s); skipped", exc)
            return None
    usable = len(raw) - len(raw) % 2
    return SpokenAudio(np.frombuffer(raw[:usable], "<i2").astype(np.int16), SERVER_AUDIO_RATE_HZ)
