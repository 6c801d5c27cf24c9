"""``--llm-vision`` in the cascade: the frame policy's frames into the user's message, early
prefill while the user speaks, the page's thumbnail, retention, and a server that refuses
images (on stand-in models: the real servers are in tests/test_llm_vision.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import cv2
import numpy as np
import pytest

from omnicall.engine.base import SessionOptions
from omnicall.engine.cascade.camera.eyes import DESCRIBED, Eyes
from omnicall.engine.cascade.camera.pictures import carries_media
from omnicall.engine.cascade.language_model import MediaRefused
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.conversation.frame_policy import RETIRED_NOTE
from omnicall.engine.conversation.settings import FramePolicySettings, TurnSettings
from omnicall.engine.events import CameraSeen, EngineError, TurnEvent
from omnicall.media.aligner import MediaUnit
from omnicall.media.clock import ManualClock
from omnicall.media.timebase import INPUT_FRAME_SAMPLES
from omnicall.media.video_ring import VideoUnitFrame
from tests.cascade_fixtures import FakeLlm, Recorder, close_runtime, fake_runtime

COLOURS = [(220, 30, 30), (30, 200, 40), (30, 60, 220), (230, 220, 40), (200, 40, 200)]


def coloured(index: int, colour: tuple[int, int, int]) -> MediaUnit:
    image = np.zeros((480, 640, 3), np.uint8)
    image[:] = colour
    frame = VideoUnitFrame(index, index * 7200, Fraction(1, 90_000), image)
    return MediaUnit(index, np.zeros(INPUT_FRAME_SAMPLES, np.int16), frame)


def jpeg_colour(url: str) -> tuple[int, int, int]:
    import base64

    raw = base64.b64decode(url.split(",", 1)[1])
    bgr = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
    b, g, r = (int(v) for v in np.median(bgr[:20, :20].reshape(-1, 3), axis=0))
    return r, g, b


def close_to(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    return max(abs(x - y) for x, y in zip(a, b, strict=True)) < 25


class SeeingLlm(FakeLlm):
    """A stand-in vision model on a server that caches prompts."""

    can_warm = True
    sees = True


class BlindLlm(SeeingLlm):
    """A server without vision: a request with images fails (as llama.cpp's server does
    for a model without its projector)."""

    def stream(self, messages: list[dict[str, Any]], cancel: threading.Event,
               max_tokens: int | None = None, tools: Any = None,
               greedy: bool = False) -> Iterator[Any]:
        if carries_media(messages):
            self.prompts.append(list(messages))
            raise MediaRefused("400: image input is not supported")
        yield from super().stream(messages, cancel, max_tokens, tools, greedy)


def test_eyes_pick_frames_while_speaking_and_a_fresh_one_at_the_end() -> None:
    eyes = Eyes(FramePolicySettings(), SeeingLlm())
    sent = [eyes.see(coloured(i, COLOURS[i // 13 % 5]), speaking=True) for i in range(40)]
    # 1 fps from 1 s in (red at 0.96 s, green at 1.92 s, blue at 2.88 s), each sent at the
    # next pick; the blue one is still held
    assert [(i, s.image_id) for i, s in enumerate(sent) if s is not None] == [(24, 1), (36, 2)]
    assert [close_to(jpeg_colour(p.url), c) for p, c in zip(
        eyes.so_far(), COLOURS[:2], strict=True)] == [True, True]
    # the words ask to look: the freshest frame (yellow, at 3.12 s), sharp, ends the turn; the
    # held blue pick is superseded by it
    pictures, last = eyes.end_turn("what am I holding", "en")
    assert last is not None and last.selection.sharp and not last.reused
    assert [p.image_id for p in pictures] == [1, 2, 3]
    assert [p.sharp for p in pictures] == [False, False, True]
    assert close_to(jpeg_colour(pictures[-1].url), COLOURS[3])
    assert eyes.camera.policy.superseded == 1
    # a turn under a second long carries only its end frame
    assert eyes.see(coloured(52, COLOURS[4]), speaking=True) is None
    pictures, last = eyes.end_turn("and that", "en")
    assert last is not None and [p.image_id for p in pictures] == [last.image_id] == [4]


def test_eyes_send_nothing_for_a_model_that_does_not_see() -> None:
    eyes = Eyes(FramePolicySettings(), FakeLlm())
    assert eyes.see(coloured(0, COLOURS[0]), speaking=True) is None
    assert eyes.end_turn("what is this", "en") == ((), None)
    assert eyes.camera.latest is not None  # the face sentence's frame is still known


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def ask(session: Any, rec: Recorder, text: str, turns: int) -> None:
    session.send_text(text)
    await rec.wait(lambda r: len([e for e in r.of(TurnEvent) if e.role == "assistant"
                                  and e.phase == "end"]) == turns)


async def test_a_turn_carries_its_frames_the_last_one_sharp_and_the_page_gets_a_thumb(
        clock: ManualClock) -> None:
    from omnicall.engine.cascade.session import CascadeSession

    llm = SeeingLlm()
    runtime = fake_runtime(clock, llm)
    session = CascadeSession("eyes", SessionOptions(), runtime)
    rec = Recorder(session)
    try:
        eyes = session.answer.camera.eyes
        for index in range(40):  # ~3.2 s of speech while the scene changes colour
            if eyes.see(coloured(index, COLOURS[min(index // 13, 2)]),
                        speaking=True) is not None:
                session._warm()
                sent = len(eyes.camera.turn)
                await rec.wait(lambda r, n=sent: len(llm.warmed) == n)
        await ask(session, rec, "What am I holding?", 1)
        user = llm.prompts[-1][-1]
        assert user["role"] == "user" and isinstance(user["content"], list)
        images = [p for p in user["content"] if p["type"] == "image_url"]
        assert user["content"][-1] == {"type": "text", "text": "What am I holding?"}
        # red and green while speaking (each sent a second after it was taken), then the
        # freshest frame (blue) sharp at the end, superseding the blue pick still held
        assert [close_to(jpeg_colour(p["image_url"]["url"]), c) for p, c in zip(
            images, COLOURS[:3], strict=True)] == [True] * 3
        assert images[-1]["image_url"]["detail"] == "high"  # the words asked to look
        assert all(p["image_url"]["detail"] == "low" for p in images[:-1])
        assert not any("What the camera shows" in str(m["content"]) for m in llm.prompts[-1])
        # each early prefill was a prefix of the turn's prompt: the frames so far, in order
        for warm in llm.warmed:
            parts = [p for p in warm[-1]["content"] if p["type"] == "image_url"]
            assert parts == images[:len(parts)]
        seen = rec.of(CameraSeen)
        assert len(seen) == 1 and seen[0].sharp and seen[0].thumb_jpeg[:2] == b"\xff\xd8"
        assert seen[0].image_id == session.conversation.turns[-2].pictures[-1].image_id
        await rec.close()
    finally:
        close_runtime(runtime)


async def test_speech_start_prefills_the_quiet_frames_since_the_last_turn(
        clock: ManualClock) -> None:
    from omnicall.engine.cascade.session import CascadeSession

    llm = SeeingLlm()
    runtime = fake_runtime(clock, llm)
    session = CascadeSession("warm-start", SessionOptions(), runtime)
    rec = Recorder(session)
    try:
        assert session.answer.camera.eyes.see(coloured(0, COLOURS[1]), speaking=False) is not None
        assert llm.warmed == []
        await session.on_speech_start()
        await rec.wait(lambda r: len(llm.warmed) == 1)
        parts = [p for p in llm.warmed[0][-1]["content"] if p["type"] == "image_url"]
        assert len(parts) == 1 and close_to(jpeg_colour(parts[0]["image_url"]["url"]),
                                            COLOURS[1])
        await rec.close()
    finally:
        close_runtime(runtime)


async def test_old_pictures_become_a_note_past_the_retention_bound(clock: ManualClock) -> None:
    from omnicall.engine.cascade.session import CascadeSession

    llm = SeeingLlm()
    settings = CascadeSettings(turns=TurnSettings(turn_model="fixed"),
                               camera=FramePolicySettings(max_images=2))
    runtime = fake_runtime(clock, llm, settings)
    session = CascadeSession("retain", SessionOptions(), runtime)
    rec = Recorder(session)
    try:
        for turn in range(3):
            session.answer.camera.eyes.see(coloured(turn * 20, COLOURS[turn]), speaking=False)
            await ask(session, rec, f"Turn {turn}.", turn + 1)
        kept = [p for t in session.conversation.turns for p in t.pictures if not p.retired]
        assert len(kept) == 2
        first = llm.prompts[-1][1]  # the first remembered user turn, in the latest prompt
        assert first["role"] == "user" and RETIRED_NOTE in str(first["content"])
        await rec.close()
    finally:
        close_runtime(runtime)


async def test_a_server_that_refuses_images_gets_words_and_the_page_is_told_once(
        clock: ManualClock) -> None:
    from omnicall.engine.cascade.session import CascadeSession

    llm = BlindLlm()
    runtime = fake_runtime(clock, llm)
    session = CascadeSession("blind", SessionOptions(), runtime)
    rec = Recorder(session)
    try:
        session.answer.camera.facts = "one person is facing the camera, at the centre."
        session.answer.camera.facts_image = coloured(0, COLOURS[0]).video.image  # type: ignore[union-attr]
        session.answer.camera.eyes.see(coloured(1, COLOURS[1]), speaking=True)
        await ask(session, rec, "Hello there.", 1)
        assert not llm.sees
        errors = rec.of(EngineError)
        assert len(errors) == 1 and "camera" in errors[0].message
        retry = llm.prompts[-1]
        assert not carries_media(retry)
        assert any("one person is facing" in str(m["content"]) for m in retry)
        from omnicall.engine.events import AssistantText
        assert "".join(e.delta for e in rec.of(AssistantText)).strip()  # the reply went on
        session.answer.camera.eyes.see(coloured(20, COLOURS[2]), speaking=True)
        await ask(session, rec, "And now?", 2)
        assert len(rec.of(EngineError)) == 1  # told once
        assert not carries_media(llm.prompts[-1])
        described = [e for e in rec.of(CameraSeen) if e.image_id == DESCRIBED]
        assert described  # the page still sees what the face sentence described
        await rec.close()
    finally:
        close_runtime(runtime)


# -- the offline default (a model that does not see): the real look, real pictures ----------

def scene_unit(index: int, image: np.ndarray) -> MediaUnit:
    frame = VideoUnitFrame(index, index * 7200, Fraction(1, 90_000), image)
    return MediaUnit(index, np.zeros(INPUT_FRAME_SAMPLES, np.int16), frame)


@pytest.fixture(scope="module")
def looker_models() -> Any:
    from omnicall.engine.cascade.camera.faces import FaceFacts
    from omnicall.engine.cascade.camera.text_reader import TextReader

    return FaceFacts(), TextReader()


def offline_runtime(clock: ManualClock, llm: FakeLlm, models: Any, heard: str = "") -> Any:
    """``heard``: what the stand-in ASR hears in any speech."""
    from dataclasses import replace

    from omnicall.engine.cascade.camera.looker import Looker
    from tests.cascade_fixtures import FakeAsr

    faces, reader = models
    return replace(fake_runtime(clock, llm, asr=FakeAsr(heard)),
                   vision=Looker(faces, reader, look_timeout_s=30.0, read_timeout_s=30.0))


def close_offline(runtime: Any) -> None:
    runtime.vision.close()
    close_runtime(runtime)


def said(rec: Recorder, turn: int) -> str:
    from omnicall.engine.events import AssistantText

    return "".join(e.delta for e in rec.of(AssistantText) if e.turn_id == turn).strip()


async def test_offline_read_this_quotes_the_label_and_the_page_gets_the_facts(
        clock: ManualClock, looker_models: Any) -> None:
    from omnicall.engine.cascade.session import CascadeSession
    from tests.scenes import WALLS, hold_label, wall

    llm = FakeLlm()
    runtime = offline_runtime(clock, llm, looker_models)
    session = CascadeSession("read", SessionOptions(), runtime)
    rec = Recorder(session)
    try:
        session.answer.camera.eyes.see(scene_unit(0, hold_label(wall(WALLS["grey"], 1),
                                                         ("ORGANIC MILK", "Best before 12/05"),
                                                         1)), speaking=False)
        await ask(session, rec, "Can you read this for me?", 1)
        assert said(rec, 1) == 'It says "ORGANIC MILK / Best before 12/05".'
        assert llm.prompts == []  # the small model was not asked to guess
        (seen,) = rec.of(CameraSeen)
        assert seen.sharp and seen.thumb_jpeg.startswith(b"\xff\xd8")
        assert 'text reads "ORGANIC MILK / Best before 12/05"' in seen.facts
        assert "the thing in the middle is mostly white" in seen.facts
        # the reply is remembered like any other
        assert session.conversation.pairs()[-1] == ("assistant", said(rec, 1))
        # words the frame policy does not take as asking to look still get the text read
        session.answer.camera.eyes.see(scene_unit(20, hold_label(wall(WALLS["blue"], 2), ("EXIT",),
                                                          2)), speaking=False)
        await ask(session, rec, "What's written on the card?", 2)
        assert said(rec, 2) == 'It says "EXIT".'
        assert not rec.of(CameraSeen)[-1].sharp
        await rec.close()
    finally:
        close_offline(runtime)


async def test_offline_facts_go_to_the_model_as_a_note_without_reading(
        clock: ManualClock, looker_models: Any) -> None:
    from omnicall.engine.cascade.session import CascadeSession
    from tests.scenes import OBJECT_COLOURS, WALLS, hold_label, hold_object, wall

    llm = FakeLlm()
    runtime = offline_runtime(clock, llm, looker_models)
    session = CascadeSession("note", SessionOptions(), runtime)
    rec = Recorder(session)
    try:
        eyes = session.answer.camera.eyes
        eyes.see(scene_unit(0, wall(WALLS["grey"], 1)), speaking=False)
        await ask(session, rec, "Good morning.", 1)
        label = hold_label(hold_object(wall(WALLS["grey"], 2), OBJECT_COLOURS["red"], 2),
                           ("EXIT",), 2)
        eyes.see(scene_unit(20, label), speaking=False)
        await ask(session, rec, "Tell me a joke.", 2)
        camera = [m["content"] for m in llm.prompts[-1] if m["role"] == "system"
                  and "What the camera shows now" in m["content"]]
        assert len(camera) == 1
        assert "- change: something" in camera[0] and "new in the middle" in camera[0]
        assert "cannot recognise" in camera[0]
        assert "EXIT" not in camera[0]  # the words did not ask to read: no text read
        seen = rec.of(CameraSeen)
        assert len(seen) == 2 and not seen[1].sharp
        assert said(rec, 2) == llm.reply
        await rec.close()
    finally:
        close_offline(runtime)


async def test_offline_the_assistant_says_it_cannot_tell_a_breed(
        clock: ManualClock, looker_models: Any) -> None:
    from omnicall.engine.cascade.session import CascadeSession
    from tests.scenes import OBJECT_COLOURS, WALLS, hold_object, wall

    llm = FakeLlm(reply="It is a golden retriever.")
    runtime = offline_runtime(clock, llm, looker_models)
    session = CascadeSession("breed", SessionOptions(), runtime)
    rec = Recorder(session)
    try:
        session.answer.camera.eyes.see(scene_unit(0, hold_object(
            wall(WALLS["white"], 3), OBJECT_COLOURS["brown"], 3)), speaking=False)
        await ask(session, rec, "What breed is this dog?", 1)
        reply = said(rec, 1)
        assert reply.startswith("I can't tell that from here.") and "brown" in reply
        assert "retriever" not in reply and llm.prompts == []
        await rec.close()
    finally:
        close_offline(runtime)


async def test_offline_without_a_camera_a_camera_question_is_told_so(
        clock: ManualClock, looker_models: Any) -> None:
    from omnicall.engine.cascade.session import CascadeSession

    llm = FakeLlm()
    runtime = offline_runtime(clock, llm, looker_models)
    session = CascadeSession("no-camera", SessionOptions(), runtime)
    rec = Recorder(session)
    try:
        await ask(session, rec, "What colour is this?", 1)
        assert said(rec, 1) == "I can't see anything: your camera is off or not shared with me."
        await ask(session, rec, "Hello!", 2)
        assert said(rec, 2) == llm.reply and rec.of(CameraSeen) == []
        await rec.close()
    finally:
        close_offline(runtime)


async def test_offline_a_spoken_turn_is_looked_at_while_it_is_spoken(looker_models: Any) -> None:
    """The camera costs the answer no time: the look is done while the caller speaks, its
    facts go into the prompt prefilled then, and the end of the turn takes that look (the
    same scene) without waiting for one; the answer's prompt carries the same note."""
    from omnicall.engine.cascade.session import CascadeSession
    from omnicall.engine.events import StageTiming
    from omnicall.media.clock import MonotonicClock
    from tests.scenes import OBJECT_COLOURS, WALLS, hold_object, wall
    from tests.utils import feed_units, piper_speech

    llm = FakeLlm(can_prefill=True)
    runtime = offline_runtime(MonotonicClock(), llm, looker_models,  # type: ignore[arg-type]
                              heard="What do cats like to eat?")
    runtime.listening.load_vad()
    session = CascadeSession("ahead", SessionOptions(), runtime)
    rec = Recorder(session)
    room = hold_object(wall(WALLS["white"], 2), OBJECT_COLOURS["blue"], 2)

    def camera(index: int) -> VideoUnitFrame | None:  # 2 fps, a hand's shake
        if index % 6:
            return None
        image = np.roll(room, (index // 6) % 3 - 1, axis=1)
        return VideoUnitFrame(index, index * 7200, Fraction(1, 90_000), image)

    def noted(messages: list[dict[str, Any]]) -> list[str]:
        return [m["content"] for m in messages if m["role"] == "system"
                and "What the camera shows now" in m["content"]]

    try:
        speech = piper_speech("What do cats like to eat?")
        half = len(speech) // 2 // 1280 * 1280
        # in real time, as a call's frames come: a frame offered while a look still runs is
        # left for a later one, and fed at once the first half could leave none for later
        index = await feed_units(session, speech[:half], video=camera, realtime=True)
        ahead = session.answer.camera.ahead
        assert ahead is not None
        await rec.wait(lambda r: ahead.looks >= 1 and any(noted(p) for p in llm.prefilled))
        await feed_units(session, speech[half:], start_index=index, video=camera)
        await rec.wait(lambda r: any(e.role == "assistant" and e.phase == "end"
                                     for e in r.of(TurnEvent)))
        stages = {e.stage for e in rec.of(StageTiming)}
        assert "end_of_turn" in stages and "look_start" not in stages, stages
        assert ahead.waits == 0
        (prefilled_note,) = noted(next(p for p in reversed(llm.prefilled) if noted(p)))
        assert noted(llm.prompts[-1]) == [prefilled_note]  # the cached prompt holds
        assert "blue" in prefilled_note
        (seen,) = rec.of(CameraSeen)
        assert any("blue" in fact for fact in seen.facts)
        await rec.close()
    finally:
        close_offline(runtime)


async def test_offline_a_clients_frames_in_manual_turns_are_looked_at_as_they_come(
        looker_models: Any) -> None:
    """Manual turns (a Realtime client commits its audio, the remote tier's front-end among
    them): each frame the client sends is looked at as it comes, and the committed turn takes
    that look without waiting for one."""
    from omnicall.engine.cascade.session import CascadeSession
    from omnicall.engine.events import StageTiming
    from omnicall.media.clock import MonotonicClock
    from tests.scenes import OBJECT_COLOURS, WALLS, hold_object, wall

    runtime = offline_runtime(MonotonicClock(), FakeLlm(), looker_models,  # type: ignore[arg-type]
                              heard="Tell me a joke.")
    session = CascadeSession("manual", SessionOptions(), runtime)
    session.set_turn_detection(False)
    rec = Recorder(session)
    room = hold_object(wall(WALLS["grey"], 4), OBJECT_COLOURS["green"], 4)
    try:
        for index in range(12):  # ~1 s: one frame the client sent, then audio
            assert session.push(scene_unit(index, room) if index == 0 else MediaUnit(
                index, np.full(INPUT_FRAME_SAMPLES, 300, np.int16)))
        ahead = session.answer.camera.ahead
        assert ahead is not None
        await rec.wait(lambda r: ahead.looks == 1)
        assert session.push(scene_unit(12, np.roll(room, 2, axis=1)))  # the turn's end frame
        session.commit_input()
        session.respond()
        await rec.wait(lambda r: any(e.role == "assistant" and e.phase == "end"
                                     for e in r.of(TurnEvent)))
        assert "look_start" not in {e.stage for e in rec.of(StageTiming)}
        assert ahead.waits == 0 and ahead.looks == 1
        (seen,) = rec.of(CameraSeen)
        assert any("green" in fact for fact in seen.facts)
        await rec.close()
    finally:
        close_offline(runtime)


async def test_offline_a_turn_starts_from_the_kept_look_compared_with_the_last_turns(
        looker_models: Any) -> None:
    """The note a turn's prompt is prefilled with at its start is the kept look compared with
    the reference the last confirmed turn left: 'what changed' since then, not since before."""
    from omnicall.engine.cascade.session import CascadeSession
    from omnicall.media.clock import MonotonicClock
    from tests.scenes import OBJECT_COLOURS, WALLS, hold_object, wall

    runtime = offline_runtime(MonotonicClock(), FakeLlm(), looker_models)  # type: ignore[arg-type]
    session = CascadeSession("start", SessionOptions(), runtime)
    rec = Recorder(session)
    camera = session.answer.camera
    try:
        before = await runtime.vision.look(wall(WALLS["grey"], 3), None, read=False)
        camera.eyes.glance = before.glance  # the last confirmed turn saw a bare wall
        held = hold_object(wall(WALLS["grey"], 3), OBJECT_COLOURS["red"], 3)
        camera.look_ahead(held, 0.0, False, "")
        ahead = camera.ahead
        assert ahead is not None
        await rec.wait(lambda r: ahead.done is not None)
        camera.turn_started()
        assert "- change: something" in camera.facts  # new since the bare wall
        camera.eyes.glance = ahead.done.sight.glance  # a turn confirmed with that look
        camera.turn_started()
        assert "- change" not in camera.facts and "red" in camera.facts
        await rec.close()
    finally:
        close_offline(runtime)
