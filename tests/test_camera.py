from fractions import Fraction

import cv2
import numpy as np

from omnicall.engine.conversation.camera import (
    FRESH_WITHIN_S,
    MAX_TURN_SIGHTINGS,
    Camera,
    thumbnail_jpeg,
)
from omnicall.engine.conversation.frame_policy import FramePolicySettings
from omnicall.media.video_ring import VideoUnitFrame

UNIT_S = 0.08


def scene(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (9, 16, 3), dtype=np.uint8)
    return np.asarray(cv2.resize(blocks, (640, 360), interpolation=cv2.INTER_NEAREST))


def unit_frame(seed: int, index: int) -> VideoUnitFrame:
    return VideoUnitFrame(index, index * 7200, Fraction(1, 90000), scene(seed))


def test_turn_collects_sightings_and_end_frame() -> None:
    camera = Camera()
    assert camera.end_turn(0.0, "hello") is None  # no frame yet: nothing to send
    first = camera.see(unit_frame(1, 0), 0.0, speaking=False)  # quiet: sent at once
    assert first is not None and first.image_id == 1
    assert camera.see(unit_frame(1, 6), 0.48, speaking=True) is None  # speech starts
    assert camera.see(unit_frame(2, 19), 1.52, speaking=True) is None  # picked, held
    second = camera.see(unit_frame(4, 32), 2.56, speaking=True)  # sends the held pick
    assert second is not None and second.image_id == 2 and second.selection.at_s == 1.52
    assert [s.image_id for s in camera.turn] == [1, 2]
    # a new scene at the end of the turn: a new, sharp frame (the words ask to look); the
    # pick held since 2.56 s is dropped
    camera.latest = unit_frame(3, 33)
    end = camera.end_turn(2.64, "What am I holding?")
    assert end is not None and not end.reused and end.selection.sharp
    assert end.image_id == 3 and camera.policy.superseded == 1
    assert [s.image_id for s in camera.closed_turn] == [1, 2, end.image_id]
    assert camera.turn == ()
    decoded = cv2.imdecode(np.frombuffer(end.jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert decoded.shape[:2] == (360, 640)  # never upscaled past the ingest size
    assert end.data_url().startswith("data:image/jpeg;base64,")


def test_end_of_turn_reuses_a_recent_duplicate() -> None:
    camera = Camera()
    sent = camera.see(unit_frame(5, 0), 0.0, speaking=False)  # quiet, then a short turn
    assert sent is not None
    assert camera.see(unit_frame(5, 2), 0.16, speaking=True) is None
    end = camera.end_turn(0.5, "and then")  # same scene, 0.5 s later: the model has it
    assert end is not None and end.reused and end.image_id == sent.image_id
    assert end.jpeg == sent.jpeg
    assert [s.image_id for s in camera.closed_turn] == [sent.image_id]


def test_stale_duplicate_is_sent_again_at_end_of_turn() -> None:
    camera = Camera()
    sent = camera.see(unit_frame(5, 0), 0.0, speaking=False)
    assert sent is not None
    for index in range(1, 40):  # a still scene for 3 s: every frame a duplicate
        assert camera.see(unit_frame(5, index), index * UNIT_S, speaking=True) is None
    end = camera.end_turn(39 * UNIT_S, "so")
    assert end is not None and end.image_id != sent.image_id  # fresh within FRESH_WITHIN_S
    assert 39 * UNIT_S - end.selection.at_s <= FRESH_WITHIN_S


def test_retire_past_max_images_and_thumbnail() -> None:
    camera = Camera(FramePolicySettings(max_images=2))
    ids = []
    for n in range(4):
        sighting = camera.see(unit_frame(10 + n, n * 125), n * 10.0, speaking=False)
        assert sighting is not None
        ids.append(sighting.image_id)
    assert camera.retire() == ids[:2]
    assert camera.retire() == []
    thumb = thumbnail_jpeg(camera.turn[-1])
    image = cv2.imdecode(np.frombuffer(thumb, np.uint8), cv2.IMREAD_COLOR)
    assert max(image.shape[:2]) == 96 and len(thumb) < 8000


def test_a_turn_that_never_ends_keeps_a_bounded_number_of_sightings() -> None:
    camera = Camera()
    for n in range(200):  # 200 distinct scenes, one a second, no end of turn
        camera.see(unit_frame(1000 + n, n * 13), n * 1.04, speaking=True)
    assert len(camera.turn) == MAX_TURN_SIGHTINGS
    assert len(camera.policy._turn) <= MAX_TURN_SIGHTINGS
    end = camera.end_turn(200 * 1.04, "so")
    assert end is not None and len(camera.closed_turn) <= MAX_TURN_SIGHTINGS + 1
