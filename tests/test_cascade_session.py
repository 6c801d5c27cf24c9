"""The CPU cascade behind the engine interface, on real bundled models and synthesized speech."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from omnicall.engine.base import SessionOptions
from omnicall.engine.cascade.engine import CascadeEngine
from omnicall.engine.cascade.reply import ReplyWork
from omnicall.engine.conversation.turns import TurnConfig
from omnicall.engine.events import (
    AssistantAudio,
    AssistantText,
    EngineError,
    StageTiming,
    ToolCall,
    TurnEvent,
)
from omnicall.engine.events import UserTranscript as Transcript
from omnicall.engine.tools import APOLOGY, Toolbox, make_tool
from omnicall.media.aligner import MediaUnit
from tests.cascade_fixtures import Recorder, assistant_ends, open_session, wer
from tests.utils import feed_units, piper_speech, tone, wait_for


async def test_question_gets_a_spoken_answer(cascade_engine: CascadeEngine) -> None:
    session, rec = open_session(cascade_engine)
    question = "What is the capital of France?"
    await feed_units(session, piper_speech(question))
    await rec.wait(lambda r: assistant_ends(r))
    finals = [t for t in rec.of(Transcript) if t.final]
    assert len(finals) == 1 and wer(question, finals[0].text) <= 0.2
    reply_text = "".join(t.delta for t in rec.of(AssistantText))
    assert len(reply_text.split()) >= 2
    audio = np.concatenate([a.samples for a in rec.of(AssistantAudio)])
    assert len(audio) / 24_000 > 0.5 and np.sqrt(np.mean(audio.astype(float) ** 2)) > 300
    assert all(a.rate_hz == 24_000 and len(a.samples) <= 1920 for a in rec.of(AssistantAudio))
    stages = [t.stage for t in rec.of(StageTiming)]
    for stage in ("speech_start", "speech_end", "end_of_turn", "asr_done", "llm_first_token",
                  "tts_first_chunk", "first_audio_out"):
        assert stage in stages
    assert not assistant_ends(rec)[0].interrupted
    assert [role for role, _ in session.conversation.pairs()] == ["user", "assistant"]
    assert session.prefills >= 1  # the prompt was cached while the user spoke
    assert session.answer.hearing.early_taken == 1  # heard from the lull, before the pause
    splitter = session.new_splitter()
    clauses = [c for c in [*splitter.feed(reply_text), splitter.flush()] if c]
    if len(clauses) > 1:  # the LLM went on after the first clause: on one thread
        assert cascade_engine.llm.decode_threads == 1  # type: ignore[attr-defined]
    await rec.close()


async def test_short_pause_cancels_the_speculative_reply(cascade_engine: CascadeEngine) -> None:
    session, rec = open_session(cascade_engine)
    first = piper_speech("I would like", tail_s=0.25)
    second = piper_speech("a cup of hot coffee please.", lead_s=0)
    await feed_units(session, np.concatenate([first, second]))
    await rec.wait(lambda r: assistant_ends(r))
    assert session.replies.speculations["cancelled"] >= 1
    user_ends = [e for e in rec.of(TurnEvent) if e.role == "user" and e.phase == "end"]
    finals = [t for t in rec.of(Transcript) if t.final]
    assert len(user_ends) == 1 and len(finals) == 1
    assert "coffee" in finals[0].text.lower()
    assert session.answer.hearing.early_taken >= 2  # each pause's, from its lull
    await rec.close()


async def test_barge_in_stops_the_reply_and_keeps_what_was_heard(
        cascade_engine: CascadeEngine) -> None:
    session, rec = open_session(cascade_engine)
    await feed_units(session, piper_speech("Tell me a long story about a brave knight."))
    await rec.wait(lambda r: any(t.stage == "first_audio_out" for t in r.of(StageTiming)))
    await asyncio.sleep(cascade_engine.listening.echo_warmup_s + 0.6)  # the user listens
    interrupt = piper_speech("Stop, stop. Wait a moment.", lead_s=0.1)
    await feed_units(session, interrupt, start_index=1000, realtime=True)
    await rec.wait(lambda r: any(e.interrupted for e in assistant_ends(r)))
    ended = next(e for e in assistant_ends(rec) if e.interrupted)
    cut_at = rec.events.index(ended)
    late_audio = [e for e in rec.events[cut_at:] if isinstance(e, AssistantAudio)
                  and e.turn_id == ended.turn_id]
    assert not late_audio  # nothing of the old reply is sent after the interruption
    assert session.replies.barge_ins == 1
    heard = next(t for role, t in session.conversation.pairs() if role == "assistant")
    full = "".join(t.delta for t in rec.of(AssistantText) if t.turn_id == ended.turn_id)
    assert heard.endswith("...") and len(heard) - 4 < len(full)
    await rec.close()


async def test_speech_inside_the_echo_window_is_not_a_barge_in(
        cascade_engine: CascadeEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    # a window wide enough that the speech below starts inside it however busy the machine
    monkeypatch.setattr(cascade_engine.listening, "echo_warmup_s", 3.0)
    session, rec = open_session(cascade_engine)
    blue = piper_speech("blue", lead_s=0, tail_s=0)
    await feed_units(session, piper_speech("What color is the sky?", tail_s=0.6))
    await rec.wait(lambda r: any(t.stage == "first_audio_out" for t in r.of(StageTiming)))
    await feed_units(session, blue, start_index=500)
    await rec.wait(lambda r: assistant_ends(r), timeout_s=30)
    assert session.replies.barge_ins == 0 and not assistant_ends(rec)[0].interrupted
    assert session.listener.echo_starts >= 1  # heard as speech, taken for the echo
    await rec.close()


async def test_silence_noise_and_music_then_a_normal_turn(cascade_engine: CascadeEngine) -> None:
    session, rec = open_session(cascade_engine)
    rng = np.random.default_rng(2)
    silence = np.zeros(16_000 * 2, np.int16)
    noise = (rng.standard_normal(16_000 * 2) * 3000).astype(np.int16)
    music = (tone(262, 2.0, amp=0.2) + tone(330, 2.0, amp=0.2) + tone(392, 2.0, amp=0.2))
    clipped = np.clip(piper_speech("Hello.").astype(np.int32) * 20, -32768, 32767)
    index = await feed_units(session, np.concatenate([silence, noise, music,
                                                      clipped.astype(np.int16), silence]))
    await asyncio.sleep(1.0)
    before = len(assistant_ends(rec))
    await feed_units(session, piper_speech("How are you today?"), start_index=index)
    await rec.wait(lambda r: len(assistant_ends(r)) > before, timeout_s=30)
    assert not rec.of(EngineError)
    await rec.close()


async def test_a_model_failing_mid_turn_is_reported_and_the_next_turn_works(
        cascade_engine: CascadeEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    session, rec = open_session(cascade_engine)
    real_stream = cascade_engine.llm.stream
    calls = {"n": 0}

    def flaky(messages, cancel, max_tokens=None):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise TypeError("llama decode failed")  # any exception type, not just expected ones
        return real_stream(messages, cancel, max_tokens)

    monkeypatch.setattr(cascade_engine.llm, "stream", flaky)
    index = await feed_units(session, piper_speech("What is two plus two?"))
    await rec.wait(lambda r: r.of(EngineError) and assistant_ends(r))
    assert "failed to answer" in rec.of(EngineError)[0].message
    await feed_units(session, piper_speech("What is the capital of Spain?"),
                     start_index=index)
    await rec.wait(lambda r: len(assistant_ends(r)) >= 2)
    assert not assistant_ends(rec)[-1].interrupted
    await rec.close()


async def test_very_long_utterance_is_cut_and_answered(cascade_engine: CascadeEngine,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cascade_engine.listening, "turn_config", TurnConfig(max_turn_ms=2_000))
    session, rec = open_session(cascade_engine)
    ramble = piper_speech("I am going to keep talking and talking without any pause at all "
                          "because I have so very much to say about everything")
    await feed_units(session, ramble)
    # cut into 2 s turns; each cut turn's reply yields to the speech that goes on, and the
    # last part, which ends in silence, is answered
    await rec.wait(lambda r: any(not e.interrupted for e in assistant_ends(r)), timeout_s=30)
    user_starts = [e for e in rec.of(TurnEvent) if e.role == "user" and e.phase == "start"]
    assert len(user_starts) >= 2
    assert [t for t in rec.of(Transcript) if t.final and t.text]
    await rec.close()


def test_admission_turns_calls_away_beyond_engine_capacity(
        cascade_engine: CascadeEngine) -> None:
    limit = cascade_engine.settings.max_calls
    assert cascade_engine.admission_problem(limit - 1) is None
    problem = cascade_engine.admission_problem(limit)
    assert problem is not None and str(limit) in problem


async def test_degrade_levels_text_first_then_lighter_voice(
        cascade_engine: CascadeEngine) -> None:
    from omnicall.engine.degrade import Level

    try:
        cascade_engine.set_level(Level.TEXT_FIRST)
        session, rec = open_session(cascade_engine)
        index = await feed_units(session, piper_speech("What is the capital of Italy?"))
        await rec.wait(lambda r: assistant_ends(r))
        assert rec.of(AssistantText) and not rec.of(AssistantAudio)  # captions only
        cascade_engine.set_level(Level.FALLBACK)
        await feed_units(session, piper_speech("And of Germany?"), start_index=index)
        await rec.wait(lambda r: len(assistant_ends(r)) >= 2, timeout_s=30)
        assert rec.of(AssistantAudio)  # spoken again, by the lighter voice
        assert cascade_engine.talker() is cascade_engine.fallback_tts
        await rec.close()
    finally:
        cascade_engine.set_level(Level.NORMAL)


async def test_the_assistants_own_words_coming_back_are_ignored(
        cascade_engine: CascadeEngine) -> None:
    """Echo guard: right after a reply, an 'utterance' repeating it is not a new turn."""
    session, rec = open_session(cascade_engine)
    said = "The weather in the mountains will be sunny and warm today."
    session.answer.last_reply = (said, session.now())  # the reply that just played out
    index = await feed_units(session, piper_speech(said))
    await rec.wait(lambda r: session.answer.echoes_ignored == 1, timeout_s=30)
    assert not assistant_ends(rec)  # no answer to its own voice
    # a real question right after is answered
    await feed_units(session, piper_speech("What is the capital of France?"), start_index=index)
    await rec.wait(lambda r: assistant_ends(r))
    assert session.answer.echoes_ignored == 1
    await rec.close()


async def test_greeting_is_spoken_first_and_remembered(cascade_engine: CascadeEngine,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from omnicall.engine.base import SessionOptions

    greeting = "Hello! I am Ada, your museum guide."
    runtime = cascade_engine.runtime
    monkeypatch.setattr(cascade_engine, "_runtime", replace(
        runtime, settings=replace(runtime.settings, greeting=greeting)))
    session, rec = open_session(cascade_engine)
    await asyncio.sleep(0.5)
    assert not rec.events  # nobody to hear it yet: the greeting waits for the call's media
    await feed_units(session, np.zeros(16_000 * 3, np.int16))
    await rec.wait(lambda r: any(isinstance(e, TurnEvent) and e.role == "assistant"
                                 and e.phase == "end" for e in r.events), timeout_s=20)
    texts = "".join(e.delta for e in rec.of(AssistantText))
    audio = np.concatenate([e.samples for e in rec.of(AssistantAudio)])
    assert texts == greeting
    assert len(audio) / 24_000 > 1.0 and np.abs(audio).max() > 3000
    assert session.conversation.pairs() == [("assistant", greeting)]  # type: ignore[attr-defined]
    await rec.close()
    resumed = cascade_engine.open_session("again", SessionOptions(
        history=(("user", "hi"), ("assistant", greeting))))
    await asyncio.sleep(1.0)
    assert resumed.state.events.empty()  # type: ignore[attr-defined]  # not greeted twice
    await resumed.close()


# -- tools ---------------------------------------------------------------------------------
def clock_toolbox(body: Any, timeout_s: float = 5.0) -> Toolbox:
    """A ``local_time`` tool (the bundled model picks it for 'What time is it?': that exact
    request is one of its examples) whose body is ``body``."""
    body.__doc__ = "The current local time, weekday and date."
    body.__name__ = "local_time"
    return Toolbox([make_tool(body, examples=["What time is it?", "What's the date today?"],
                              filler="Let me check the clock.")], timeout_s)


def reply_text(recorder: Recorder) -> str:
    return "".join(e.delta for e in recorder.of(AssistantText))


def assistant_ended(recorder: Recorder) -> bool:
    return any(e.role == "assistant" and e.phase == "end" for e in recorder.of(TurnEvent))


async def ask(engine: CascadeEngine, tools: Toolbox, text: str,
              recorders: list[Recorder] | None = None) -> Recorder:
    """``text`` typed to a session with ``tools``, answered; its recorder is also put in
    ``recorders`` before the question goes (for a tool that watches the call)."""
    session = engine.open_session("tools", SessionOptions(tools=tools))
    recorder = Recorder(session)
    if recorders is not None:
        recorders.append(recorder)
    session.send_text(text)
    await recorder.wait(assistant_ended, timeout_s=30)
    await recorder.close()
    return recorder


async def test_a_typed_question_calls_the_tool_and_answers_from_its_result(
        cascade_engine: CascadeEngine) -> None:
    def local_time() -> str:
        return "It is 10:42 on Tuesday, 01 December 2026"

    recorder = await ask(cascade_engine, clock_toolbox(local_time), "What time is it?")
    calls = recorder.of(ToolCall)
    assert [(c.name, c.arguments, c.output, c.error) for c in calls] == [
        ("local_time", {}, "It is 10:42 on Tuesday, 01 December 2026", "")]
    text = reply_text(recorder)
    assert "10:42" in text, text  # answered greedily from the result
    stages = [e.stage for e in recorder.of(StageTiming)]
    assert stages.index("tool_start") < stages.index("tool_done") < stages.index(
        "llm_first_token") < stages.index("first_audio_out")
    assert recorder.of(AssistantAudio)
    assert not any(e.interrupted for e in recorder.of(TurnEvent))


async def test_a_slow_tool_gets_a_filler_line_first(cascade_engine: CascadeEngine) -> None:
    recorders: list[Recorder] = []

    async def local_time() -> str:
        await asyncio.sleep(1.2)  # past the filler's moment
        # and still running until the filler is heard (however slow the voice is here): a
        # filler that never sounds times the wait out, the tool fails, the test with it
        await wait_for(lambda: recorders[0].of(AssistantAudio), timeout_s=30)
        return "It is 10:42 on Tuesday, 01 December 2026"

    recorder = await ask(cascade_engine, clock_toolbox(local_time, timeout_s=60),
                         "What time is it?", recorders)
    text = reply_text(recorder)
    assert text.startswith("Let me check the clock."), text
    call = recorder.of(ToolCall)[0]
    assert call.ms >= 1100 and not call.error, call
    # the filler was spoken while the tool ran: audio came before the tool returned
    first_audio = next(i for i, e in enumerate(recorder.events) if isinstance(e, AssistantAudio))
    tool_done = next(i for i, e in enumerate(recorder.events)
                     if isinstance(e, StageTiming) and e.stage == "tool_done")
    assert first_audio < tool_done


async def test_a_failing_or_stalled_tool_becomes_a_spoken_apology(
        cascade_engine: CascadeEngine) -> None:
    def failing() -> str:
        raise ConnectionError("clock service unreachable")

    async def stalled() -> str:
        await asyncio.sleep(30)
        return "never"

    for body, error in ((failing, "ConnectionError: clock service unreachable"),
                        (stalled, "timed out after 0.5 s")):
        recorder = await ask(cascade_engine, clock_toolbox(body, timeout_s=0.5),
                             "What time is it?")
        assert [c.error for c in recorder.of(ToolCall)] == [error]
        assert reply_text(recorder).strip().endswith(APOLOGY)
        assert recorder.of(AssistantAudio)  # said, not just captioned
        assert not any(e.interrupted for e in recorder.of(TurnEvent))


async def test_only_tools_marked_speculative_run_before_the_turn_surely_ended(
        cascade_engine: CascadeEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    monkeypatch.setattr(cascade_engine.listening, "turn_config",
                        replace(cascade_engine.listening.turn_config, hangover_ms=3000))
    speech = piper_speech("What time is it?", lead_s=0.3, tail_s=4.0)
    starts = {}
    for speculative in (True, False):
        def local_time() -> str:
            return "It is 10:42 on Tuesday, 01 December 2026"

        local_time.__doc__ = "The current local time, weekday and date."
        tools = Toolbox([make_tool(local_time, examples=["What time is it?"],
                                   speculative=speculative)])
        session = cascade_engine.open_session("spec", SessionOptions(tools=tools))
        recorder = Recorder(session)
        await feed_units(session, speech, realtime=True)
        await recorder.wait(assistant_ended, timeout_s=30)
        await recorder.close()
        at = {e.stage: e.at_s for e in recorder.of(StageTiming)}
        assert [c.name for c in recorder.of(ToolCall)] == ["local_time"]
        starts[speculative] = at["tool_start"] - at["end_of_turn"]
    assert starts[True] < -0.5, starts  # ran in the 3 s hangover, held until its end
    assert starts[False] >= 0, starts  # a tool that may act waited for the end of the turn


async def test_the_talker_sends_a_clause_piece_by_piece_as_the_whole_would_sound(
        cascade_engine: CascadeEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first sound of a long clause goes out when the voice has made its first piece,
    and what is sent equals the voice's pieces joined, resampled and trimmed at once (the
    Talker's way before it streamed)."""
    from omnicall.engine.cascade.talker import CLAUSE_TAIL_MS
    from omnicall.engine.cascade.tts import trim_silence
    from omnicall.media.resample import AudioConverter

    clause = "The capital of France is Paris, a city known for its art and its food."
    voice = cascade_engine.tts
    made: list[Any] = []

    class CountingVoice:  # the engine's voice, keeping each piece as it is made
        name = voice.name

        def synthesize(self, text: str) -> Any:
            for piece in voice.synthesize(text):
                made.append(piece)
                yield piece

    session, rec = open_session(cascade_engine)
    made_at_first_sound: list[int] = []
    frames_out: list[AssistantAudio] = []
    reply = session.replies.new(session.state.turn_id, ReplyWork())
    send = reply.gate.out

    async def out(event: Any) -> None:
        if isinstance(event, AssistantAudio):
            if not frames_out:
                made_at_first_sound.append(len(made))
            frames_out.append(event)
        await send(event)

    monkeypatch.setattr(reply.gate, "out", out)
    clauses: asyncio.Queue[str | None] = asyncio.Queue()
    clauses.put_nowait(clause)
    clauses.put_nowait(None)
    await session.answer.talker.speak(reply, CountingVoice(), clauses)
    assert len(made) >= 3 and made_at_first_sound == [1]
    await rec.wait(lambda r: len(r.of(AssistantAudio)) == len(frames_out))
    sent = np.concatenate([a.samples for a in rec.of(AssistantAudio)])
    converter = AudioConverter(24_000)
    whole = np.concatenate([converter.convert_array(np.concatenate([s for s, _ in made]),
                                                    made[0][1]), converter.flush()])
    whole = trim_silence(whole, 24_000, lead=True, tail_keep_ms=CLAUSE_TAIL_MS)
    assert len(sent) == len(whole) and np.abs(sent.astype(np.int32) - whole).max() <= 1
    assert reply.spans == [(clause, 0.0, pytest.approx(len(sent) / 24_000))]
    await rec.close()


