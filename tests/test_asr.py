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
