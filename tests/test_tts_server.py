"""``--tts-url``: replies spoken by a real OpenAI-compatible speech server started here
(local-tts-studio on the bundled Piper voice), and the PCM reader under it."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from omnicall.engine.cascade.servers.tts_server import (
    PCM_RATE_HZ,
    PcmReader,
    ServerVoice,
    TtsServerError,
)
from omnicall.engine.cascade.tts import load_tts
from tests.llm_servers import _free_port
from tests.speech_servers import SpeechServer, piper_speech_server


@pytest.fixture(scope="module")
def speech_server() -> Iterator[SpeechServer]:
    with piper_speech_server() as server:
        yield server


def wav_header(rate: int, samples: int, channels: int = 1) -> bytes:
    data = samples * 2 * channels
    return (b"RIFF" + struct.pack("<I", 36 + data) + b"WAVE" + b"fmt " +
            struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * 2 * channels, 2 * channels, 16)
            + b"data" + struct.pack("<I", data))


def test_pcm_in_any_pieces_gives_the_same_samples() -> None:
    samples = (np.arange(-500, 500) * 13).astype(np.int16)
    raw = samples.astype("<i2").tobytes()
    for cut in (1, 3, 7, 999):
        reader = PcmReader()
        got = np.concatenate([reader.feed(raw[i:i + cut]) for i in range(0, len(raw), cut)])
        assert np.array_equal(got, samples) and reader.rate_hz == PCM_RATE_HZ


def test_a_wav_answer_is_read_from_its_header() -> None:
    samples = np.arange(100, dtype=np.int16)
    raw = wav_header(22_050, 100) + samples.tobytes()
    reader = PcmReader()
    got = np.concatenate([reader.feed(raw[i:i + 5]) for i in range(0, len(raw), 5)])
    assert np.array_equal(got, samples) and reader.rate_hz == 22_050
    with pytest.raises(TtsServerError, match="2 channels"):
        PcmReader().feed(wav_header(16_000, 10, channels=2) + bytes(40))


async def test_a_clause_comes_back_as_the_bundled_voice_at_its_rate(
        speech_server: SpeechServer) -> None:
    local = load_tts()
    voice = ServerVoice(speech_server.base_url, local)
    voice.check()
    pieces = [piece async for piece in voice.stream("Paris is the capital of France.")]
    await voice.aclose()
    rates = {rate for _, rate in pieces}
    audio = np.concatenate([samples for samples, _ in pieces])
    assert rates == {22_050}  # the server's X-Sample-Rate (the voice's), not OpenAI's 24 kHz
    seconds = len(audio) / 22_050
    local_s = sum(len(a) / r for a, r in local.synthesize("Paris is the capital of France."))
    assert 0.6 * local_s < seconds < 1.6 * local_s  # the same sentence, the same voice
    assert np.abs(audio.astype(np.int32)).max() > 3000  # sound, not silence
    assert voice.outage.number == 0


def test_startup_errors_name_the_flag() -> None:
    with pytest.raises(TtsServerError, match=r"--tts-url http://127\.0\.0\.1:\d+/v1: "):
        ServerVoice(f"http://127.0.0.1:{_free_port()}/v1", load_tts("espeak")).check()


async def test_a_server_that_stops_is_an_outage(tmp_path: Path) -> None:
    with piper_speech_server(folder=tmp_path) as running:
        voice = ServerVoice(running.base_url, load_tts("espeak"))
        voice.check()  # its voice loaded (as at the product's startup)
        assert [p async for p in voice.stream("Hello.")]
        running.stop()
        with pytest.raises(TtsServerError):
            _ = [p async for p in voice.stream("Hello again.")]
        await voice.aclose()
    assert voice.outage.down and voice.outage.number == 1


async def test_closing_a_stream_after_its_first_piece_ends_the_request(
        speech_server: SpeechServer) -> None:
    """What a barge-in does (the Talker closes its pieces): the response is left after the
    first piece, not read to its end, and the next clause is asked for afresh."""
    from contextlib import aclosing

    voice = ServerVoice(speech_server.base_url, load_tts("espeak"))
    long_text = "This is a long sentence that the caller will interrupt. " * 8
    async with aclosing(voice.stream(long_text)) as pieces:
        async for samples, _ in pieces:
            assert len(samples)
            break
    assert voice.spoken == 0 and not voice.outage.down  # left early, not failed
    assert [p async for p in voice.stream("Yes?")] and voice.spoken == 1
    await voice.aclose()