async def test_partial_transcripts_run_beside_the_final_one_not_before_it(
        cascade_engine: CascadeEngine) -> None:
    """Partial transcripts come from their own copy of the ASR model on their own worker:
    shown while the user speaks, and a partial still running when the turn ends does not
    hold up the final transcript (it used to wait up to a whole partial, ~200 ms)."""
    import threading
    from dataclasses import replace

    from omnicall.engine.cascade.runtime import PartialTranscriber

    question = "Can you tell me how many people live in the city of London these days?"
    speech = piper_speech(question)
    session, rec = open_session(cascade_engine)
    done_before = cascade_engine.partial_worker.completed
    await feed_units(session, speech, realtime=True)
    await rec.wait(lambda r: assistant_ends(r))
    partials = [t for t in rec.of(Transcript) if not t.final]
    assert partials and cascade_engine.partial_worker.completed > done_before
    await rec.close()

    session, rec = open_session(cascade_engine)
    release = threading.Event()
    partial_running = asyncio.ensure_future(cascade_engine.partial_worker.run(
        release.wait, 30.0, session="a-partial-that-is-still-running"))
    try:
        await feed_units(session, speech, realtime=True)
        await rec.wait(lambda r: assistant_ends(r))
        assert not partial_running.done()  # the final did not wait for it
        finals = [t for t in rec.of(Transcript) if t.final]
        assert len(finals) == 1 and wer(question, finals[0].text) <= 0.2
    finally:
        release.set()
        await partial_running
    await rec.close()

    own = cascade_engine.runtime  # --asr-partial-threads 0: partials on the final's model
    cascade_engine._runtime = replace(own, partial=PartialTranscriber(
        cascade_engine.think_worker, cascade_engine.asr))
    try:
        session, rec = open_session(cascade_engine)
        done_before = cascade_engine.partial_worker.completed
        await feed_units(session, speech, realtime=True)
        await rec.wait(lambda r: assistant_ends(r))
        assert [t for t in rec.of(Transcript) if not t.final]  # from the shared model
        assert cascade_engine.partial_worker.completed == done_before
        await rec.close()
    finally:
        cascade_engine._runtime = own


