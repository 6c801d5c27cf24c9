"""Whisper tiny.en (bundled) on speech the tests synthesize with the bundled Piper voice."""

import numpy as np

from engine.cascade.engine import CascadeEngine
from tests.cascade_fixtures import wer
from tests.utils import piper_speech

SENTENCES = [
    "What is the weather like today?",
    "Can you see the book in my hand?",
    "Please tell me a short story about a cat.",
    "How far is the moon from the earth?",
    "I would like to order two large pizzas.",
]


def test_word_error_rate_is_low(cascade_engine: CascadeEngine) -> None:
    errors = [wer(s, cascade_engine.asr.transcribe(piper_speech(s))) for s in SENTENCES]
    assert np.mean(errors) <= 0.15, errors


def test_silence_and_noise_give_no_text(cascade_engine: CascadeEngine) -> None:
    rng = np.random.default_rng(1)
    assert cascade_engine.asr.transcribe(np.zeros(32_000, np.int16)) == ""
    assert cascade_engine.asr.transcribe(np.zeros(800, np.int16)) == ""
    noise = (rng.standard_normal(32_000) * 200).astype(np.int16)
    assert len(cascade_engine.asr.transcribe(noise).split()) <= 2


def test_short_window_is_hooked_and_matches_the_full_window(
        cascade_engine: CascadeEngine) -> None:
    import faster_whisper.transcribe as fw

    from engine.cascade.asr import WhisperAsr, window_frames

    assert getattr(fw.pad_or_trim, "omnicall_short_window", False), \
        "faster-whisper no longer pads through pad_or_trim: revisit engine/cascade/asr.py"
    assert window_frames(16_000 * 2) == 1000 and window_frames(16_000 * 12) == 1300
    assert window_frames(16_000 * 60) == 3000
    full = WhisperAsr(short_window=False)
    for sentence in SENTENCES[:3]:
        speech = piper_speech(sentence)
        assert wer(sentence, cascade_engine.asr.transcribe(speech)) <= wer(
            sentence, full.transcribe(speech)) + 0.1


def test_repetition_detector() -> None:
    from engine.cascade.asr import repetitive

    assert repetitive("What is the capital of France? What is the capital of France?")
    assert repetitive("go to the shop go to the shop")
    assert not repetitive("Stop, stop. Wait a moment.")
    assert not repetitive("What is the capital of France?")
