"""A call's final transcripts with ``--asr-url``: from a real transcription server
(faster-whisper-server on the bundled tiny.en, started here), the speculative reply at the
pause and its cancellation as with the local model, and the local model standing in - said
once - while the server is down or hangs."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from omnicall.engine.cascade.engine import CascadeEngine
from omnicall.engine.cascade.hearing import FALLBACK_NOTICE, Hearing
from omnicall.engine.cascade.servers.asr_server import AsrServer
from omnicall.engine.events import EngineError, UserTranscript
from omnicall.engine.tasks import TaskOwner
from tests.cascade_fixtures import assistant_ends, loaded_cascade, open_session, words
from tests.speech_servers import SpeechServer, faster_whisper_server
from tests.utils import feed_units, piper_speech

QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def whisper_server() -> Iterator[SpeechServer]:
    with faster_whisper_server() as server:
        yield server


@pytest.fixture(scope="module")
def served_engine(whisper_server: SpeechServer) -> Iterator[CascadeEngine]:
    """The cascade with --asr-url (its startup check: the server answered a transcription)."""
    with loaded_cascade(asr_url=whisper_server.base_url) as engine:
        yield engine


async def test_the_server_hears_the_turn_and_the_speculative_reply_is_cancelled_as_before(
        served_engine: CascadeEngine) -> None:
    session, rec = open_session(served_engine)
    first = piper_speech("I would like", tail_s=0.25)
    second = piper_speech("a cup of hot coffee please.", lead_s=0)
    await feed_units(session, np.concatenate([first, second]))
    await rec.wait(lambda r: assistant_ends(r), timeout_s=60)
    assert session.replies.speculations["cancelled"] >= 1  # the pause's reply, dropped
    finals = [t for t in rec.of(UserTranscript) if t.final]
    assert len(finals) == 1 and "coffee" in words(finals[0].text)
    hearing = session.answer.hearing
    assert hearing.by_server >= 1 and hearing.by_fallback == 0
    assert not rec.of(EngineError)
    await rec.close()


async def test_while_the_server_is_down_the_local_model_hears_and_each_page_is_told_once(
        served_engine: CascadeEngine, tmp_path: Path) -> None:
    speech = piper_speech(QUESTION)
    with faster_whisper_server(folder=tmp_path) as running:
        server = AsrServer(running.base_url, language="en")
        server.check()  # its model loaded (as at the product's startup), not on the turn
        runtime = replace(served_engine.runtime, asr_server=server)
        hearing = Hearing(runtime, "down", TaskOwner("down"))
        up = await hearing.final(speech)
        assert up.model == server.name and not up.notice and "france" in words(up.text)
        running.stop()
        down = await hearing.final(speech)
        assert down.model != server.name and down.notice == FALLBACK_NOTICE
        assert "france" in words(down.text)  # the local model heard the same turn
        again = await hearing.final(speech)
        assert not again.notice  # said once
        assert server.outage.failures == 1  # while down, the server is not asked each turn
        other = await Hearing(runtime, "other call", TaskOwner("other call")).final(speech)
        assert other.notice == FALLBACK_NOTICE  # another call's page is told too
        await server.aclose()


async def test_a_server_that_hangs_is_timed_out_into_the_local_model(
        served_engine: CascadeEngine, tmp_path: Path) -> None:
    speech = piper_speech(QUESTION)
    with faster_whisper_server(folder=tmp_path) as running:
        AsrServer(running.base_url).check()  # it answers (and has loaded its model)
        server = AsrServer(running.base_url, language="en", timeout_s=0.5)
        hearing = Hearing(replace(served_engine.runtime, asr_server=server), "hang",
                          TaskOwner("hang"))
        os.kill(running.proc.pid, signal.SIGSTOP)  # accepts (the kernel does), answers never
        try:
            heard = await hearing.final(speech)
        finally:
            os.kill(running.proc.pid, signal.SIGCONT)
        assert heard.notice == FALLBACK_NOTICE and "france" in words(heard.text)
        assert server.outage.down
        await server.aclose()


async def test_a_session_with_the_server_down_goes_on_and_says_so_once(
        served_engine: CascadeEngine, tmp_path: Path) -> None:
    with faster_whisper_server(folder=tmp_path) as running:
        server = AsrServer(running.base_url, language="en")
        running.stop()
    engine_runtime = served_engine.runtime
    served_engine._runtime = replace(engine_runtime, asr_server=server)
    try:
        session, rec = open_session(served_engine)
        for n, question in enumerate((QUESTION, "What is two plus two?"), start=1):
            await feed_units(session, piper_speech(question, tail_s=1.5))
            await rec.wait(lambda r, n=n: len(assistant_ends(r)) >= n, timeout_s=60)
        finals = [t.text for t in rec.of(UserTranscript) if t.final]
        assert "capital" in words(finals[0]) and "plus" in words(finals[1])
        notices = [e.message for e in rec.of(EngineError)]
        assert notices == [FALLBACK_NOTICE]
        await rec.close()
    finally:
        served_engine._runtime = engine_runtime
        await server.aclose()


async def test_the_server_hears_the_sound_over_a_reply_with_its_scores(
        served_engine: CascadeEngine, tmp_path: Path) -> None:
    """Interruptions by meaning go by the server's words too (verbose_json: the segments'
    mean token log-probability), and by the local partial model's while it is down."""
    okay = piper_speech("Okay.", lead_s=0.1, tail_s=0.2)
    with faster_whisper_server(folder=tmp_path) as running:
        server = AsrServer(running.base_url, language="en")
        server.check()  # its model loaded (as at the product's startup), not on the turn
        hearing = Hearing(replace(served_engine.runtime, asr_server=server), "words",
                          TaskOwner("words"))
        heard = await hearing.words(okay)
        assert heard is not None and words(heard.text) == ["okay"]
        assert heard.logprob < 0.0 and server.scores  # a score came with the words
        running.stop()
        local = await hearing.words(okay)
        assert local is not None and words(local.text) == ["okay"]
        assert server.outage.down and server.outage.failures == 1
        await server.aclose()


