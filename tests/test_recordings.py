"""--record: a real call's two sides and transcript kept on the call's clock, the page told,
old recordings deleted, nothing recorded by default."""

from __future__ import annotations

import asyncio
import json
import os
import time
import wave
from pathlib import Path

import numpy as np

from omnicall.app.config import ServerConfig
from omnicall.app.storage.recordings import delete_old
from omnicall.client import Microphone, connect
from tests.utils import piper_speech, running_server, tone


async def ask(url: str, question: str) -> list[dict[str, object]]:
    """One spoken question, answered; returns the server's messages."""
    mic = Microphone()
    call = await connect(url, mic)
    try:
        await call.wait_for(lambda m: m["type"] == "state", timeout_s=10)
        mic.say(piper_speech(question), 16_000)
        await call.wait_for(lambda m: m["type"] == "turn" and m["role"] == "assistant"
                            and m["phase"] == "end", timeout_s=60)
        await asyncio.sleep(1.5)  # a stats tick writes what came
    finally:
        await call.hang_up()
    return call.messages


async def test_a_recorded_call_keeps_both_sides_and_its_transcript(tmp_path: Path) -> None:
    folder = tmp_path / "recordings"
    config = ServerConfig(engine="cascade", ice_loopback=True, record=str(folder))
    async with running_server(config) as (url, _app):
        messages = await ask(url, "What is the capital of France?")
        for _ in range(100):  # the call's close writes the rest
            if list(folder.glob("*.jsonl")) and '"end"' in next(
                    folder.glob("*.jsonl")).read_text():
                break
            await asyncio.sleep(0.05)
    state = next(m for m in messages if m["type"] == "state")
    assert state["recording"] is True  # the page is told (and shows it)
    (wav_path,) = folder.glob("*.wav")
    (jsonl,) = folder.glob("*.jsonl")
    assert wav_path.stem == jsonl.stem
    with wave.open(str(wav_path)) as wav:
        assert (wav.getnchannels(), wav.getframerate()) == (2, 16_000)
        audio = np.frombuffer(wav.readframes(wav.getnframes()), np.int16).reshape(-1, 2)
    caller = np.nonzero(np.abs(audio[:, 0]) > 2000)[0] / 16_000
    assistant = np.nonzero(np.abs(audio[:, 1]) > 2000)[0] / 16_000
    assert len(caller) and len(assistant)
    assert caller[-1] < assistant[0] < caller[-1] + 3.0  # the answer after the question
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert records[0]["type"] == "call" and records[-1]["event"] == "end"
    user = next(r for r in records if r["type"] == "turn" and r["role"] == "user")
    reply = next(r for r in records if r["type"] == "turn" and r["role"] == "assistant")
    assert "france" in user["text"].lower() and reply["text"] and reply["timings_ms"]
    # the transcript's clock is the recording's: the question is heard after it ended
    # there, the reply's record comes after its sound began
    assert caller[-1] < user["call_s"] < assistant[0] + 1.0
    assert reply["call_s"] > assistant[0]
    for path in (wav_path, jsonl):
        assert oct(os.stat(path).st_mode & 0o777) == "0o600"


async def test_nothing_is_recorded_by_default() -> None:
    async with running_server() as (url, _app):
        call = await connect(url, Microphone(tone(440, 0.5, rate=48_000)))
        state = await call.wait_for(lambda m: m["type"] == "state", timeout_s=10)
        await call.hang_up()
    assert state["recording"] is False


def test_old_recordings_are_deleted(tmp_path: Path) -> None:
    now = time.time()
    for name, age_h in (("old.wav", 80), ("old.jsonl", 80), ("new.wav", 1),
                        ("new.jsonl", 1), ("notes.txt", 500)):
        path = tmp_path / name
        path.write_bytes(b"x")
        os.utime(path, (now - age_h * 3600, now - age_h * 3600))
    assert delete_old(tmp_path, keep_s=72 * 3600, now=now) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.jsonl", "new.wav", "notes.txt"]
