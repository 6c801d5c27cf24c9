import numpy as np

from omnicall.engine.cascade.engine import CascadeEngine
from omnicall.engine.vad import VadState
from tests.utils import piper_speech


def test_speech_scores_high_and_silence_low(cascade_engine: CascadeEngine) -> None:
    vad = cascade_engine.listening.vad
    speech = piper_speech("Hello there, how are you doing today?", lead_s=0, tail_s=0)
    probs = vad.probabilities(VadState(), speech)
    assert np.mean(np.array(probs) > 0.5) > 0.6
    quiet = vad.probabilities(VadState(), np.zeros(16_000, np.int16))
    assert max(quiet) < 0.2


def test_streaming_equals_batch(cascade_engine: CascadeEngine) -> None:
    vad = cascade_engine.listening.vad
    audio = piper_speech("Streaming must equal batch.")
    batch = vad.probabilities(VadState(), audio)
    state, streamed = VadState(), []
    for i in range(0, len(audio), 1280):  # 80 ms units, as the engine receives them
        streamed += vad.probabilities(state, audio[i:i + 1280])
    assert len(streamed) == len(batch) == len(audio) // 512
    assert np.allclose(streamed, batch, atol=1e-6)
