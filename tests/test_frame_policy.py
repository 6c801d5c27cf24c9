from fractions import Fraction

import cv2
import numpy as np
import pytest

from omnicall.engine.conversation.frame_policy import (
    LOOK_WORDS,
    FramePolicy,
    FramePolicySettings,
    asks_to_look,
    data_url,
    encode_jpeg,
    fit_long_side,
)
from omnicall.media.video_ring import VideoUnitFrame

UNIT_S = 0.08
SAMPLE_EVERY = 6  # the ring samples at ~2 fps: one frame every 6 units (480 ms)


def scene(seed: int, height: int = 720, width: int = 1280) -> np.ndarray:
    """A distinct, smooth-ish scene per seed (blocks, so thumbnails differ clearly)."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (9, 16, 3), dtype=np.uint8)
    return np.asarray(cv2.resize(blocks, (width, height), interpolation=cv2.INTER_NEAREST))


def noisy(image: np.ndarray, seed: int, amplitude: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = rng.integers(-amplitude, amplitude + 1, image.shape)
    return np.clip(image.astype(np.int16) + noise, 0, 255).astype(np.uint8)


def run_60s(policy: FramePolicy, speaking: bool, changing: bool = True,
            every: int = SAMPLE_EVERY) -> int:
    sent = 0
    for index in range(0, int(60 / UNIT_S), every):
        frame = scene(index if changing else 0)
        if policy.offer(frame, index * UNIT_S, speaking) is not None:
            sent += 1
    return sent


def test_rate_while_speaking_vs_quiet() -> None:
    speaking = FramePolicy()
    assert 58 <= run_60s(speaking, speaking=True) <= 64  # ~1 fps: every other 2 fps frame
    quiet = FramePolicy()
    assert 5 <= run_60s(quiet, speaking=False) <= 7  # ~0.1 fps
    assert speaking.frames_offered == quiet.frames_offered == 125
    # the last pick is held (sent at the next pick, or dropped at the end of the turn)
    assert speaking.holding and not quiet.holding
    assert speaking.frames_sent + 1 + speaking.rate_skipped + speaking.dup_skipped == 125
    assert speaking.dup_skipped == quiet.dup_skipped == 0
    # a frame every unit (12.5 fps) still gives ~1 fps, never a burst
    assert 58 <= run_60s(FramePolicy(), speaking=True, every=1) <= 64


def test_a_turn_picks_one_interval_in_and_sends_each_pick_at_the_next() -> None:
    policy = FramePolicy()
    assert policy.offer(scene(1), 0.0, speaking=False) is not None  # quiet: sent at once
    assert policy.offer(scene(2), 2.0, speaking=False) is None  # quiet: 10 s apart
    assert policy.offer(scene(3), 2.48, speaking=True) is None  # speech starts: not yet
    assert policy.offer(scene(4), 2.96, speaking=True) is None
    assert policy.offer(scene(5), 3.44, speaking=True) is None  # 1 s in: picked, held
    assert policy.holding and policy.frames_sent == 1
    assert policy.offer(scene(6), 3.92, speaking=True) is None  # speaking: 1 s apart
    sent = policy.offer(scene(7), 4.40, speaking=True)  # the next pick sends the held one
    assert sent is not None and sent.at_s == 3.44 and np.array_equal(sent.image, scene(5))
    assert sent.image_id == 2 and policy.holding
    # the turn ends before the next pick: its end frame supersedes the held one
    end = policy.end_of_turn(scene(8), 4.7, "and that is all")
    assert not end.reused and end.image_id == 3 and np.array_equal(end.image, scene(8))
    assert policy.superseded == 1 and not policy.holding
    assert policy.frames_sent == 3 and policy.kept == (1, 2, 3)
    # a 2.5 s turn: one frame from 1 s in, then the end frame
    sent_in_turn = [policy.offer(scene(10 + i), 10.0 + i * 0.48, speaking=True)
                    for i in range(6)]
    assert [s is not None for s in sent_in_turn] == [False] * 4 + [True, False]
    assert policy.end_of_turn(scene(20), 12.5, "ok").image_id == 5


def test_a_held_pick_of_speech_that_made_no_turn_is_dropped() -> None:
    policy = FramePolicy()
    for i in range(3):
        assert policy.offer(scene(i), i * 0.48, speaking=True) is None
    assert policy.holding  # picked at 0.96
    # the listener dropped the speech as noise: quiet again, no end of turn
    assert policy.offer(scene(9), 1.44, speaking=False) is not None  # quiet: first frame
    assert not policy.holding and policy.superseded == 1 and policy.frames_sent == 1


def test_still_scene_is_skipped_as_duplicates() -> None:
    policy = FramePolicy()
    # one pick (0.96 s), sent when the next frame due (1.92 s) shows the scene stayed
    assert run_60s(policy, speaking=True, changing=False) == 1
    assert not policy.holding and policy.dup_skipped > 40
    end = policy.end_of_turn(scene(0), 60.0, "so")  # the model has it (the Camera sends it
    assert end.reused and end.sent_at_s == 0.96  # again: older than a second)
    # near-identical (sensor noise) is a duplicate, a changed scene is not
    policy = FramePolicy()
    base = scene(7)
    assert policy.offer(base, 100.0, False) is not None
    assert policy.offer(noisy(base, 1), 110.0, False) is None
    assert policy.offer(noisy(base, 2), 120.0, False) is None
    changed = base.copy()
    changed[200:600, 300:800] = 255  # a hand / object fills a quarter of the view
    assert policy.offer(changed, 130.0, False) is not None
    # the comparison is with the last picked frame: the old scene is new again
    assert policy.offer(base, 140.0, False) is not None
    # while speaking: a change is picked and held; the next frame due shows it stayed (a
    # duplicate, skipped): the held pick goes then, not at the next change
    assert policy.offer(base, 141.0, True) is None  # speech starts
    assert policy.offer(changed, 142.0, True) is None  # picked, held
    released = policy.offer(noisy(changed, 3), 143.0, True)
    assert released is not None and released.image is changed and not policy.holding
    assert policy.offer(noisy(changed, 4), 144.0, True) is None  # nothing held, a duplicate
    assert policy.offer(base, 145.0, True) is None  # a change: picked, held
    # the object held up for seconds went at 143 s; lowered just before the end, its pick
    # of the old scene is superseded by the end frame
    end = policy.end_of_turn(base, 145.5, "that was it")
    assert policy.superseded == 1 and end.image is base


def test_duplicate_threshold_zero_sends_everything_on_rate() -> None:
    policy = FramePolicy(FramePolicySettings(duplicate_mad=0))
    assert 58 <= run_60s(policy, speaking=True, changing=False) <= 64


def test_end_of_turn_always_yields_the_freshest_frame() -> None:
    policy = FramePolicy()
    first = policy.offer(scene(1), 0.0, speaking=False)
    assert first is not None
    fresh = scene(2)
    assert policy.offer(fresh, 0.5, speaking=True) is None  # speech just started
    selection = policy.end_of_turn(fresh, 0.6, "hello there")
    assert not selection.reused and selection.image is fresh
    assert selection.image_id != first.image_id
    assert selection.long_side_px == 448 and not selection.sharp
    assert policy.frames_sent == 2 and policy.frames_offered == 3


def test_end_of_turn_reuses_a_duplicate_sent_this_turn() -> None:
    policy = FramePolicy()
    base = scene(3)
    sent = policy.offer(base, 10.0, speaking=False)  # a quiet frame, then a short turn
    assert sent is not None
    latest = noisy(base, 9)
    selection = policy.end_of_turn(latest, 12.5, "so anyway")
    assert selection.reused and selection.image_id == sent.image_id
    assert selection.sent_at_s == 10.0 and selection.at_s == 12.5
    assert selection.image is latest  # the fresh pixels are still there to attach
    assert policy.frames_sent == 1
    again = policy.send_anyway(selection)
    assert not again.reused and again.image_id != sent.image_id and again.image is latest
    assert policy.kept == (sent.image_id, again.image_id)
    # the next turn does not reuse frames of the previous one
    next_turn = policy.end_of_turn(latest, 20.0, "and another thing")
    assert not next_turn.reused


def test_look_words_pick_the_sharp_size_and_do_not_reuse_a_small_frame() -> None:
    policy = FramePolicy()
    base = scene(4)
    assert policy.offer(base, 0.0, speaking=False) is not None
    selection = policy.end_of_turn(base, 1.0, "Can you read this label for me?")
    assert selection.sharp and selection.long_side_px == 896
    assert not selection.reused  # the model only has it at 448: send it sharp
    jpeg = policy.encode(selection)
    decoded = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert decoded.shape == (504, 896, 3)
    assert policy.jpeg_bytes == len(jpeg)


def test_retention_returns_the_oldest_ids_beyond_the_bound() -> None:
    policy = FramePolicy(FramePolicySettings(max_images=3))
    ids = []
    for i in range(5):
        selection = policy.offer(scene(i), 10.0 * i, speaking=False)
        assert selection is not None
        ids.append(selection.image_id)
    assert len(set(ids)) == 5
    assert policy.retire() == ids[:2]
    assert policy.kept == tuple(ids[2:])
    assert policy.retire() == []
    last = policy.end_of_turn(scene(99), 60.0, "ok")
    assert policy.retire() == [ids[2]]
    assert policy.kept == (ids[3], ids[4], last.image_id)


def test_accepts_video_unit_frames() -> None:
    policy = FramePolicy()
    image = scene(5, 336, 448)
    unit = VideoUnitFrame(audio_index=12, pts=86_400, time_base=Fraction(1, 90_000), image=image)
    selection = policy.offer(unit, 12 * UNIT_S, speaking=False)
    assert selection is not None and selection.image is image
    assert policy.end_of_turn(unit, 13 * UNIT_S, "what's this").reused is False  # sharp asked
    with pytest.raises(ValueError):
        policy.offer(np.zeros((4, 4), np.uint8), 20.0, speaking=True)


def test_jpeg_round_trip_keeps_size_aspect_and_colour() -> None:
    image = np.zeros((720, 1280, 3), np.uint8)
    image[:, :640] = (220, 30, 30)  # red left half (RGB)
    image[:, 640:] = (30, 30, 220)  # blue right half
    jpeg = encode_jpeg(image, 448, 70)
    assert jpeg[:2] == b"\xff\xd8"
    decoded = cv2.cvtColor(cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR),
                           cv2.COLOR_BGR2RGB)
    assert decoded.shape == (252, 448, 3)
    left, right = decoded[:, :200].reshape(-1, 3).mean(0), decoded[:, 248:].reshape(-1, 3).mean(0)
    assert np.allclose(left, (220, 30, 30), atol=12)
    assert np.allclose(right, (30, 30, 220), atol=12)
    # never upscaled: a small frame keeps its size at the sharp size
    small = cv2.imdecode(np.frombuffer(encode_jpeg(image[:120, :160], 896, 70), np.uint8),
                         cv2.IMREAD_COLOR)
    assert small.shape == (120, 160, 3)
    url = data_url(jpeg)
    assert url.startswith("data:image/jpeg;base64,/9j/")


def test_fit_long_side() -> None:
    assert fit_long_side(640, 480, 448) == (448, 336)
    assert fit_long_side(480, 640, 448) == (336, 448)
    assert fit_long_side(320, 240, 448) == (320, 240)


@pytest.mark.parametrize("text", [
    "What is this?", "what's this", "Whats THIS!", "What\u2019s that over there",
    "Can you see my cat?", "what do you see", "Look!", "look at this", "read this please",
    "What am I holding?", "let me show you something", "How many fingers am I holding up",
])
def test_asks_to_look_positive(text: str) -> None:
    assert asks_to_look(text)


@pytest.mark.parametrize("text", [
    "", "hello there", "it looks like rain", "I overlooked it", "what is the time",
    "I'll see you tomorrow", "she reads a lot", "the TV showed it",
])
def test_asks_to_look_negative(text: str) -> None:
    assert not asks_to_look(text)


def test_asks_to_look_other_languages() -> None:
    assert asks_to_look("Was ist das?", "de")
    assert asks_to_look("¿Qué es esto?", "es-ES")
    assert asks_to_look("Qu'est-ce que c'est ?", "fr")
    assert not asks_to_look("what is this", "ja")  # no entries: False
    assert not asks_to_look("Was ist das?", "en")
    assert all(p == p.lower() for p in LOOK_WORDS)


def test_settings_validate() -> None:
    with pytest.raises(ValueError):
        FramePolicySettings(quiet_fps=2.0, speaking_fps=1.0)
    with pytest.raises(ValueError):
        FramePolicySettings(sharp_size=100)
    with pytest.raises(ValueError):
        FramePolicySettings(jpeg_quality=0)
    with pytest.raises(ValueError):
        FramePolicySettings(max_images=0)