# -- the session's own logic, on stand-in models (no model loads) ----------------------------
def spoken_reply(session: Any, user_text: str = "Tell me a story.") -> Any:
    """The session's current reply, committed and said: 'Once upon a time there was' over
    its first 1.2 s of sound, 'a brave knight who' over the next 0.8 s."""
    reply = session.replies.new(session.state.turn_id, ReplyWork(user_text=user_text))
    reply.text = "Once upon a time there was a brave knight who"
    reply.spans = [("Once upon a time there was", 0.0, 1.2),
                   ("a brave knight who", 1.2, 0.8)]
    return reply


async def release_audio(reply: Any, seconds: float) -> None:
    await reply.gate.out(AssistantAudio(np.zeros(int(seconds * 24_000), np.int16), 24_000, 0,
                                        reply.turn_id))


def kept_reply(session: Any) -> str:
    return next(t for role, t in reversed(session.conversation.pairs()) if role == "assistant")


async def test_a_barge_in_ends_the_reply_with_the_heard_ms_its_kept_words_were_cut_at() -> None:
    """The measured playout says 1.5 s of the reply left: the end event says 1500 ms and the
    memory keeps the words of exactly that much (the whole first clause, a quarter of the
    second's: 'a')."""
    from omnicall.engine.cascade.session import CascadeSession
    from omnicall.media.clock import ManualClock
    from omnicall.media.playout import FrameTag, PlayoutMeter
    from tests.cascade_fixtures import close_runtime, fake_runtime

    runtime = fake_runtime(ManualClock())
    meter = PlayoutMeter(ManualClock())  # no call output: the audio stays the session's events
    session = CascadeSession("cut", SessionOptions(playout=meter), runtime)
    rec = Recorder(session)
    try:
        reply = spoken_reply(session)
        await release_audio(reply, 2.0)
        for _ in range(75):  # 1.5 s of it left, as the paced track reports it
            meter.sent(FrameTag(reply.turn_id))
        # the caller speaks over the reply: the listener cuts it, then opens the turn
        await session.replies.barge_in()
        await session.on_speech_start()
        await rec.wait(lambda r: assistant_ends(r))
        end = assistant_ends(rec)[0]
        assert end.interrupted and end.heard_ms == 1500 and session.replies.barge_ins == 1
        kept = reply.heard_text(end.heard_ms / 1000)
        assert kept == "Once upon a time there was a"
        assert session.conversation.pairs() == [("user", "Tell me a story."),
                                              ("assistant", kept + " ...")]
        assert session.answer.last_reply[0] == kept
        await rec.close()
    finally:
        close_runtime(runtime)


