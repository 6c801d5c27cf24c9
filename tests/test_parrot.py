"""examples/parrot.py: a plug-in engine that gets its turn-taking from the conversation layer
(listener, the reply's life) and nothing else, over a real aiortc call."""

from __future__ import annotations

import asyncio

import numpy as np

from examples.parrot import SPEED, ParrotEngine, ParrotSession, parrot_voice
from omnicall.app.config import ServerConfig
from omnicall.engine.base import SessionOptions
from omnicall.engine.conversation.settings import TurnSettings
from omnicall.engine.events import EngineEvent, TurnEvent
from omnicall.media.aligner import MediaUnit
from tests.barge_in import barge_in
from tests.utils import feed_units, piper_speech, running_server, tone, wait_for

UNIT = 1280  # 80 ms at 16 kHz


def test_the_parrot_voice_is_the_turn_played_faster() -> None:
    turn = tone(200, 2.0)
    voice = parrot_voice(turn)
    assert abs(len(voice) - len(turn) / SPEED) <= 1
    spectrum = np.abs(np.fft.rfft(voice.astype(np.float64)))
    peak_hz = np.argmax(spectrum) * 16_000 / len(voice)
    assert abs(peak_hz - 200 * SPEED) < 5  # higher by the same factor
    assert len(parrot_voice(np.zeros(0, np.int16))) == 0


async def test_a_plug_in_engine_takes_turns_and_barge_ins_like_the_built_in_ones() -> None:
    engine = ParrotEngine(TurnSettings(turn_model="fixed"))
    config = ServerConfig(engine="loopback", ice_loopback=True, resume_window_s=0)
    async with running_server(config, engine=engine) as (url, app):
        cut = await barge_in(url, app, after_s=1.2)
    # the parrot repeated the question (~3.5 s at 1.25x) and was stopped 1.2 s into it,
    # keeping what the client had received of it
    assert cut.received_ms is not None and cut.reply_ms > 2500, cut
    assert 1000 < cut.heard_ms < cut.reply_ms - 500, cut
    assert cut.error_ms <= 40, cut


async def test_a_loss_burst_marked_filled_does_not_end_the_turn_and_real_silence_does() -> None:
    """The engine end to end (its listener on the real VAD): 480 ms in the middle of a
    sentence arrive as silence. Marked as filled (ingest's fill over a loss burst), the
    parrot hears one turn and answers once; as real silence of the same length, the pause
    ends the turn and the rest of the sentence is another."""
    speech = piper_speech("Could you please tell me what the weather will be like in Paris "
                          "tomorrow afternoon", lead_s=0.4, tail_s=1.0)
    units = [speech[i:i + UNIT] for i in range(0, len(speech) - UNIT + 1, UNIT)]
    units += [np.zeros(UNIT, np.int16)] * 5  # the last unit may still be in the VAD at the end
    burst = range(14, 20)  # 1.12-1.6 s: inside the sentence
    assert all(np.abs(units[k]).max() > 1000 for k in (burst.start - 1, burst.stop))

    async def turns(mark: bool) -> tuple[int, int]:
        """(turns the parrot heard end, replies it started)"""
        # no echo warm-up: a reply starts at once here (no playout), and the rest of the
        # sentence would otherwise be taken for its echo
        engine = ParrotEngine(TurnSettings(turn_model="fixed", hangover_ms=400,
                                           echo_warmup_ms=0))
        await engine.start()
        session = engine.open_session("burst", SessionOptions())
        replies: list[EngineEvent] = []

        async def read() -> None:
            async for event in session.events():
                if isinstance(event, TurnEvent) and event.role == "assistant" \
                        and event.phase == "start":
                    replies.append(event)

        reader = asyncio.create_task(read())
        try:
            for k, audio in enumerate(units):
                lost = k in burst
                unit = MediaUnit(k, np.zeros(UNIT, np.int16) if lost else audio,
                                 filled=UNIT if lost and mark else 0)
                # pushed once there is room (back-pressure while the VAD catches up)
                await wait_for(lambda u=unit: session.push(u), timeout_s=30, interval_s=0.01)
            await wait_for(lambda: session.state.inputs.empty(), timeout_s=30)
            assert isinstance(session, ParrotSession)
            ended = session.state.turn_id
            await wait_for(lambda: len(replies) >= ended, timeout_s=10)
        finally:
            await session.close()
            await reader
            await engine.close()
        return ended, len(replies)

    assert await turns(mark=True) == (1, 1)
    assert await turns(mark=False) == (2, 2)


async def test_a_reply_ends_once_played_out_and_the_next_turn_is_not_a_barge_in() -> None:
    """The reply is current until its audio has played out (the end says so then); speech
    after that is a new turn, not a barge-in on the finished reply (no second, interrupted
    end for it)."""
    engine = ParrotEngine(TurnSettings(turn_model="fixed"))
    await engine.start()
    session = engine.open_session("twice", SessionOptions())
    turns: list[TurnEvent] = []

    async def read() -> None:
        async for event in session.events():
            if isinstance(event, TurnEvent):
                turns.append(event)

    reader = asyncio.create_task(read())
    question = piper_speech("Hello there, parrot.", lead_s=0.3, tail_s=1.0)
    try:
        index = await feed_units(session, question)
        await wait_for(lambda: any(t.phase == "end" for t in turns), timeout_s=20)
        assert isinstance(session, ParrotSession) and session.replies.live() is None
        await feed_units(session, question, start_index=index)
        await wait_for(lambda: sum(t.phase == "end" for t in turns) == 2, timeout_s=20)
    finally:
        await session.close()
        await reader
        await engine.close()
    assert [(t.phase, t.turn_id, t.interrupted) for t in turns] == [
        ("start", 1, False), ("end", 1, False), ("start", 2, False), ("end", 2, False)]
