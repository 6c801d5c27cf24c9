"""The bundled Piper voice with its vocoder run in pieces (engine/cascade/piper_stream.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from omnicall.engine.bundled_models import joe_voice_onnx
from omnicall.engine.cascade.engine import CascadeEngine
from omnicall.engine.cascade.piper_stream import (
    FIRST_WINDOW_FRAMES,
    NotStreamable,
    StreamingPiperTts,
    decoder_cut,
)
from omnicall.engine.cascade.tts import PiperTts, load_piper
from tests.cascade_fixtures import wer

SENTENCE = "The capital of France is Paris, a city known for its art and its food."


@pytest.fixture(scope="module")
def voice(cascade_engine: CascadeEngine) -> StreamingPiperTts:
    tts = cascade_engine.tts
    assert isinstance(tts, StreamingPiperTts), "the engine's bundled voice streams"
    return tts


def test_the_pieces_join_into_the_waveform_of_one_whole_decode(
        voice: StreamingPiperTts) -> None:
    latent = next(voice.latents(SENTENCE))
    pieces = list(voice.decode(latent))
    whole = voice.decoder.run(None, {voice.latent: latent})[0].reshape(-1)  # one run
    assert len(pieces) >= 3
    assert len(pieces[0]) == FIRST_WINDOW_FRAMES * voice.hop  # a short first piece
    joined = np.concatenate(pieces)
    assert len(joined) == len(whole)
    assert np.abs(joined - whole).max() < 1e-4 * np.abs(whole).max()


def test_streamed_speech_is_heard_right_at_full_scale(cascade_engine: CascadeEngine,
                                                      voice: StreamingPiperTts) -> None:
    """Piper draws random noise on every run (one take in ~12 was heard with two words
    wrong, "France is" -> "Francis"), so the best of three takes is judged."""
    from omnicall.media.resample import AudioConverter

    errors = []
    for _ in range(3):
        chunks = list(voice.synthesize(SENTENCE))
        assert all(rate == voice.rate_hz == 22_050 for _, rate in chunks)
        audio = np.concatenate([c for c, _ in chunks])
        assert 3.0 < len(audio) / voice.rate_hz < 7.0
        assert 20_000 < np.abs(audio.astype(np.int32)).max() <= 32_767  # one gain, near full
        converter = AudioConverter(16_000)
        heard = cascade_engine.asr.transcribe(np.concatenate(
            [converter.convert_array(audio, voice.rate_hz), converter.flush()]))
        errors.append(wer(SENTENCE, heard))
    assert min(errors) <= 0.15, errors


def test_the_decoder_cut_is_found_and_a_graph_without_one_is_refused() -> None:
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(joe_voice_onnx()))
    latent, waveform = decoder_cut(model.graph)
    assert latent and waveform.startswith("/dec/")
    # a multi-speaker voice's decoder also reads the speaker embedding: not cut
    for node in model.graph.node:
        if node.name.startswith("/dec/") and node.op_type == "Conv" and node.input[0] != latent:
            node.input[0] = "speaker_embedding"
            break
    with pytest.raises(NotStreamable):
        decoder_cut(model.graph)


def test_a_voice_that_cannot_stream_runs_whole(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    onnx = pytest.importorskip("onnx")
    source = joe_voice_onnx()
    model = onnx.load(str(source))
    for node in model.graph.node:  # the decoder's nodes renamed: no cut point
        node.name = node.name.replace("/dec/", "/vocoder/")
    path = tmp_path / "renamed.onnx"
    onnx.save(model, str(path))
    Path(f"{path}.json").write_text(Path(f"{source}.json").read_text())
    tts = load_piper(path)
    assert isinstance(tts, PiperTts)
    assert "runs a sentence at a time" in caplog.text
    audio, rate = next(iter(tts.synthesize("Hello there.")))
    assert rate == 22_050 and np.abs(audio).max() > 1000
