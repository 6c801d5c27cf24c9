"""The native engine behind the server: a real aiortc call to `--engine qwen-omni` (tiny
random model: the words are gibberish, the plumbing is real), plus session-level checks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from omnicall.app.config import ConfigError, ServerConfig
from omnicall.app.engine_settings import omni_settings
from omnicall.client import Microphone, connect
from omnicall.engine.base import SessionOptions
from omnicall.engine.conversation.settings import TurnSettings
from omnicall.engine.errors import EngineLoadError
from omnicall.engine.events import AssistantAudio, AssistantText, StageTiming, TurnEvent
from omnicall.engine.qwen_omni.engine import QwenOmniEngine
from omnicall.engine.qwen_omni.model import OmniModel
from omnicall.engine.qwen_omni.prompt import heard_tokens
from omnicall.engine.qwen_omni.settings import OmniSettings
from omnicall.engine.registry import create_engine
from omnicall.media.clock import MonotonicClock
from omnicall.media.playout import FrameTag, PlayoutMeter
from tests.cascade_fixtures import Recorder
from tests.utils import (
    PAUSED_QUESTION,
    ColorVideoTrack,
    feed_units,
    piper_speech,
    running_server,
    settled,
    splice_pause,
    wait_for,
)

SETTINGS = {"max_new_tokens": 12, "max_frames": 12, "captions": False}


@pytest.fixture(scope="module")
def omni_engine(omni_dir: Path) -> Iterator[QwenOmniEngine]:
    engine = QwenOmniEngine(OmniSettings(model=str(omni_dir), **SETTINGS))  # type: ignore[arg-type]
    engine._load()  # the same path start() runs on its worker
    yield engine
    for worker in (engine.worker, engine.captions_worker):
        worker.close()
    engine.listening.close()


def reply_kept(ids: list[int], m: OmniModel) -> list[int]:
    """The tokens of the last assistant message in ``ids`` (prefix and close left out)."""
    start = max(i for i, t in enumerate(ids) if t == m.assistant_id) + 1 + len(m.encode("\n"))
    return ids[start:ids.index(m.im_end_id, start)]


def cut_ends(recorder: Recorder) -> list[TurnEvent]:
    return [e for e in recorder.of(TurnEvent) if e.role == "assistant" and e.interrupted]


def test_engine_needs_a_model_path() -> None:
    with pytest.raises(EngineLoadError, match="--model"):
        create_engine("qwen-omni")
    with pytest.raises(ConfigError, match="--model"):
        ServerConfig(engine="qwen-omni").validate()


async def test_spoken_turn_gets_streamed_text_and_audio(omni_engine: QwenOmniEngine) -> None:
    session = omni_engine.open_session("s1", SessionOptions())
    recorder = Recorder(session)
    speech = piper_speech("What can you see on my desk?")
    await feed_units(session, speech)
    await feed_units(session, np.zeros(16_000 * 2, np.int16), start_index=len(speech) // 1280)
    await wait_for(lambda: any(e.role == "assistant" and e.phase == "end"
                               for e in recorder.of(TurnEvent)), timeout_s=60)
    audio = recorder.of(AssistantAudio)
    assert recorder.of(AssistantText) and audio
    assert all(a.rate_hz == 24_000 for a in audio)
    stages = {e.stage for e in recorder.of(StageTiming)}
    assert {"end_of_turn", "llm_first_token", "talker_first_frame", "code2wav_first_chunk",
            "first_audio_out"} <= stages
    samples = np.concatenate([a.samples for a in audio])
    assert np.abs(samples.astype(np.int32)).max() > 0
    # the reply is closed in the Thinker: the cache and the records agree
    state = session.thinker  # type: ignore[attr-defined]
    await settled(session, timeout_s=10)
    assert state.ids[-2:] == [omni_engine.model.im_end_id, *omni_engine.model.encode("\n")]
    assert state.cache_length() == state.length
    await session.close()


async def test_barge_in_stops_the_reply(omni_dir: Path) -> None:
    engine = QwenOmniEngine(OmniSettings(model=str(omni_dir), max_new_tokens=200, max_frames=400,
                                         turns=TurnSettings(echo_warmup_ms=0), captions=False))
    engine._load()
    session = engine.open_session("s2", SessionOptions())
    try:
        recorder = Recorder(session)
        speech = piper_speech("Tell me a long story.")
        index = await feed_units(session, speech)
        await wait_for(lambda: recorder.of(AssistantAudio), timeout_s=60)
        cut = session.replies.current  # type: ignore[attr-defined]
        await asyncio.sleep(0.3)
        # the user talks over the reply (and keeps the turn open: no trailing silence)
        await feed_units(session, piper_speech("Stop, please stop.", lead_s=0.0, tail_s=0.0),
                         start_index=index)
        await wait_for(lambda: cut_ends(recorder), timeout_s=20)
        state = session.thinker  # type: ignore[attr-defined]
        await settled(session, timeout_s=20)
        assert state.cache_length() == state.length
        # the interrupted reply is closed, and the new user turn is open after it
        last_user = max(i for i, t in enumerate(state.ids) if t == engine.model.user_id)
        assert state.ids[last_user - 3] == engine.model.im_end_id
        assert session.replies.barge_ins == 1  # type: ignore[attr-defined]
        # its end says what the caller heard: what the Thinker kept of it
        [end] = cut_ends(recorder)
        assert end.turn_id == cut.turn_id
        assert end.heard_ms is not None and end.heard_ms == cut.heard_ms > 0
        kept = reply_kept(state.ids[:last_user], engine.model)
        assert len(kept) == heard_tokens(cut.work.frames_at, end.heard_ms, 10**6)
    finally:
        await session.close()
        await engine.close()


async def test_an_interrupted_reply_keeps_and_reports_what_the_caller_heard(
        omni_dir: Path) -> None:
    """interrupt() with the media plane's measure: 0.5 s of the reply left for the caller, so
    the end says 500 ms and the Thinker keeps the tokens voiced in them, no more."""
    engine = QwenOmniEngine(OmniSettings(model=str(omni_dir), max_new_tokens=200, max_frames=400,
                                         captions=False))
    engine._load()
    meter = PlayoutMeter(MonotonicClock())
    session = engine.open_session("cut", SessionOptions(playout=meter))
    try:
        recorder = Recorder(session)
        await feed_units(session, piper_speech("Tell me a long story."))
        await wait_for(lambda: sum(len(a.samples) for a in recorder.of(AssistantAudio))
                       >= 24_000, timeout_s=60)  # a second of the reply made
        turn_id = recorder.of(AssistantAudio)[0].turn_id
        for _ in range(25):  # 25 wire frames (20 ms at 48 kHz) of it left for the caller
            meter.sent(FrameTag(turn_id))
        session.interrupt()
        await wait_for(lambda: cut_ends(recorder), timeout_s=20)
        await settled(session, timeout_s=20)
        [end] = cut_ends(recorder)
        assert end.turn_id == turn_id and end.heard_ms == 500
        cut = session.replies.current  # type: ignore[attr-defined]
        state = session.thinker  # type: ignore[attr-defined]
        kept = reply_kept(state.ids, engine.model)
        assert len(kept) == heard_tokens(cut.work.frames_at, 500, 10**6)
        assert 0 < len(kept) < heard_tokens(cut.work.frames_at, 10**6, 10**6)  # heard, and cut
        assert state.ids[-2:] == [engine.model.im_end_id, *engine.model.encode("\n")]
        assert state.cache_length() == state.length
    finally:
        await session.close()
        await engine.close()


async def test_a_reply_cut_while_it_plays_out_keeps_only_what_was_heard(
        omni_dir: Path) -> None:
    """Made faster than it sounds (the usual case): the whole reply is generated, and the
    caller speaks while it still plays out. The Thinker keeps what they heard, not all."""
    engine = QwenOmniEngine(OmniSettings(model=str(omni_dir), max_new_tokens=30, max_frames=50,
                                         captions=False))
    engine._load()
    meter = PlayoutMeter(MonotonicClock())
    session = engine.open_session("late-cut", SessionOptions(playout=meter))
    playing_out = asyncio.Event()
    replies = session.replies  # type: ignore[attr-defined]
    wait_played_out = replies.play_out

    async def made(reply: Any, lead_s: float = 0.0) -> None:  # made; its sound goes on
        playing_out.set()
        await wait_played_out(reply, lead_s)

    replies.play_out = made
    try:
        recorder = Recorder(session)
        await feed_units(session, piper_speech("Tell me a story."))
        await wait_for(playing_out.is_set, timeout_s=60)
        cut = session.replies.current  # type: ignore[attr-defined]
        for _ in range(15):  # 300 ms of it left for the caller
            meter.sent(FrameTag(cut.turn_id))
        session.interrupt()
        await wait_for(lambda: cut_ends(recorder), timeout_s=20)
        await settled(session, timeout_s=20)
        [end] = cut_ends(recorder)
        assert end.heard_ms == 300
        kept = reply_kept(session.thinker.ids, engine.model)  # type: ignore[attr-defined]
        assert len(kept) == heard_tokens(cut.work.frames_at, 300, 10**6)
        assert len(kept) < heard_tokens(cut.work.frames_at, 10**6, 10**6)
    finally:
        await session.close()
        await engine.close()


async def test_browser_like_call_over_webrtc(omni_dir: Path) -> None:
    config = ServerConfig(engine="qwen-omni", model=str(omni_dir), ice_loopback=True, port=0)
    settings = omni_settings(config)
    engine = QwenOmniEngine(OmniSettings(**{**settings.__dict__, **SETTINGS}))
    speech = piper_speech("Hello there, how are you today?", rate=48_000, lead_s=1.0, tail_s=3.0)
    async with running_server(config, engine=engine) as (url, _app):
        audio = Microphone(speech)
        call = await connect(url, audio, ColorVideoTrack())
        try:
            await wait_for(lambda: any(m.get("type") == "turn" and m.get("role") == "assistant"
                                       and m.get("phase") == "end" for m in call.messages),
                           timeout_s=90)
            kinds = {m.get("type") for m in call.messages}
            assert {"assistant_text", "timing", "turn"} <= kinds
            await wait_for(lambda: np.abs(call.received_audio().astype(np.int32)).max() > 100,
                           timeout_s=10)
        finally:
            await call.close()


async def test_speculative_reply_at_a_pause_is_rolled_back_when_speech_resumes(
        omni_engine: QwenOmniEngine) -> None:
    """A short pause mid-sentence starts a reply unseen; speaking on cancels it and the
    cache returns to the open user turn; the real end of turn is answered once."""
    session = omni_engine.open_session("spec", SessionOptions())
    recorder = Recorder(session)
    first = piper_speech("I would like", tail_s=0.25)
    second = piper_speech("a cup of hot coffee please.", lead_s=0.0)
    await feed_units(session, np.concatenate([first, second, np.zeros(16_000, np.int16)]))
    await wait_for(lambda: any(e.role == "assistant" and e.phase == "end"
                               for e in recorder.of(TurnEvent)), timeout_s=60)
    speculations = session.replies.speculations  # type: ignore[attr-defined]
    assert speculations["cancelled"] >= 1 and speculations["committed"] == 1, speculations
    starts = [e for e in recorder.of(TurnEvent) if e.role == "assistant" and e.phase == "start"]
    assert len(starts) == 1  # the cancelled speculation was never seen
    await settled(session, timeout_s=10)
    state = session.thinker  # type: ignore[attr-defined]
    m = omni_engine.model
    assert state.cache_length() == state.length
    # one user turn: one audio segment closed once, then the assistant's reply
    assert state.ids.count(m.audio_start_id) == 1 and state.ids.count(m.audio_end_id) == 1
    assert state.ids.count(m.assistant_id) == 1
    await session.close()


async def test_the_end_of_turn_model_waits_through_a_mid_sentence_pause(
        omni_dir: Path) -> None:
    """--turn-model smart: Smart Turn judges each pause here as in the cascade (the fixed
    400 ms hangover would cut this sentence at its 0.8 s pause)."""
    settings = {**SETTINGS, "turns": TurnSettings(turn_model="smart")}
    engine = QwenOmniEngine(OmniSettings(model=str(omni_dir), **settings))  # type: ignore[arg-type]
    engine._load()
    session = engine.open_session("smart", SessionOptions())
    try:
        recorder = Recorder(session)
        whole = piper_speech(PAUSED_QUESTION,
                             lead_s=0.5, tail_s=0.0)
        spliced, _ = splice_pause(whole, 0.8)
        await feed_units(session, np.concatenate([spliced, np.zeros(16_000 * 2, np.int16)]),
                         realtime=True)
        await wait_for(lambda: any(e.role == "assistant" and e.phase == "end"
                                   for e in recorder.of(TurnEvent)), timeout_s=60)
    finally:
        await session.close()
        await engine.close()
    user_ends = [e for e in recorder.of(TurnEvent) if e.role == "user" and e.phase == "end"]
    assert len(user_ends) == 1  # one turn, not cut at the pause
    at = {e.stage: e.at_s for e in recorder.of(StageTiming)}
    assert at["end_of_turn"] - at["speech_end"] < 0.39  # finished: ~300 ms, not 400
    verdicts = session.listener.verdicts  # type: ignore[attr-defined]
    assert verdicts[0] < 0.5 < verdicts[-1], verdicts


async def test_instructions_are_the_system_message_of_the_conversation(
        omni_engine: QwenOmniEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    config = ServerConfig(engine="qwen-omni", model="/m", instructions="You are Ada, a guide.")
    assert omni_settings(config).instructions == "You are Ada, a guide."
    assert omni_settings(replace(config, instructions="")).instructions == ""  # the built-in
    runtime = omni_engine.runtime
    monkeypatch.setattr(omni_engine, "_runtime", replace(
        runtime, settings=replace(runtime.settings, instructions="You are Ada, a guide.")))
    session = omni_engine.open_session("persona", SessionOptions())
    try:
        await settled(session, timeout_s=20)
        m = omni_engine.model
        expected = [m.im_start_id, *m.encode("system\nYou are Ada, a guide."), m.im_end_id]
        assert session.thinker.ids[:len(expected)] == expected  # type: ignore[attr-defined]
    finally:
        await session.close()