async def test_interrupt_and_a_replacing_answer_carry_the_estimated_heard_ms() -> None:
    """Without a playout measure the gate estimates what was heard (the real time since the
    first sound, less the playout delay): read once, it both cuts the memory and is sent."""
    from omnicall.engine.cascade.session import CascadeSession
    from omnicall.engine.conversation.reply_gate import PLAYOUT_DELAY_S
    from omnicall.media.clock import ManualClock
    from tests.cascade_fixtures import close_runtime, fake_runtime

    clock = ManualClock()
    runtime = fake_runtime(clock)
    session = CascadeSession("stop", SessionOptions(), runtime)
    rec = Recorder(session)
    try:
        reply = spoken_reply(session)
        await release_audio(reply, 2.0)
        await clock.advance(1.0 + PLAYOUT_DELAY_S)
        session.interrupt()  # the page's stop
        await rec.wait(lambda r: assistant_ends(r))
        end = assistant_ends(rec)[0]
        assert end.interrupted and end.heard_ms == 1000
        assert kept_reply(session) == reply.heard_text(1.0) + " ..." \
            == "Once upon a time there ..."

        session.state.turn_id += 1
        second = spoken_reply(session, "And then?")
        await release_audio(second, 2.0)
        await clock.advance(1.5 + PLAYOUT_DELAY_S)
        session.send_text("Never mind.")  # a new answer replaces the one still speaking
        await rec.wait(lambda r: len(assistant_ends(r)) >= 2)
        end = assistant_ends(rec)[1]
        assert end.turn_id == second.turn_id and end.interrupted and end.heard_ms == 1500
        assert ("assistant", second.heard_text(1.5) + " ...") in session.conversation.pairs()
        await rec.close()
    finally:
        close_runtime(runtime)


