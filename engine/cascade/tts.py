"""The Talker on CPU: Piper with the bundled voice (a setting), espeak-ng as fallback.

Piper runs with its vocoder in pieces (:mod:`omnicall.engine.cascade.piper_stream`) so a clause's
first sound comes before its last one is computed; a voice whose graph cannot be cut that
way is run whole, a sentence at a time.
"""

from __future__ import annotations

import io
import logging
import shutil
import subprocess
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from omnicall.engine.bundled_models import ModelMissing, joe_voice_onnx
from omnicall.media.resample import Int16Array

logger = logging.getLogger(__name__)


class Tts(Protocol):
    name: str

    def synthesize(self, text: str) -> Iterator[tuple[Int16Array, int]]:
        """(mono int16 samples, rate) chunks for ``text``."""
        ...


class PiperTts:
    def __init__(self, voice_path: Path | None = None) -> None:
        from piper import PiperVoice

        path = voice_path or joe_voice_onnx()
        self.voice = PiperVoice.load(str(path))
        self.name = f"piper:{Path(path).stem}"

    def synthesize(self, text: str) -> Iterator[tuple[Int16Array, int]]:
        for chunk in self.voice.synthesize(text):
            yield np.asarray(chunk.audio_int16_array, dtype=np.int16), int(chunk.sample_rate)


class EspeakTts:
    name = "espeak-ng"

    def __init__(self, language: str = "en") -> None:
        exe = shutil.which("espeak-ng")
        if exe is None:
            raise ModelMissing("espeak-ng is not installed: `apt-get install espeak-ng`")
        self._exe = exe
        self.language = language

    def synthesize(self, text: str) -> Iterator[tuple[Int16Array, int]]:
        out = subprocess.run([self._exe, "-v", self.language, "--stdout", text], check=True,
                             capture_output=True, timeout=30).stdout
        with wave.open(io.BytesIO(out)) as wav:
            rate = wav.getframerate()
            data = np.frombuffer(wav.readframes(wav.getnframes()), dtype=np.int16)
        yield data, rate


def load_piper(voice_path: Path | None) -> Tts:
    """A Piper voice, streamed when its graph allows (it does for single-speaker voices)."""
    from omnicall.engine.cascade.piper_stream import NotStreamable, StreamingPiperTts

    try:
        return StreamingPiperTts(voice_path)
    except (NotStreamable, ImportError) as exc:  # ImportError: the onnx package is missing
        logger.warning("Piper voice %s runs a sentence at a time: %s",
                       voice_path or "(bundled)", exc)
        return PiperTts(voice_path)


def load_tts(voice: str = "", language: str = "en") -> Tts:
    """``voice``: '' (bundled Piper voice), a Piper .onnx path, or 'espeak' (speaking
    ``language``). Only the bundled voice falls back to espeak-ng (when its package is
    missing); a voice the operator named must load, or the engine does not start."""
    if voice == "espeak":
        return EspeakTts("en" if language == "auto" else language)
    if voice:
        return load_piper(Path(voice))
    try:
        return load_piper(None)
    except (ModelMissing, ImportError, OSError) as exc:
        logger.warning("bundled Piper voice unavailable (%s); falling back to espeak-ng", exc)
        return EspeakTts()


def trim_silence(audio: Int16Array, rate_hz: int, threshold: int = 500, keep_ms: float = 10.0,
                 lead: bool = True, tail_keep_ms: float | None = None) -> Int16Array:
    """Cut the voice's leading silence (keeping ``keep_ms``) - the first sound of a reply is
    what the user waits for - and, with ``tail_keep_ms``, shorten trailing silence so clauses
    join without long gaps; audio without a loud sample is left whole. Pure: the
    :class:`SilenceTrimmer` fed all of ``audio`` at once."""
    trimmer = SilenceTrimmer(rate_hz, threshold, keep_ms, lead, tail_keep_ms)
    return np.concatenate([trimmer.feed(audio), trimmer.end()])


class SilenceTrimmer:
    """Silence trimming (see :func:`trim_silence`) for audio that arrives in pieces: the
    samples come out as soon as they are known to be kept (a quiet stretch is held until
    sound follows it or the audio ends), the same whatever the pieces. Pure."""

    def __init__(self, rate_hz: int, threshold: int = 500, keep_ms: float = 10.0,
                 lead: bool = True, tail_keep_ms: float | None = None) -> None:
        self.threshold = threshold
        self.keep = int(keep_ms * rate_hz / 1000)
        self.tail_keep = None if tail_keep_ms is None else int(tail_keep_ms * rate_hz / 1000)
        self._leading = lead  # the lead is still being cut
        self._heard = False  # a loud sample came
        self._held = np.zeros(0, np.int16)

    def feed(self, audio: Int16Array) -> Int16Array:
        audio = np.concatenate([self._held, audio]) if len(self._held) else audio
        loud = np.flatnonzero(np.abs(audio.astype(np.int32)) > self.threshold)
        if not len(loud):
            self._held = audio
            return audio[:0]
        start = max(0, int(loud[0]) - self.keep) if self._leading else 0
        self._leading, self._heard = False, True
        end = int(loud[-1]) + 1
        self._held = audio[end:]
        return audio[start:end]

    def end(self) -> Int16Array:
        """What is left when the audio ends: the tail (all of it if nothing was loud)."""
        held, self._held = self._held, np.zeros(0, np.int16)
        if self._heard and self.tail_keep is not None:
            return held[:self.tail_keep]
        return held
