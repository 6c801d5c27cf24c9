"""The native engine's camera: the shared frame policy's frames go into the Thinker as video
segments through the user's speech (time by media units, never the wall clock)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from omnicall.engine.base import SessionOptions
from omnicall.engine.conversation.settings import FramePolicySettings
from omnicall.engine.events import CameraSeen, TurnEvent
from omnicall.engine.qwen_omni.engine import QwenOmniEngine
from omnicall.engine.qwen_omni.frames import ThinkerFrames
from omnicall.engine.qwen_omni.settings import OmniSettings
from omnicall.media.video_ring import VideoUnitFrame
from tests.cascade_fixtures import Recorder
from tests.utils import feed_units, piper_speech, settled, wait_for

SETTINGS = {"max_new_tokens": 4, "max_frames": 4, "captions": False}
LONG = "I am going to tell you about all the things that are sitting on my desk today"
VIDEO_EVERY = 6  # units (0.48 s): the ingest's 2 fps sampling on the 80 ms grid


def scene(seed: int, width: int = 448, height: int = 336) -> np.ndarray:
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    return np.asarray(cv2.resize(blocks, (width, height), interpolation=cv2.INTER_NEAREST))


def unit_frame(index: int, image: np.ndarray) -> VideoUnitFrame:
    return VideoUnitFrame(index, index * 7200, Fraction(1, 90000), image)


async def feed_call(session: Any, audio: np.ndarray, scene_at: Callable[[int], np.ndarray],
                    start_index: int = 0) -> int:
    """Push 80 ms units with a frame every :data:`VIDEO_EVERY` units (as the ingest does)."""
    return await feed_units(session, audio, start_index, video=lambda index: unit_frame(
        index, scene_at(index)) if index % VIDEO_EVERY == 0 else None)


@pytest.fixture(scope="module")
def engine(omni_dir: Path) -> Iterator[QwenOmniEngine]:
    engine = QwenOmniEngine(OmniSettings(model=str(omni_dir), **SETTINGS))  # type: ignore[arg-type]
    engine._load()
    yield engine
    for worker in (engine.worker, engine.captions_worker):
        worker.close()
    engine.listening.close()


async def answered_turn(engine: QwenOmniEngine, name: str,
                        scene_at: Callable[[int], np.ndarray]) -> tuple[Any, Recorder, float]:
    session = engine.open_session(name, SessionOptions())
    recorder = Recorder(session)
    speech = piper_speech(LONG, lead_s=0.3, tail_s=0.2)
    end = await feed_call(session, speech, scene_at)
    await feed_call(session, np.zeros(16_000 * 2, np.int16), scene_at, start_index=end)
    await wait_for(lambda: any(e.role == "assistant" and e.phase == "end"
                               for e in recorder.of(TurnEvent)), timeout_s=90)
    await settled(session)
    return session, recorder, len(speech) / 16_000


def frames_in(session: Any) -> list[int]:
    return [s.image_id for s in session.thinker.segments if s.image_id is not None]


def check_prompt(session: Any, engine: QwenOmniEngine) -> None:
    state, m = session.thinker, engine.model
    assert state.cache_length() == state.length
    assert state.ids.count(m.audio_start_id) == state.ids.count(m.audio_end_id) >= 1
    assert state.ids.count(m.assistant_id) == 1  # one turn, answered once
    user = state.ids.index(m.user_id)
    assistant = state.ids.index(m.assistant_id)
    vision = [i for i, t in enumerate(state.ids) if t == m.vision_start_id]
    assert all(user < i < assistant for i in vision)  # every frame inside the user's turn


async def test_a_changing_scene_puts_frames_in_through_a_long_utterance(
        engine: QwenOmniEngine) -> None:
    session, recorder, speech_s = await answered_turn(engine, "changing", lambda i: scene(i))
    try:
        seen = [e for e in recorder.of(CameraSeen)]
        ids = [e.image_id for e in seen]  # one thumbnail per frame put in, in order
        assert speech_s > 4
        assert len(ids) > 2, ids  # not only two at speech start
        assert len(set(ids)) == len(ids) and ids == sorted(ids)
        # once the reply is closed the Thinker keeps the newest max_images (4) of them
        assert frames_in(session) == ids[-4:]
        assert all(e.turn_id == 1 and e.thumb_jpeg[:2] == b"\xff\xd8" for e in seen)
        # the policy's rate while speaking (~1 fps), not every sampled frame (~2 fps)
        policy = session.camera.camera.policy
        assert policy.rate_skipped > 0
        assert len(ids) <= speech_s * 1.0 + 2 + session.replies.speculations["cancelled"]
        # each frame at the policy's size (448 px long side), in multiples of 32 px
        m = engine.model
        tokens = [s.length for s in session.thinker.segments if s.image_id is not None]
        assert set(tokens) == {2 + (448 // 32) * (320 // 32)}
        assert m.vision_end_id in session.thinker.ids
        check_prompt(session, engine)
    finally:
        await session.close()


async def test_a_still_scene_appends_no_duplicates(engine: QwenOmniEngine) -> None:
    still = scene(7)
    session, recorder, _speech_s = await answered_turn(engine, "still", lambda i: still)
    try:
        ids = frames_in(session)
        policy = session.camera.camera.policy
        # the first frame (sent while quiet, held for the turn's start) and at most the
        # turn's end frame (the policy's: from the turn's last second); none per second
        assert 1 <= len(ids) <= 2, ids
        assert policy.dup_skipped >= 5
        assert [e.image_id for e in recorder.of(CameraSeen)] == ids  # <= max_images: all kept
        check_prompt(session, engine)
    finally:
        await session.close()


def test_frames_wait_for_their_place_in_the_prompt() -> None:
    """Quiet frames are held for the next turn; frames during a speculative reply wait for
    speech to resume (or the next turn); a pause without news takes no end frame."""
    frames = ThinkerFrames(FramePolicySettings())
    frames.clock(0)
    assert frames.see(unit_frame(0, scene(1)), speaking=False, waiting=False) is None
    assert frames.held is not None
    held = frames.open_turn()
    assert held is not None and frames.held is None
    frames.clock(13)  # speech starts: the policy picks one interval in, and sends a pick
    assert frames.see(unit_frame(13, scene(2)), speaking=True, waiting=False) is None
    frames.clock(26)  # at the next pick
    assert frames.see(unit_frame(26, scene(3)), speaking=True, waiting=False) is None
    frames.clock(39)
    now = frames.see(unit_frame(39, scene(4)), speaking=True, waiting=False)
    assert now is not None and now.selection.at_s == 26 * 0.08
    frames.clock(40)
    end = frames.end_frame()  # the freshest frame, superseding the pick held since 39
    assert end is not None and end.selection.image is frames.camera.latest.image
    frames.clock(41)
    assert frames.end_frame() is None  # no news since the last end frame
    for index in (54, 67, 80):  # speech again over the speculative reply: a pick waits
        frames.clock(index)
        assert frames.see(unit_frame(index, scene(index)), speaking=True, waiting=True) is None
    waited = frames.resumed()
    assert len(waited) == 1 and frames.news
    assert [s.image_id for s in frames.camera.turn][-1] == waited[0].image_id
    frames.clock(93)
    assert frames.see(unit_frame(93, scene(5)), speaking=True, waiting=True) is None
    frames.turn_ended()
    assert frames.held is not None and not frames.waiting


def test_a_pause_after_speech_resumed_takes_an_end_frame_of_the_held_pick() -> None:
    """Speech resumes over a speculative reply for about a second (the policy picks a frame
    and holds it, nothing has gone in since the last end frame): the next pause still takes
    an end frame, the freshest, from that stretch."""
    frames = ThinkerFrames(FramePolicySettings())
    frames.clock(0)
    frames.see(unit_frame(0, scene(1)), speaking=False, waiting=False)
    frames.open_turn()
    for index in (13, 26):
        frames.clock(index)
        assert frames.see(unit_frame(index, scene(index)), speaking=True, waiting=False) is None
    frames.clock(27)
    assert frames.end_frame() is not None  # the first pause
    assert frames.resumed() == [] and not frames.news
    for index in (28, 41):  # speech again: a pick 1.04 s in, held
        frames.clock(index)
        assert frames.see(unit_frame(index, scene(index)), speaking=True, waiting=False) is None
    assert frames.camera.policy.holding
    frames.clock(43)
    end = frames.end_frame()  # the second pause
    assert end is not None and np.array_equal(end.selection.image, scene(41))


async def test_frames_around_a_speculation_that_speech_overtakes(engine: QwenOmniEngine) -> None:
    """A pause starts a reply unseen (with the turn's end frame before it); speaking on rolls
    the reply back, the frame stays (seen while the user spoke) and the frames since go in
    after it: one user turn, every frame inside it, answered once."""
    session = engine.open_session("spec-frames", SessionOptions())
    recorder = Recorder(session)
    try:
        first = piper_speech("I would like", tail_s=0.25)
        second = piper_speech("a cup of hot coffee please with milk and sugar", lead_s=0.0)
        audio = np.concatenate([first, second, np.zeros(16_000 * 2, np.int16)])
        await feed_call(session, audio, lambda i: scene(100 + i))
        await wait_for(lambda: any(e.role == "assistant" and e.phase == "end"
                                   for e in recorder.of(TurnEvent)), timeout_s=90)
        await settled(session)
        assert session.replies.speculations["cancelled"] >= 1, session.replies.speculations
        ids = [e.image_id for e in recorder.of(CameraSeen)]
        assert len(ids) >= 3 and len(set(ids)) == len(ids)
        assert frames_in(session) == ids[-4:]
        check_prompt(session, engine)
    finally:
        await session.close()