async def test_truncating_a_reply_still_going_ends_it_at_the_client_s_played_ms() -> None:
    from omnicall.engine.cascade.session import CascadeSession
    from omnicall.media.clock import ManualClock
    from tests.cascade_fixtures import close_runtime, fake_runtime

    runtime = fake_runtime(ManualClock())
    session = CascadeSession("truncate", SessionOptions(), runtime)
    rec = Recorder(session)
    try:
        reply = spoken_reply(session)
        await release_audio(reply, 2.0)
        session.truncate_reply(1700)  # the client played this much, then stopped
        await rec.wait(lambda r: assistant_ends(r))
        end = assistant_ends(rec)[0]
        assert end.interrupted and end.heard_ms == 1700
        assert kept_reply(session) == reply.heard_text(1.7) + " ..."
        assert kept_reply(session) == "Once upon a time there was a brave ..."
        session.truncate_reply(300)  # the reply has ended: only the memory changes
        assert kept_reply(session) == "Once ..."
        assert len(assistant_ends(rec)) == 1
        await rec.close()
    finally:
        close_runtime(runtime)


class TurnAsr:
    """Hears the same words in any turn, and keeps the length of each turn it heard."""

    def __init__(self) -> None:
        self.heard: list[int] = []

    def transcribe(self, samples: Any) -> str:  # the partial transcripts
        return ""

    def transcribe_turn(self, samples: Any) -> tuple[str, str]:
        self.heard.append(len(samples))
        return "What is the capital of France?", "en"


