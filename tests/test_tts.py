import numpy as np

from engine.cascade.engine import CascadeEngine
from engine.cascade.tts import EspeakTts, load_tts


def test_piper_speaks(cascade_engine: CascadeEngine) -> None:
    chunks = list(cascade_engine.tts.synthesize("Hello, I can hear you."))
    audio = np.concatenate([c for c, _ in chunks])
    rate = chunks[0][1]
    assert cascade_engine.tts.name.startswith("piper")
    assert rate == 22_050 and 0.8 < len(audio) / rate < 4
    assert np.sqrt(np.mean(audio.astype(float) ** 2)) > 500


def test_espeak_fallback_and_setting() -> None:
    tts = load_tts("espeak")
    assert isinstance(tts, EspeakTts)
    audio, rate = next(iter(tts.synthesize("Fallback voice.")))
    assert rate > 8000 and np.abs(audio).max() > 1000


def test_bad_voice_path_falls_back_to_espeak() -> None:
    assert load_tts("/nonexistent/voice.onnx").name == "espeak-ng"