async def test_a_transcript_started_at_a_lull_is_taken_once_by_a_pause_of_its_turn() -> None:
    """(The local model, stood in for.) A pause of another turn takes none and drops it;
    a pause of its own takes it once."""
    from omnicall.media.clock import ManualClock
    from tests.cascade_fixtures import FakeAsr, close_runtime, fake_runtime

    runtime = fake_runtime(ManualClock(), asr=FakeAsr("hello there"))
    tasks = TaskOwner("early")
    hearing = Hearing(runtime, "early", tasks)
    try:
        hearing.start_early(np.zeros(1600, np.int16), turn_id=1)
        assert hearing.take_early(2) is None
        hearing.start_early(np.zeros(1600, np.int16), turn_id=2)
        early = hearing.take_early(2)
        assert early is not None and (await early).text == "hello there"
        assert hearing.take_early(2) is None
        assert (hearing.early_taken, hearing.early_dropped) == (1, 1)
    finally:
        await tasks.close()
        close_runtime(runtime)


async def test_an_outage_told_by_a_dropped_early_transcript_is_told_by_the_next() -> None:
    """The transcript that first met a failed server carries the page's notice: dropped (the
    speech went on past its lull), the notice goes with the next one."""
    import asyncio

    from omnicall.engine.cascade.servers.asr_server import AsrServerError
    from omnicall.engine.cascade.servers.outage import Outage
    from omnicall.media.clock import ManualClock
    from tests.cascade_fixtures import FakeAsr, close_runtime, fake_runtime

    class RefusingServer:
        name = "refusing"

        def __init__(self) -> None:
            self.outage = Outage("ASR server")

        async def transcribe(self, samples: np.ndarray) -> tuple[str, str]:
            self.outage.failed(0.0, "refused")
            raise AsrServerError("refused")

    runtime = fake_runtime(ManualClock(), asr=FakeAsr("hello there"))
    tasks = TaskOwner("notice")
    hearing = Hearing(replace(runtime, asr_server=RefusingServer()),  # type: ignore[arg-type]
                      "notice", tasks)
    try:
        hearing.start_early(np.zeros(1600, np.int16), turn_id=1)
        first = hearing._early.task if hearing._early is not None else None
        assert first is not None
        await asyncio.wait([first])
        assert first.result().notice == FALLBACK_NOTICE
        hearing.start_early(np.zeros(1600, np.int16), turn_id=1)  # the speech went on
        early = hearing.take_early(1)
        assert early is not None
        heard = await early
        assert heard.notice == FALLBACK_NOTICE and heard.text == "hello there"
    finally:
        await tasks.close()
        close_runtime(runtime)
