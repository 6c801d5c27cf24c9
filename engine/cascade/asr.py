"""Speech recognition: faster-whisper (CTranslate2) with the bundled Whisper tiny.en model."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
from faster_whisper import WhisperModel

from engine.cascade.models import whisper_tiny_en_dir
from media.resample import Int16Array

logger = logging.getLogger(__name__)

# Whisper's habit of inventing these on silence or noise.
_HALLUCINATIONS = re.compile(
    r"^\s*(thank you\.?|thanks for watching!?|you|bye\.?|\[.*\]|\(.*\)|\.+)\s*$", re.I)


class WhisperAsr:
    def __init__(self, model_dir: Path | None = None, threads: int = 2) -> None:
        path = model_dir or whisper_tiny_en_dir()
        self.model = WhisperModel(str(path), device="cpu", compute_type="int8",
                                  cpu_threads=threads)
        self.name = Path(path).name

    def transcribe(self, samples: Int16Array) -> str:
        """Text of a 16 kHz mono utterance ('' for silence/noise)."""
        if len(samples) < 1600:  # under 100 ms: nothing to recognise
            return ""
        audio = samples.astype(np.float32) / 32768.0
        segments, _ = self.model.transcribe(
            audio, language="en", beam_size=1, without_timestamps=True,
            condition_on_previous_text=False, vad_filter=False, temperature=0.0)
        text = " ".join(s.text.strip() for s in segments if s.no_speech_prob < 0.8).strip()
        return "" if _HALLUCINATIONS.match(text) else text