@pytest.mark.parametrize("early", [True, False])
async def test_the_final_transcript_starts_at_the_lull_its_pause_takes(early: bool) -> None:
    """Each lull starts the turn's final transcript and drops the one before it (the speech
    went on: queued, it never runs); the pause takes the latest, so the turn is heard once,
    to the lull's audio and the silence the pause would add. ``asr_early`` off (``--ab
    asr_early=false``): at the pause, to its audio."""
    from omnicall.engine.cascade.session import CascadeSession
    from omnicall.engine.cascade.settings import CascadeSettings
    from omnicall.engine.conversation.settings import TurnSettings
    from omnicall.media.clock import ManualClock
    from tests.cascade_fixtures import close_runtime, fake_runtime

    asr = TurnAsr()
    settings = CascadeSettings(turns=TurnSettings(turn_model="fixed"), asr_early=early)
    runtime = fake_runtime(ManualClock(), settings=settings, asr=asr)  # type: ignore[arg-type]
    session = CascadeSession("early", SessionOptions(), runtime)
    rec = Recorder(session)
    try:
        unit = np.full(1280, 3000, np.int16)
        await session.on_speech_start()
        session.listener.utterance = [unit] * 6
        await session.on_lull()  # a gap between words
        session.listener.utterance += [unit] * 4
        await session.on_lull()  # the speech's end
        session.listener.utterance += [unit]  # the 64 ms of silence to the pause
        await session.on_pause()
        await session.on_end_of_turn(0.0)
        await rec.wait(lambda r: assistant_ends(r))
        finals = [t.text for t in rec.of(Transcript) if t.final]
        assert finals == ["What is the capital of France?"]
        hearing = session.answer.hearing
        if early:
            assert asr.heard == [10 * 1280 + 1024]  # and the 64 ms of silence to the pause
            assert (hearing.early_taken, hearing.early_dropped) == (1, 1)
        else:
            assert asr.heard == [11 * 1280]
            assert (hearing.early_taken, hearing.early_dropped) == (0, 0)
        await rec.close()
    finally:
        close_runtime(runtime)


