"""Who the assistant talks to (engine/conversation/addressee.py): the face watched frame by
frame (the real face detector on footage of a real face whose mouth moves with real speech),
the verdict on a span of speech, and the listener leaving a reply to words no face said."""

from __future__ import annotations

import numpy as np
import pytest

from omnicall.engine.cascade.camera.faces import FaceFacts
from omnicall.engine.conversation.addressee import (
    GLIMPSES_KEPT,
    LATE_S,
    Addressee,
    FaceBox,
    Glimpse,
    MouthWatch,
    engaged_face,
)
from omnicall.engine.conversation.listener import Listener
from omnicall.media.clock import ManualClock
from tests.talking_face import FPS, TalkingFace, envelope_of
from tests.test_listener import WordsRecorder, feed, names, rt_close, runtime
from tests.utils import piper_speech

QUESTION = "Excuse me, where is the nearest train station from here?"


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return piper_speech(QUESTION, lead_s=0.3, tail_s=0.5)


def watched(footage: TalkingFace, seconds: float) -> list[Glimpse]:
    faces, watch = FaceFacts(), MouthWatch()
    return [faces.glimpse(footage.frame(k / FPS), watch, k / FPS)
            for k in range(int(seconds * FPS))]


def test_a_talking_mouth_moves_and_a_silent_face_does_not(speech: np.ndarray) -> None:
    seconds = len(speech) / 16_000
    talking = watched(TalkingFace(envelope_of(speech)), seconds)
    still = watched(TalkingFace(), seconds)
    assert all(g.face for g in talking + still)  # the detector finds the face every frame
    assert talking[0].mouth_change is None  # the first frame has nothing to compare with
    during = [g for g in talking if 0.4 <= g.at_s <= seconds - 0.6]  # the words' span
    assert sum(g.moving for g in during) >= len(during) // 2, during
    assert not any(g.moving for g in still), still  # shifting, noisy, but not talking


def test_no_face_turned_to_the_camera_is_no_face(speech: np.ndarray) -> None:
    away = watched(TalkingFace(envelope_of(speech), facing=False), 2.0)
    assert not any(g.face or g.moving for g in away)


def test_only_the_same_face_near_enough_is_compared() -> None:
    rng = np.random.default_rng(0)
    grey = rng.integers(0, 255, (480, 640), dtype=np.uint8)
    watch = MouthWatch()
    assert watch.see(grey, FaceBox(320, 200, 140), 0.0).mouth_change is None  # first frame
    assert watch.see(grey, FaceBox(320, 200, 140), 0.2).mouth_change == 0.0  # the same
    # another face (moved by more than half its width): a new first frame
    assert watch.see(grey, FaceBox(420, 200, 140), 0.4).mouth_change is None
    assert watch.see(grey, FaceBox(420, 200, 30), 0.6) == Glimpse(0.6, face=True)  # too far
    assert watch.see(grey, None, 0.8) == Glimpse(0.8, face=False)
    assert engaged_face([FaceBox(100, 100, 50), FaceBox(400, 120, 90)]) == FaceBox(400, 120, 90)
    assert engaged_face([]) is None


def talk(at_s: list[float], change: float) -> list[Glimpse]:
    return [Glimpse(t, face=True, mouth_change=change) for t in at_s]


def test_the_verdict_on_a_span_of_speech() -> None:
    addressee = Addressee("camera")
    assert addressee.talking(0.0, 2.0) is None  # no frames: it cannot tell
    assert addressee.addressed(0.0, 2.0)  # ... and the turn is answered as without it
    for glimpse in talk([0.2, 0.4], 0.004) + talk([0.6, 0.8, 1.0], 0.3) + talk([5.0], 0.004):
        addressee.add(glimpse)
    assert addressee.talking(0.0, 1.2) is True  # 3 of 5 frames moved
    assert addressee.talking(0.0, 0.35) is False  # a still face: someone else spoke
    assert not addressee.addressed(0.0, 0.35)
    assert addressee.talking(4.0, 5.0 - LATE_S) is False  # a frame just after the span counts
    assert addressee.talking(2.0, 4.0) is None
    addressee.add(Glimpse(6.0, face=False))
    assert addressee.talking(5.5, 6.5) is False  # frames, but no face

    anyone = Addressee("any")
    anyone.add(Glimpse(0.2, face=False))
    assert anyone.addressed(0.0, 1.0)  # not the camera's call
    with pytest.raises(ValueError, match="addressee"):
        Addressee("psychic")


def test_the_glimpses_kept_are_bounded() -> None:
    addressee = Addressee("camera")
    for k in range(GLIMPSES_KEPT * 3):
        addressee.add(Glimpse(k * 0.2, face=True, mouth_change=0.0))
    assert len(addressee.glimpses) == GLIMPSES_KEPT
    assert addressee.glimpses[0].at_s == pytest.approx(GLIMPSES_KEPT * 2 * 0.2)


class BystanderRecorder(WordsRecorder):
    """Words over the reply, said by someone the camera does not show talking."""

    def addressed(self, since_s: float) -> bool:
        self.calls.append(("addressed?", since_s))
        return False


async def test_words_over_a_reply_from_no_one_talking_to_it_cut_nothing() -> None:
    clock = ManualClock(10.0)
    rt = runtime(clock, hangover_ms=400, echo_warmup_ms=0)
    hooks = BystanderRecorder(clock, ["Did you see the game last night?"])
    listener = Listener(rt, hooks, "s", replies=hooks, interrupt_by="words")
    # speech over the reply, heard for words (after 0.4 s), then going on for 0.8 s
    await feed(listener, clock, [0.0] * 4 + [0.9] * 19)
    # not cut: the duck lifted, and the same speech not ducked nor heard again for a second
    assert names(hooks) == ["duck", "addressed?", "unduck"]
    started, asked = hooks.calls[0][1], hooks.calls[1][1]
    assert asked < started  # asked about the speech from its preroll on
    assert listener.not_addressed_interruptions == 1 and not listener.in_turn
    assert hooks.since is not None  # the reply still sounds
    rt_close(listener)
