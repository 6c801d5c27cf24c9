"""Speech recognition: faster-whisper (CTranslate2) with the bundled Whisper tiny.en model.

Whisper's encoder is fed 30 s of (zero-padded) mel frames whatever the utterance length:
~430 ms per call on this 2-core machine for a 2 s question. CTranslate2 accepts shorter
inputs, and faster-whisper pads through one module-level helper, ``pad_or_trim``; omnicall
wraps it (:func:`_install_short_window`) so each call pads only to the utterance plus
``MARGIN_FRAMES``, at least ``MIN_FRAMES`` (10 s): ~130-170 ms, same word error rate on the
test set (tests/test_asr.py checks both the WER and that the hook point still exists).
With 5 s windows the decoder often looped on WebRTC audio ("What is X? What is X? ..."); at
10 s it did not in the benchmark, and a looping or capped result is decoded again with the
full window, so the shortcut can cost time but never correctness.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faster_whisper.transcribe as fw_transcribe
import numpy as np
from faster_whisper import WhisperModel

from engine.models import whisper_tiny_en_dir
from media.resample import Int16Array

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


def _install_short_window() -> None:
    original = fw_transcribe.pad_or_trim
    if getattr(original, "omnicall_short_window", False):
        return

    def pad_or_trim(array: Any, length: int = FULL_FRAMES, *, axis: int = -1) -> Any:
        return original(array, getattr(_window, "frames", length), axis=axis)

    pad_or_trim.omnicall_short_window = True  # type: ignore[attr-defined]
    fw_transcribe.pad_or_trim = pad_or_trim


def window_frames(samples: int, rate_hz: int = 16_000) -> int:
    frames = samples * 100 // rate_hz + MARGIN_FRAMES
    return int(min(FULL_FRAMES, max(MIN_FRAMES, -(-frames // 100) * 100)))


class WhisperAsr:
    def __init__(self, model_dir: Path | None = None, threads: int = 2,
                 short_window: bool = True, language: str = "en",
                 decoding: Decoding = DEFAULT_DECODING) -> None:
        path = model_dir or whisper_tiny_en_dir()
        self.model = WhisperModel(str(path), device="cpu", compute_type="int8",
                                  cpu_threads=threads)
        logging.getLogger("faster_whisper").setLevel(logging.WARNING)  # a line per call
        self.name = Path(path).name
        self.short_window = short_window
        self.decoding = decoding
        #: None: Whisper detects the language of each turn (--language auto, multilingual
        #: models only; an English-only model always hears English)
        self.language: str | None = "en" if not self.model.model.is_multilingual else (
            None if language == "auto" else language)
        _install_short_window()

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
            if not capped and not repetitive(text):
                return _clean(text), language
            # A short window sometimes makes the decoder loop ("What is X? What is X? ...");
            # the full 30 s window, as Whisper was trained, does not.
            logger.info("short-window ASR looped (%r); retrying with the full window",
                        text[:80])
        text, _, language = self._decode(audio, FULL_FRAMES)
        return _clean(text), language

    def _decode(self, audio: Any, frames: int) -> tuple[str, bool, str]:
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
        return (" ".join(s.text.strip() for s in kept).strip(), tokens >= max_tokens - 1,
                info.language)


def _clean(text: str) -> str:
    return "" if _HALLUCINATIONS.match(text) else text


def repetitive(text: str) -> bool:
    """The same phrase (3+ words) twice in a row: a decoding loop, not speech."""
    words = re.sub(r"[^\w' ]", " ", text.lower()).split()
    for size in range(3, len(words) // 2 + 1):
        for start in range(len(words) - 2 * size + 1):
            if words[start:start + size] == words[start + size:start + 2 * size]:
                return True
    return False
