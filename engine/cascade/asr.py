"""Speech recognition: faster-whisper (CTranslate2) with a bundled Whisper model (tiny.en by
default, or base: see :mod:`omnicall.engine.bundled_models`) or one from a folder.

Whisper's encoder is fed 30 s of (zero-padded) mel frames whatever the utterance length:
~430 ms per call on two CPU cores for a 2 s question. CTranslate2 accepts shorter
inputs, and faster-whisper pads through one module-level helper, ``pad_or_trim``; omnicall
wraps it (:func:`omnicall.media.third_party.pad_whisper_input`) so each call pads only to
the utterance plus
``MARGIN_FRAMES``, at least ``MIN_FRAMES`` (10 s): ~130-170 ms, same word error rate on the
test set (tests/test_asr.py checks the WER, tests/test_third_party.py the hook point).

A short window sometimes makes the decoder loop over the padding ("What is 2 plus 3? What is
2 plus 3? What is 2"): often with 5 s windows, now and then at 10 s on WebRTC audio. The
loop's first pass is the transcript: it is kept (:func:`collapse_loop`) instead of decoding
again with the full window, which took 0.4-1.2 s on two cores (one turn in eight in
``bench/voice_to_voice.py``). On the 43 loops of ``bench/asr_wer.py``'s set at 5 s windows
the first pass had fewer word errors than the full-window decode (62 vs 73). A result cut
by the token cap without a loop is still decoded again with the full window.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from faster_whisper import WhisperModel

from omnicall.engine.bundled_models import whisper_files
from omnicall.media.resample import Int16Array
from omnicall.media.third_party import pad_whisper_input

logger = logging.getLogger(__name__)

# Whisper's habit of inventing these on silence or noise.
_HALLUCINATIONS = re.compile(
    r"^\s*(thank you\.?|thanks for watching!?|you|bye\.?|\[.*\]|\(.*\)|\.+)\s*$", re.I)


@dataclass(frozen=True)
class Decoding:
    """How Whisper decodes (compared by ``bench/asr_wer.py``)."""

    beam_size: int = 1
    prompt: bool = False  # condition on PROMPT (style and vocabulary of requests)


PROMPT = "Hello, a question for the assistant:"
DEFAULT_DECODING = Decoding(beam_size=1, prompt=False)

FULL_FRAMES = 3000  # 30 s at 100 mel frames per second
MIN_FRAMES = 1000
MARGIN_FRAMES = 100
_window = threading.local()


def _window_frames_now(length: int) -> int:
    """The frames this thread's transcription pads to (``length``: faster-whisper's own)."""
    frames: int = getattr(_window, "frames", length)
    return frames


def window_frames(samples: int, rate_hz: int = 16_000) -> int:
    frames = samples * 100 // rate_hz + MARGIN_FRAMES
    return int(min(FULL_FRAMES, max(MIN_FRAMES, -(-frames // 100) * 100)))


class WhisperAsr:
    def __init__(self, model: str | Path = "", threads: int = 2,
                 short_window: bool = True, language: str = "en",
                 decoding: Decoding = DEFAULT_DECODING) -> None:
        """``model``: what ``--asr`` takes ('' or ``tiny.en``, ``base``, or a folder)."""
        found = whisper_files(str(model))
        self.model = WhisperModel(str(found.folder), device="cpu", compute_type="int8",
                                  cpu_threads=threads, files=found.in_memory())
        logging.getLogger("faster_whisper").setLevel(logging.WARNING)  # a line per call
        self.name = found.name
        self.short_window = short_window
        self.decoding = decoding
        #: None: Whisper detects the language of each turn (--language auto, multilingual
        #: models only; an English-only model always hears English)
        self.language: str | None = "en" if not self.model.model.is_multilingual else (
            None if language == "auto" else language)
        self.loops_collapsed = 0
        self.full_window_retries = 0
        pad_whisper_input(_window_frames_now)

    def transcribe(self, samples: Int16Array) -> str:
        """Text of a 16 kHz mono utterance ('' for silence/noise)."""
        return self.transcribe_turn(samples)[0]

    def transcribe_turn(self, samples: Int16Array) -> tuple[str, str]:
        """Text and language code of a 16 kHz mono utterance ('' for silence/noise)."""
        if len(samples) < 1600:  # under 100 ms: nothing to recognise
            return "", self.language or "en"
        audio = samples.astype(np.float32) / 32768.0
        if self.short_window:
            text, capped, language = self._decode(audio, window_frames(len(samples)))
            verdict = short_window_verdict(text, capped)
            if verdict.looped:
                self.loops_collapsed += 1
                logger.info("short-window ASR looped (%r); kept its first pass", text[:80])
            if verdict.text is not None:
                return _clean(verdict.text), language
            logger.info("short-window ASR hit the token cap (%r); decoding again with the "
                        "full window", text[:80])
            self.full_window_retries += 1
        text, _, language = self._decode(audio, FULL_FRAMES)
        return _clean(text), language

    def hear(self, samples: Int16Array) -> tuple[str, float]:
        """The words of a short stretch of speech (the caller's sound over a reply) and how
        sure the model is of them: the mean log-probability of their tokens (0: certain;
        0.0 too when there are none). One short-window decode, a loop's first pass kept."""
        if len(samples) < 1600:
            return "", 0.0
        audio = samples.astype(np.float32) / 32768.0
        frames = window_frames(len(samples)) if self.short_window else FULL_FRAMES
        text, _, _, logprob = self._decode_scored(audio, frames)
        return _clean(collapse_loop(text)), logprob

    def _decode(self, audio: Any, frames: int) -> tuple[str, bool, str]:
        return self._decode_scored(audio, frames)[:3]

    def _decode_scored(self, audio: Any, frames: int) -> tuple[str, bool, str, float]:
        max_tokens = int(16 + 8 * len(audio) / 16_000)
        _window.frames = frames
        try:
            decoding = self.decoding
            segments, info = self.model.transcribe(
                audio, language=self.language, beam_size=decoding.beam_size,
                initial_prompt=PROMPT if decoding.prompt else None, without_timestamps=True,
                condition_on_previous_text=False, vad_filter=False, temperature=0.0,
                max_new_tokens=max_tokens)
            kept = [s for s in segments if s.no_speech_prob < 0.8]
        finally:
            del _window.frames
        tokens = sum(len(s.tokens) for s in kept)
        logprob = sum(s.avg_logprob * len(s.tokens) for s in kept) / tokens if tokens else 0.0
        return (" ".join(s.text.strip() for s in kept).strip(), tokens >= max_tokens - 1,
                info.language, logprob)


@dataclass(frozen=True)
class ShortWindowVerdict:
    """What a short-window decode's text is worth: ``text`` to keep (None: decode again with
    the full window), ``looped`` when that text is a decoding loop's first pass."""

    text: str | None
    looped: bool


def short_window_verdict(text: str, capped: bool) -> ShortWindowVerdict:
    """A loop over the padding keeps its first pass (never a second decode); a result cut by
    the token cap without a loop is decoded again; anything else is the transcript."""
    first_pass = collapse_loop(text)
    if first_pass != text:
        return ShortWindowVerdict(first_pass, looped=True)
    return ShortWindowVerdict(None if capped else text, looped=False)


def _clean(text: str) -> str:
    return "" if _HALLUCINATIONS.match(text) else text


def clean_transcript(text: str) -> str:
    """``text`` without what Whisper makes up on silence or noise ('Thank you.', '[music]'),
    for a transcript from elsewhere (a transcription server) as for the local model's."""
    return _clean(text)


def collapse_loop(text: str) -> str:
    """``text`` up to the end of the first phrase (3+ words) that comes twice in a row - a
    decoding loop, not speech ("What is X? What is X? What" -> "What is X?"); unchanged
    when nothing repeats."""
    raw = text.split()
    words = [re.sub(r"[^\w']", "", w.lower()) for w in raw]
    for start in range(len(words)):
        for size in range(3, (len(words) - start) // 2 + 1):
            if words[start:start + size] == words[start + size:start + 2 * size]:
                return " ".join(raw[:start + size])
    return text
