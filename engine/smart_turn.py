"""End of turn by model: Smart Turn v3.2 (pipecat-ai's bundled ONNX, BSD-2) on onnxruntime.

From the last 8 s of the user's audio (16 kHz, Whisper log-mel features from transformers'
``WhisperFeatureExtractor``, zero-padded at the front) it gives the probability that the
speaker has finished. The turn detector asks it once per pause: "finished" ends the turn
after a short silence, "not finished" waits longer; without the model the fixed hangover
applies. Pure and synchronous (the caller runs it on a worker thread); ~10-20 ms a call on
one core here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime
from transformers import WhisperFeatureExtractor

from engine.models import smart_turn_onnx
from media.resample import Int16Array

RATE_HZ = 16_000
WINDOW_S = 8
WINDOW_SAMPLES = WINDOW_S * RATE_HZ


class SmartTurn:
    def __init__(self, model_path: Path | None = None, threads: int = 1) -> None:
        opts = onnxruntime.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = threads
        opts.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        self._session = onnxruntime.InferenceSession(
            str(model_path or smart_turn_onnx()), sess_options=opts,
            providers=["CPUExecutionProvider"])
        self._features = WhisperFeatureExtractor(feature_size=80, sampling_rate=RATE_HZ,
                                                 chunk_length=WINDOW_S)

    def features(self, samples: Int16Array) -> np.ndarray:
        """(1, 80, 800) log-mel features of the last 8 s (front-padded with silence)."""
        audio = samples[-WINDOW_SAMPLES:].astype(np.float32) / 32768.0
        audio = np.pad(audio, (WINDOW_SAMPLES - len(audio), 0))
        out = self._features(audio, sampling_rate=RATE_HZ, return_tensors="np",
                             do_normalize=True)  # exactly 8 s: nothing to pad
        return np.asarray(out["input_features"], dtype=np.float32)

    def probability(self, samples: Int16Array) -> float:
        """P(the speaker has finished) for a 16 kHz mono utterance ending now."""
        (logits,) = self._session.run(None, {"input_features": self.features(samples)})
        return float(np.asarray(logits).reshape(-1)[0])  # the model ends in a sigmoid
