"""``--asr-url``: the turn's words from real OpenAI-compatible transcription servers started
here - faster-whisper-server on the bundled Whisper tiny.en, and ``transformers serve`` on a
tiny Whisper checkpoint built here."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from omnicall.engine.cascade.camera.pictures import wav_bytes
from omnicall.engine.cascade.servers.asr_server import AsrServer, AsrServerError, language_code
from tests.cascade_fixtures import words
from tests.llm_servers import ServedModel, _free_port
from tests.speech_servers import (
    SpeechServer,
    faster_whisper_server,
    tiny_whisper_serve,
    transcription_request,
)
from tests.utils import piper_speech

QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def whisper_server() -> Iterator[SpeechServer]:
    with faster_whisper_server() as server:
        yield server


@pytest.fixture(scope="module")
def tiny_whisper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    with tiny_whisper_serve(tmp_path_factory.mktemp("tiny-whisper")) as served:
        yield served


def test_the_turns_words_come_from_faster_whisper_server_on_the_bundled_model(
        whisper_server: SpeechServer) -> None:
    server = AsrServer(whisper_server.base_url, language="en")
    server.check()  # the startup check: one transcription (the server loads its model)
    text, language = asyncio.run(server.transcribe(piper_speech(QUESTION)))
    assert {"capital", "france"} <= set(words(text))
    assert language == ""  # plain json says no language: the turn keeps --language's
    assert server.outage.number == 0


def test_language_auto_asks_for_the_detected_language(whisper_server: SpeechServer) -> None:
    server = AsrServer(whisper_server.base_url, language="auto")
    text, language = asyncio.run(server.transcribe(piper_speech(QUESTION)))
    assert language == "en" and server.verbose  # verbose_json answered, its language read
    assert "france" in words(text)


def test_transformers_serve_gives_the_words_it_gives_any_client(
        tiny_whisper: ServedModel) -> None:
    """The tiny Whisper's words are nonsense, but the same for the same audio: the client
    uploads the turn as the server's own multipart form does, and passes --language on
    (transformers serve says in its log it ignores it)."""
    speech = piper_speech(QUESTION)
    direct = transcription_request(tiny_whisper.base_url, wav_bytes(speech), tiny_whisper.model)
    server = AsrServer(tiny_whisper.base_url, tiny_whisper.model, language="en")
    server.check()
    text, _ = asyncio.run(server.transcribe(speech))
    assert text and text == direct["text"].strip()
    assert "language" in tiny_whisper.log_tail(400)  # it got the field (and ignores it)


def test_a_server_that_ignores_verbose_json_still_answers(tiny_whisper: ServedModel) -> None:
    server = AsrServer(tiny_whisper.base_url, tiny_whisper.model, language="auto")
    text, language = asyncio.run(server.transcribe(piper_speech(QUESTION)))
    assert text and language == ""  # no language in its answer: unknown, not an error


def test_startup_errors_name_the_flag() -> None:
    with pytest.raises(AsrServerError, match=r"--asr-url http://127\.0\.0\.1:\d+/v1: "):
        AsrServer(f"http://127.0.0.1:{_free_port()}/v1").check()


async def test_a_server_that_stops_answering_is_an_outage_noted_once(tmp_path: Path) -> None:
    with faster_whisper_server(folder=tmp_path) as running:
        server = AsrServer(running.base_url, timeout_s=10.0)
        speech = piper_speech("Hello there.")
        assert (await server.transcribe(speech))[0]
        running.stop()
        for _ in range(2):
            with pytest.raises(AsrServerError):
                await server.transcribe(speech)
        await server.aclose()
    assert server.outage.down and server.outage.number == 1 and server.outage.failures == 2


def test_silence_is_no_words() -> None:
    """What Whisper makes of noise ('Thank you.') is dropped for a server's answer too."""
    from omnicall.engine.cascade.asr import clean_transcript

    assert clean_transcript("Thank you.") == "" and clean_transcript("Thank you, Anna.")
    assert language_code("english") == "en" and language_code("de") == "de"
    assert language_code("klingon") == ""