async def test_from_the_lull_no_partial_transcript_or_look_ahead_starts() -> None:
    """From the speech's first silent chunk (the lull) the turn's final transcript is under
    way: a unit processed then starts no partial transcript and offers its frame to no look
    ahead (they would take the cores the transcript and the reply need); while the caller
    speaks, a unit starts both (when due)."""
    from fractions import Fraction

    from omnicall.engine.cascade.session import CascadeSession
    from omnicall.media.clock import ManualClock
    from omnicall.media.video_ring import VideoUnitFrame
    from tests.cascade_fixtures import close_runtime, fake_runtime

    runtime = fake_runtime(ManualClock())
    runtime.listening.load_vad()
    session = CascadeSession("quiet", SessionOptions(), runtime)
    started: list[tuple[str, bool]] = []
    session._maybe_partial = lambda: started.append(("partial", True))  # type: ignore[method-assign]
    session._look_ahead = lambda image, speaking: started.append(  # type: ignore[method-assign]
        ("look", speaking))
    image = np.zeros((48, 64, 3), np.uint8)

    def unknown(index: int) -> MediaUnit:  # filled: the turn detector keeps its state
        return MediaUnit(index, np.zeros(1280, np.int16),
                         VideoUnitFrame(index, index * 7200, Fraction(1, 90_000), image),
                         filled=1280)

    try:
        turns = session.listener.turns
        while not turns.in_turn:
            turns.feed(0.9)
        await session._on_unit(unknown(0))
        assert started == [("partial", True), ("look", True)]
        started.clear()
        assert turns.feed(0.1) == "lull"
        assert session.listener.quiet and not session.listener.paused
        await session._on_unit(unknown(1))
        assert started == []
        assert turns.feed(0.9) is None  # the speech goes on: a gap between words
        await session._on_unit(unknown(2))
        assert started == [("partial", True), ("look", True)]
    finally:
        close_runtime(runtime)


async def test_the_prompt_is_prefilled_only_for_a_model_that_can_prefill() -> None:
    """The session asks the model what it can do (``can_prefill``), not which class it is."""
    from omnicall.engine.cascade.session import CascadeSession
    from omnicall.media.clock import ManualClock
    from tests.cascade_fixtures import FakeLlm, close_runtime, fake_runtime

    for can_prefill in (True, False):
        llm = FakeLlm(can_prefill=can_prefill)
        runtime = fake_runtime(ManualClock(), llm)
        session = CascadeSession("prefill", SessionOptions(), runtime)
        rec = Recorder(session)
        try:
            await session.on_speech_start()
            if can_prefill:
                await rec.wait(lambda r: r.session.prefills == 1)
                assert llm.prefilled[0][-1] == {"role": "user", "content": ""}
            else:
                await asyncio.sleep(0.05)
                assert session.prefills == 0 and not llm.prefilled
            await rec.close()
        finally:
            close_runtime(runtime)


