"""End of turn by model: Smart Turn v3.2 (pipecat-ai's bundled ONNX, BSD-2) on onnxruntime.

From the last 8 s of the user's audio (16 kHz, Whisper log-mel features from transformers'
``WhisperFeatureExtractor``, zero-padded at the front) it gives the probability that the
speaker has finished. The turn detector asks it once per pause: "finished" ends the turn
after a short silence, "not finished" waits longer; without the model the fixed hangover
applies. Pure and synchronous (the caller runs it on a worker thread).

The package ships the model int8-quantized (QDQ). onnxruntime runs such a graph in int8
kernels chosen by CPU feature, and they do not round alike: the same utterance scored 0.597 on
an AVX-512 VNNI machine and below 0.5 on another. So by default the graph is run as float32
(:func:`omnicall.engine.dequantize.dequantize`, done in memory at load): the same weights, a verdict
that is the same on every x86-64 CPU to ~1e-6, and closer to the float model the int8 one
approximates; it costs ~1.4x the int8 time per call (~45 against ~32 ms on one core here) and
~32 MB of memory. ``precision="int8"`` runs the shipped graph as it is.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from transformers import WhisperFeatureExtractor

from omnicall.engine.bundled_models import smart_turn_onnx
from omnicall.engine.dequantize import dequantize
from omnicall.media.resample import Int16Array

RATE_HZ = 16_000
WINDOW_S = 8
WINDOW_SAMPLES = WINDOW_S * RATE_HZ
PRECISIONS = ("float32", "int8")


class SmartTurn:
    def __init__(self, model_path: Path | None = None, threads: int = 1,
                 precision: str = "float32") -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r}: use one of {', '.join(PRECISIONS)}")
        path = str(model_path or smart_turn_onnx())
        graph: str | bytes = path
        if precision == "float32":
            graph = dequantize(onnx.load(path)).SerializeToString()
        self.precision = precision
        opts = onnxruntime.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = threads
        opts.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        self._session = onnxruntime.InferenceSession(
            graph, sess_options=opts,
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
