"""Silero VAD (bundled ONNX) on onnxruntime: 16 kHz int16 in, one speech probability per
32 ms chunk out. Per-session state (RNN state, 64-sample context, leftover samples) lives in
:class:`VadState`; the ONNX session is shared (onnxruntime sessions are thread-safe)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime

from omnicall.engine.bundled_models import silero_vad_onnx
from omnicall.media.resample import Int16Array

CHUNK_SAMPLES = 512  # 32 ms at 16 kHz
CONTEXT_SAMPLES = 64
RATE_HZ = 16_000


@dataclass
class VadState:
    rnn: npt.NDArray[np.float32] = field(
        default_factory=lambda: np.zeros((2, 1, 128), dtype=np.float32))
    context: npt.NDArray[np.float32] = field(
        default_factory=lambda: np.zeros((1, CONTEXT_SAMPLES), dtype=np.float32))
    leftover: npt.NDArray[np.float32] = field(
        default_factory=lambda: np.zeros(0, dtype=np.float32))


class SileroVad:
    def __init__(self, model_path: Path | None = None) -> None:
        opts = onnxruntime.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            str(model_path or silero_vad_onnx()), sess_options=opts,
            providers=["CPUExecutionProvider"])
        self._sr = np.array(RATE_HZ, dtype=np.int64)

    def probabilities(self, state: VadState, samples: Int16Array) -> list[float]:
        """Feed any number of samples; returns one probability per completed chunk."""
        audio = np.concatenate([state.leftover, samples.astype(np.float32) / 32768.0])
        probs = []
        whole = len(audio) // CHUNK_SAMPLES * CHUNK_SAMPLES
        for start in range(0, whole, CHUNK_SAMPLES):
            chunk = audio[start:start + CHUNK_SAMPLES].reshape(1, -1)
            x = np.concatenate([state.context, chunk], axis=1)
            prob, state.rnn = self._session.run(
                None, {"input": x, "state": state.rnn, "sr": self._sr})
            state.context = chunk[:, -CONTEXT_SAMPLES:]
            probs.append(float(prob[0, 0]))
        state.leftover = audio[whole:]
        return probs