async def test_by_words_a_backchannel_leaves_the_reply_going_and_a_question_cuts_it(
        cascade_engine: CascadeEngine) -> None:
    """Interruptions by words, on the real VAD and ASR: "Okay." and "Right." over a reply
    are recorded in its turn and the reply goes on; a question cuts it and opens a turn."""
    session = cascade_engine.open_session("words", SessionOptions(interrupt_by="words"))
    rec = Recorder(session)
    try:
        reply = spoken_reply(session)
        heard_words = session.hear_words
        seen: list[Any] = []

        async def hear(samples: Any) -> Any:
            text = await heard_words(samples)
            seen.append((len(samples), text))
            return text

        session.hear_words = hear
        await release_audio(reply, 30.0)  # sounding now, for a while
        await asyncio.sleep(0.7)  # past the echo warm-up: the caller's sound is theirs
        index = 0
        for said in ("Okay.", "Right."):
            index = await feed_units(session, piper_speech(said, lead_s=0.3, tail_s=1.0),
                                     start_index=index)

        def kept(r: Recorder) -> list[str]:  # the backchannels, as the transcript records them
            return [e.text for e in r.of(Transcript) if e.final and e.turn_id == reply.turn_id]

        await rec.wait(lambda r: len(kept(r)) == 2 or assistant_ends(r))
        assert not assistant_ends(rec) and session.replies.live() is reply, seen
        assert session.listener.backchannels == 2 and session.state.turn_id == reply.turn_id
        await feed_units(session, piper_speech("Wait, what is the weather tomorrow?",
                                               lead_s=0.3, tail_s=1.5), start_index=index)
        await rec.wait(lambda r: assistant_ends(r))
        end = assistant_ends(rec)[0]
        assert end.turn_id == reply.turn_id and end.interrupted
        assert session.replies.barge_ins == 1 and session.state.turn_id == reply.turn_id + 1
        # the question is answered: no model work is left running when the call closes
        await rec.wait(lambda r: len(assistant_ends(r)) == 2, timeout_s=60)
        await rec.close()
    finally:
        await session.close()


async def test_a_commit_takes_the_audio_sent_before_it(cascade_engine: CascadeEngine) -> None:
    """Manual turns: a commit right behind the appends (no await between: the processing
    task has not taken the units yet) makes all of them the turn, in order."""
    session, rec = open_session(cascade_engine)
    try:
        session.set_turn_detection(False)
        sent = [MediaUnit(i, np.full(1280, i + 1, np.int16)) for i in range(10)]
        for unit in sent:
            assert session.push(unit)
        session.commit_input()
        assert session.state.inputs.empty()
        [turn] = session.committed_audio
        assert np.array_equal(turn, np.concatenate([u.audio for u in sent]))
        later = MediaUnit(10, np.full(1280, -1, np.int16))  # after the commit: the next turn
        assert session.push(later)
        session.commit_input()
        assert len(session.committed_audio) == 2
        assert np.array_equal(session.committed_audio[1], later.audio)
        await rec.close()
    finally:
        await session.close()


async def test_with_a_wake_phrase_only_turns_said_to_the_assistant_are_answered(
        cascade_engine: CascadeEngine) -> None:
    """--wake-phrase 'hey kiosk' (the real ASR hears the bundled voice): a bystander's
    sentence is no turn, the phrase opens one (the words after it are the question), and the
    conversation stays open after the reply for the next question without the phrase."""
    from omnicall.engine.conversation.wake import WakeGate

    session, rec = open_session(cascade_engine)
    session.answer.wake = WakeGate("hey kiosk", open_s=8.0)
    index = await feed_units(session, piper_speech("Did you see the game last night?"))
    await rec.wait(lambda r: session.answer.not_addressed == 1, timeout_s=30)
    assert not assistant_ends(rec)
    index = await feed_units(session, piper_speech("Hey kiosk, what is the capital of France?"),
                             start_index=index)
    await rec.wait(lambda r: len(assistant_ends(r)) == 1)
    heard = [e.text for e in rec.of(Transcript) if e.final]
    assert heard and "kiosk" not in heard[-1].lower() and "france" in heard[-1].lower(), heard
    await feed_units(session, piper_speech("And of Spain?"), start_index=index)
    await rec.wait(lambda r: len(assistant_ends(r)) == 2)
    assert session.answer.not_addressed == 1
    await rec.close()


async def test_with_the_camera_as_addressee_only_the_talking_face_is_answered(
        cascade_engine: CascadeEngine) -> None:
    """--addressee camera (the real face detector watching a real face): a question asked
    while the face in front of the camera stays still (someone off camera asked it) is no
    turn; the same question with the face's mouth moving with it is answered."""
    from tests.talking_face import TalkingFace, camera_units, envelope_of

    session = cascade_engine.open_session("test", SessionOptions(addressee="camera"))
    rec = Recorder(session)
    question = piper_speech("What is the capital of France?")
    # in real time, as a call's units come: the watch sees each frame as it arrives
    index = await feed_units(session, question, video=camera_units(TalkingFace()),
                             realtime=True)
    await rec.wait(lambda r: session.answer.not_addressed == 1, timeout_s=30)
    assert not assistant_ends(rec)
    talking = camera_units(TalkingFace(envelope_of(question)), first_index=index)
    await feed_units(session, question, start_index=index, video=talking, realtime=True)
    await rec.wait(lambda r: len(assistant_ends(r)) == 1)
    assert session.answer.not_addressed == 1
    glimpses = session.answer.addressee.glimpses
    assert sum(g.moving for g in glimpses) >= 3 and all(g.face for g in glimpses)
    await rec.close()
