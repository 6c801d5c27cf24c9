"""The Talker on CPU: Piper with the bundled voice (a setting), espeak-ng as fallback."""

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

from engine.models import ModelMissing, joe_voice_onnx
from media.resample import Int16Array

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


def load_tts(voice: str = "", language: str = "en") -> Tts:
    """``voice``: '' (bundled Piper voice), a Piper .onnx path, or 'espeak' (speaking
    ``language``). Only the bundled voice falls back to espeak-ng (when its package is
    missing); a voice the operator named must load, or the engine does not start."""
    if voice == "espeak":
        return EspeakTts("en" if language == "auto" else language)
    if voice:
        return PiperTts(Path(voice))
    try:
        return PiperTts(None)
    except (ModelMissing, ImportError, OSError) as exc:
        logger.warning("bundled Piper voice unavailable (%s); falling back to espeak-ng", exc)
        return EspeakTts()


def trim_silence(audio: Int16Array, rate_hz: int, threshold: int = 500, keep_ms: float = 10.0,
                 lead: bool = True, tail_keep_ms: float | None = None) -> Int16Array:
    """Cut the voice's leading silence (keeping ``keep_ms``) - the first sound of a reply is
    what the user waits for - and, with ``tail_keep_ms``, shorten trailing silence so clauses
    join without long gaps. Pure; returns a view."""
    loud = np.flatnonzero(np.abs(audio.astype(np.int32)) > threshold)
    if not len(loud):
        return audio
    start = max(0, int(loud[0]) - int(keep_ms * rate_hz / 1000)) if lead else 0
    end = len(audio)
    if tail_keep_ms is not None:
        end = min(len(audio), int(loud[-1]) + 1 + int(tail_keep_ms * rate_hz / 1000))
    return audio[start:end]
