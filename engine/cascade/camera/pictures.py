"""Camera frames and the user's own speech in a Chat Completions prompt (``--llm-vision``,
``--llm-audio-in``): the OpenAI content-part format that vLLM, vllm-omni, Ollama, llama.cpp's
server, LM Studio, ``transformers serve`` and OpenAI accept.

A user message that carries pictures becomes a list of parts, pictures first, then the words
(or the speech itself): ``{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,
...", "detail": "low" | "high"}}`` ... ``{"type": "text", "text": ...}``. Pictures first, so
the prompt of an early prefill (the frames so far, while the user still speaks) is a prefix
of the turn's final prompt, whatever the words turn out to be. A picture past the retention
bound is replaced by :data:`~omnicall.engine.conversation.frame_policy.RETIRED_NOTE` in the
text, so the history keeps saying that something was shown without its cost.

Nothing here logs: a picture is only ever an id, a size and a data URL in a request.
"""

from __future__ import annotations

import base64
import io
import wave
from dataclasses import dataclass
from typing import Any

import numpy as np

from omnicall.engine.conversation.camera import Sighting
from omnicall.engine.conversation.frame_policy import RETIRED_NOTE, ImageId
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import INPUT_RATE_HZ

#: what a picture costs in the memory's token budget (a 448 x 336 frame is ~192 vision
#: tokens in Qwen-VL-style models, ~85-255 for OpenAI's low/high detail tiles)
PICTURE_TOKENS = 256


@dataclass(frozen=True, slots=True)
class Picture:
    """A camera frame that went with a user turn."""

    image_id: ImageId
    url: str  # a JPEG data URL; '' once retired
    sharp: bool = False  # the words asked to look: ``detail: high``

    @property
    def retired(self) -> bool:
        return not self.url

    def part(self) -> dict[str, Any]:
        return {"type": "image_url", "image_url": {
            "url": self.url, "detail": "high" if self.sharp else "low"}}


def picture_of(sighting: Sighting) -> Picture:
    return Picture(sighting.image_id, sighting.data_url(), sighting.selection.sharp)


def wav_bytes(samples: Int16Array, rate_hz: int = INPUT_RATE_HZ) -> bytes:
    """Mono 16-bit PCM as a WAV file (``input_audio`` with ``format: wav``)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate_hz)
        out.writeframes(np.asarray(samples, np.int16).tobytes())
    return buffer.getvalue()


def audio_part(samples: Int16Array) -> dict[str, Any]:
    return {"type": "input_audio", "input_audio": {
        "data": base64.b64encode(wav_bytes(samples)).decode("ascii"), "format": "wav"}}


def user_content(text: str, pictures: tuple[Picture, ...] = (),
                 audio: Int16Array | None = None) -> str | list[dict[str, Any]]:
    """A user message's ``content``: plain text without pictures or audio, else the parts
    (pictures first; retired ones become a note in the text; the speech replaces the words,
    which the model then hears for itself)."""
    live = [p.part() for p in pictures if not p.retired]
    retired = sum(p.retired for p in pictures)
    words = " ".join([RETIRED_NOTE] * retired + ([text] if text else []))
    if not live and audio is None:
        return words
    parts: list[dict[str, Any]] = live
    if audio is not None:
        parts = [*parts, audio_part(audio)]
        words = " ".join([RETIRED_NOTE] * retired)
    return [*parts, {"type": "text", "text": words}] if words else parts


def carries_media(messages: list[dict[str, Any]]) -> bool:
    """Whether any message has image or audio parts."""
    return any(isinstance(m.get("content"), list) and any(
        part.get("type") in ("image_url", "input_audio") for part in m["content"])
        for m in messages)
