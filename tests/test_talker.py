"""The Talker with ``--tts-url``: replies spoken clause by clause by a real speech server
(local-tts-studio on the bundled Piper voice, started here), and by the local voice - said
once to the page - while the server is down."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from omnicall.engine.base import SessionOptions
from omnicall.engine.cascade.engine import CascadeEngine
from omnicall.engine.cascade.servers.tts_server import ServerVoice
from omnicall.engine.cascade.session import CascadeSession
from omnicall.engine.cascade.talker import FALLBACK_NOTICE
from omnicall.engine.events import AssistantAudio, AssistantText, EngineError
from tests.cascade_fixtures import Recorder, assistant_ends, loaded_cascade, open_session
from tests.speech_servers import SpeechServer, piper_speech_server


@pytest.fixture(scope="module")
def speech_server() -> Iterator[SpeechServer]:
    with piper_speech_server() as server:
        yield server


@pytest.fixture(scope="module")
def voiced_engine(speech_server: SpeechServer) -> Iterator[CascadeEngine]:
    """The cascade with --tts-url (its startup check: the server said a word)."""
    with loaded_cascade(tts_url=speech_server.base_url) as engine:
        yield engine


def spoken_s(rec: Recorder) -> float:
    return sum(len(a.samples) for a in rec.of(AssistantAudio)) / 24_000


async def test_the_reply_is_spoken_by_the_server_clause_by_clause(
        voiced_engine: CascadeEngine) -> None:
    voice = voiced_engine.tts
    assert isinstance(voice, ServerVoice)
    before = voice.spoken
    session, rec = open_session(voiced_engine)
    session.send_text("What is the capital of France?")
    await rec.wait(lambda r: assistant_ends(r), timeout_s=60)
    text = "".join(e.delta for e in rec.of(AssistantText))
    assert text.strip() and spoken_s(rec) > 0.5
    audio = np.concatenate([a.samples for a in rec.of(AssistantAudio)])
    assert np.sqrt(np.mean(audio.astype(float) ** 2)) > 300  # speech, resampled to 24 kHz
    assert voice.spoken - before >= 1 and voice.outage.number == 0
    assert not rec.of(EngineError)
    await rec.close()


async def test_while_the_server_is_down_the_local_voice_speaks_and_the_page_is_told_once(
        voiced_engine: CascadeEngine, tmp_path: Path) -> None:
    local = voiced_engine.tts.local  # type: ignore[attr-defined]
    with piper_speech_server(folder=tmp_path) as running:
        voice = ServerVoice(running.base_url, local)
        running.stop()
    runtime = replace(voiced_engine.runtime, voice=lambda: voice)
    session = CascadeSession("down", SessionOptions(), runtime)
    rec = Recorder(session)
    for n, question in enumerate(("What is the capital of France?", "Tell me a joke."), 1):
        session.send_text(question)
        await rec.wait(lambda r, n=n: len(assistant_ends(r)) >= n, timeout_s=60)
    assert spoken_s(rec) > 1.0  # both replies were heard, in the local voice
    assert [e.message for e in rec.of(EngineError)] == [FALLBACK_NOTICE]
    assert voice.outage.failures == 1 and voice.spoken == 0  # asked once, then left alone
    await rec.close()
    await voice.aclose()
