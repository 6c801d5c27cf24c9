import numpy as np

from omnicall.engine.cascade.engine import CascadeEngine
from omnicall.engine.cascade.tts import EspeakTts, load_tts


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


def test_a_named_voice_that_does_not_load_is_an_error_not_espeak() -> None:
    import pytest

    with pytest.raises(OSError):
        load_tts("/nonexistent/voice.onnx")


def test_trim_silence_keeps_the_sound() -> None:
    import numpy as np

    from omnicall.engine.cascade.tts import trim_silence

    rate = 24_000
    sound = (np.sin(np.arange(rate // 2) / 5) * 8000).astype(np.int16)
    audio = np.concatenate([np.zeros(rate // 10, np.int16), sound, np.zeros(rate // 4, np.int16)])
    trimmed = trim_silence(audio, rate, keep_ms=10, tail_keep_ms=150)
    assert abs(len(trimmed) - (len(sound) + rate // 100 + int(rate * 0.15))) <= 2
    assert np.abs(trimmed[: rate // 100 - 2]).max() == 0  # 10 ms of lead kept
    assert np.abs(trimmed[rate // 100 + 2:rate // 100 + 100]).max() > 1000
    assert len(trim_silence(np.zeros(100, np.int16), rate)) == 100  # all silence: untouched
    untouched_lead = trim_silence(audio, rate, lead=False, tail_keep_ms=None)
    assert len(untouched_lead) == len(audio)


def test_the_silence_trimmer_on_pieces_equals_trimming_the_whole() -> None:
    from omnicall.engine.cascade.tts import SilenceTrimmer, trim_silence

    rate = 24_000
    rng = np.random.default_rng(3)
    tone = (np.sin(np.arange(rate // 4) / 5) * 8000).astype(np.int16)
    quiet = (rng.standard_normal(rate // 5) * 50).astype(np.int16)
    audio = np.concatenate([quiet, tone, quiet, quiet, tone, quiet, quiet])
    cases = [dict(lead=True, tail_keep_ms=150.0), dict(lead=False, tail_keep_ms=150.0),
             dict(lead=True, tail_keep_ms=None), dict(lead=False, tail_keep_ms=None)]
    loud = np.flatnonzero(np.abs(audio.astype(np.int32)) > 500)
    expected = audio[loud[0] - rate // 100:loud[-1] + 1 + int(rate * 0.15)]  # 10 ms lead
    assert np.array_equal(trim_silence(audio, rate, tail_keep_ms=150.0), expected)
    for signal in (audio, quiet):  # all quiet: untouched, as trim_silence leaves it
        for case in cases:
            whole = trim_silence(signal, rate, **case)  # type: ignore[arg-type]
            for size in (1, 480, 1920, 7000, len(signal)):
                trimmer = SilenceTrimmer(rate, **case)  # type: ignore[arg-type]
                out = [trimmer.feed(signal[i:i + size]) for i in range(0, len(signal), size)]
                joined = np.concatenate([*out, trimmer.end()])
                assert np.array_equal(joined, whole), (case, size)
