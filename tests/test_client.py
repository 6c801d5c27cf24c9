"""omnicall.client: the Python client on aiortc against real servers, and `omnicall call`."""

from __future__ import annotations

import asyncio
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from omnicall.app.config import ServerConfig
from omnicall.client import (
    FRAME_SAMPLES,
    Call,
    Captions,
    Microphone,
    OfferRefused,
    connect,
    read_wav,
    write_wav,
)
from tests.utils import piper_speech, running_server, tone


class FakeTime:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


async def test_the_microphone_paces_speech_and_notes_its_end() -> None:
    clock = FakeTime(100.0)
    mic = Microphone(loud=800, clock=clock.now)
    speech = np.concatenate([tone(300, 0.05, rate=48_000), np.zeros(2400, np.int16)])
    mic.say(speech)
    assert mic.speaking
    frames = [await mic.recv() for _ in range(2)]  # the first waits for nothing
    assert [f.pts for f in frames] == [0, FRAME_SAMPLES]
    assert frames[0].sample_rate == 48_000 and len(frames[0].layout.channels) == 2
    assert mic.speech_end_at is None  # the loud part ends in the third frame
    clock.t += 0.04
    await mic.recv()
    loud_end = int(np.nonzero(np.abs(speech) > 800)[0][-1])
    assert mic.speech_end_at == pytest.approx(100.04 + (loud_end - 2 * FRAME_SAMPLES) / 48_000)
    mic.say(tone(300, 0.02, rate=16_000), rate_hz=16_000)  # resampled to the wire's rate
    added = len(mic._queue) - (len(speech) - 3 * FRAME_SAMPLES)  # beside what is left
    assert 960 <= added <= 960 + 96  # 20 ms at 48 kHz (and the resampler's tail)
    mic.stop()


def test_what_a_call_keeps_is_bounded() -> None:
    call = Call(pc=None, keep_audio_s=1.0, keep_messages=10)  # type: ignore[arg-type]
    for n in range(200):
        call._audio(np.full(FRAME_SAMPLES, n, np.int16))
        call._message(f'{{"type": "stats", "n": {n}}}')
    assert len(call.received) <= 50 * 5 // 4 and call.received[-1][0] == 199
    assert len(call.received) + call.dropped_frames == 200
    assert len(call.messages) <= 12 and call.messages[-1]["n"] == 199
    assert len(call.messages) + call.dropped_messages == 200
    call._message("not json")
    call._message('["not", "an", "object"]')
    assert call.messages[-1]["n"] == 199


async def test_a_call_speaks_hears_and_talks_over_the_data_channel() -> None:
    """The loopback engine says back what it hears: what the client said comes back."""
    async with running_server() as (url, _app):
        mic = Microphone()
        call = await connect(url, mic, mode="call")
        try:
            state = await call.wait_for(lambda m: m["type"] == "state", timeout_s=10)
            assert state["session"] == call.session_id and not call.resumed
            mic.say(tone(440, 1.5, rate=48_000))
            call.send({"type": "ping", "t": 7.5})
            pong = await call.wait_for(lambda m: m["type"] == "pong", timeout_s=10)
            assert pong["t"] == 7.5
            for _ in range(200):
                if np.abs(call.received_audio()).max(initial=0) > 3000:
                    break
                await asyncio.sleep(0.05)
            heard = call.received_audio()
            assert np.abs(heard).max() > 3000  # the tone came back
        finally:
            await call.hang_up()
        assert call.pc.connectionState == "closed"


async def test_a_refused_offer_raises_with_the_servers_reason() -> None:
    config = ServerConfig(engine="loopback", ice_loopback=True, token="s3cret")
    async with running_server(config) as (url, _app):
        with pytest.raises(OfferRefused) as refused:
            await connect(url, Microphone(), token="wrong")
        assert refused.value.status == 401 and "token" in refused.value.message
        call = await connect(url, Microphone(), token="s3cret")  # the right one is let in
        await call.hang_up()
    with pytest.raises(ValueError, match="mode"):
        await connect(url, Microphone(), mode="tv")


def test_captions_read_as_a_person_reads_them() -> None:
    lines: list[str] = []
    captions = Captions(lines.append)
    for message in ({"type": "transcript", "text": "hi", "final": False},
                    {"type": "transcript", "text": "Hi there.", "final": True},
                    {"type": "assistant_text", "delta": "Hello"},
                    {"type": "assistant_text", "delta": "!"},
                    {"type": "turn", "role": "assistant", "phase": "end", "interrupted": True},
                    {"type": "error", "message": "busy"}):
        captions(message)
    assert "".join(lines) == "you: Hi there.\nassistant: Hello! [interrupted]\n[error] busy\n"


def test_wav_files_round_trip(tmp_path: Path) -> None:
    samples = tone(300, 0.1, rate=16_000)
    write_wav(tmp_path / "a.wav", samples, 16_000)
    back, rate = read_wav(tmp_path / "a.wav")
    assert rate == 16_000 and np.array_equal(back, samples)
    with wave.open(str(tmp_path / "b.wav"), "wb") as wav:
        wav.setnchannels(2)
        wav.setsampwidth(2)
        wav.setframerate(8_000)
        wav.writeframes(np.repeat(samples, 2).tobytes())
    mono, rate = read_wav(tmp_path / "b.wav")
    assert rate == 8_000 and np.array_equal(mono, samples)


async def test_omnicall_call_prints_the_captions_and_saves_the_reply(tmp_path: Path) -> None:
    """The command a user runs, against the real default engine."""
    question = tmp_path / "question.wav"
    write_wav(question, piper_speech("What is the capital of France?"), 16_000)
    reply = tmp_path / "reply.wav"
    config = ServerConfig(engine="cascade", ice_loopback=True, port=0)
    async with running_server(config) as (url, _app):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "omnicall", "call", url, "--wav", str(question),
            "--out", str(reply), "--timeout-s", "60",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 120)
    text = out.decode()
    assert process.returncode == 0, (text, err.decode()[-2000:])
    assert "you: " in text and "france" in text.lower()
    assert "assistant: " in text
    said = text.split("assistant: ", 1)[1].strip()
    assert said
    audio, rate = read_wav(reply)
    assert rate == 48_000 and len(audio) > 48_000 * 0.5
    assert np.abs(audio).max() > 2000  # the reply's voice, not silence
    assert f"reply saved to {reply}" in err.decode()
