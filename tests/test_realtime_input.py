"""A Realtime client's audio and images through the media plane's ring and aligner: every
sample reaches the engine in 80 ms units, in order, with back-pressure and nothing dropped."""

from __future__ import annotations

import base64

import cv2
import numpy as np
import pytest

from omnicall.app.realtime.input import (
    MAX_IMAGE_BYTES,
    MAX_IMAGE_ITEMS,
    RealtimeInput,
    decode_image,
    offer_units,
)
from omnicall.engine import realtime as rt
from omnicall.media.aligner import MediaUnit
from omnicall.media.timebase import INPUT_FRAME_SAMPLES
from tests.utils import tone

FRAME_24K = 1920  # one 80 ms frame at the wire rate


class TickingClock:
    """Each reading is ``step_s`` later than the last (a deadline passes without waiting)."""

    def __init__(self, step_s: float) -> None:
        self.t = 0.0
        self.step_s = step_s

    def now(self) -> float:
        self.t += self.step_s
        return self.t

    async def sleep(self, seconds: float) -> None:
        return None


def image(value: int = 200) -> np.ndarray:
    return np.full((4, 4, 3), value, np.uint8)


def drain(source: RealtimeInput) -> list[MediaUnit]:
    units = []
    while (unit := source.next_unit()) is not None:
        units.append(unit)
        source.taken()
    return units


def test_audio_is_cut_into_80_ms_units_on_the_16_khz_clock() -> None:
    source = RealtimeInput()
    source.add_audio(tone(300, 1.0, rate=24_000))
    assert source.audio_ms == pytest.approx(1000.0)
    units = drain(source)
    assert [u.index for u in units] == list(range(len(units)))
    assert all(len(u.audio) == INPUT_FRAME_SAMPLES and u.audio.dtype == np.int16
               for u in units)
    assert 11 <= len(units) <= 12  # 16000 samples, less the resampler's delay
    assert source.units_taken == len(units) and source.next_unit() is None


def test_a_long_append_never_overflows_the_ring() -> None:
    source = RealtimeInput()
    source.add_audio(tone(300, 6.0, rate=24_000))  # 75 frames: three times the ring
    assert source.frames_waiting() >= 74
    units = drain(source)
    assert len(units) >= 74 and source.ring.dropped_frames == 0
    assert [u.index for u in units] == list(range(len(units)))
    assert source.frames_waiting() == 0


def test_an_image_goes_with_the_next_unit_once_and_the_latest_wins() -> None:
    source = RealtimeInput()
    source.add_audio(tone(300, 0.3, rate=24_000))
    before = drain(source)
    source.add_image(image(10))
    source.add_image(image(20))  # replaces the first (latest-only ring)
    source.add_audio(tone(300, 0.3, rate=24_000))
    after = drain(source)
    assert all(u.video is None for u in before)
    assert after[0].video is not None and int(after[0].video.image[0, 0, 0]) == 20
    assert after[0].video.audio_index == after[0].index
    assert all(u.video is None for u in after[1:])
    assert source.images == 2 and source.video.dropped_frames == 1


async def test_back_pressure_waits_and_delivers_every_unit() -> None:
    source = RealtimeInput()
    source.add_audio(tone(300, 0.5, rate=24_000))
    refusals = iter([False, False, True, False, True])
    taken: list[MediaUnit] = []

    def push(unit: MediaUnit) -> bool:
        if next(refusals, True):
            taken.append(unit)
            return True
        return False

    await offer_units(source, push, TickingClock(0.001))
    assert [u.index for u in taken] == list(range(len(taken))) and len(taken) >= 5


async def test_an_engine_that_never_takes_input_refuses_the_append_and_keeps_the_unit() -> None:
    source = RealtimeInput()
    source.add_audio(tone(300, 0.2, rate=24_000))
    offered: list[int] = []

    def refuse(unit: MediaUnit) -> bool:
        offered.append(unit.index)
        return False

    with pytest.raises(rt.ProtocolError, match="not keeping up"):
        await offer_units(source, refuse, TickingClock(1.0), wait_s=3.0)
    assert set(offered) == {0}
    taken: list[int] = []
    await offer_units(source, lambda u: taken.append(u.index) is None, TickingClock(1.0))
    assert taken[0] == 0  # offered again, nothing lost


def test_clear_drops_what_waits_and_moves_the_clock_to_the_next_frame() -> None:
    source = RealtimeInput()
    source.add_audio(tone(300, 0.1, rate=24_000))  # one unit and a part of the next
    first = drain(source)
    source.add_audio(tone(300, 0.5, rate=24_000))
    source.add_image(image())
    source.clear()
    assert source.frames_waiting() == 0 and source.next_unit() is None
    assert source.ring.clock_samples % INPUT_FRAME_SAMPLES == 0
    source.add_audio(tone(300, 0.2, rate=24_000))
    after = drain(source)
    assert after and after[0].index > first[-1].index
    assert after[0].video is not None  # the image waited for the next unit
    assert source.audio_ms == pytest.approx(800.0)  # received audio is still counted


def test_a_deleted_image_item_that_waits_never_reaches_the_engine() -> None:
    source = RealtimeInput()
    source.add_audio(tone(300, 0.3, rate=24_000))
    drain(source)
    source.add_image(image(10), "img_a")
    assert source.delete_image("img_a")  # still in the ring: dropped from it
    assert not source.delete_image("img_a")  # gone: a second delete knows no such item
    source.add_audio(tone(300, 0.3, rate=24_000))
    assert all(u.video is None for u in drain(source))
    assert source.images == 1 and source.images_deleted == 1 and not source.image_items


def test_a_deleted_image_leaves_the_unit_offered_and_not_yet_taken() -> None:
    source = RealtimeInput()
    source.add_image(image(10), "img_a")
    source.add_audio(tone(300, 0.3, rate=24_000))
    offered = source.next_unit()
    assert offered is not None and offered.video is not None  # the engine refused it so far
    assert source.delete_image("img_a")
    again = source.next_unit()  # offered again, without the image
    assert again is not None and again.index == offered.index and again.video is None
    np.testing.assert_array_equal(again.audio, offered.audio)  # the audio is untouched


def test_an_image_the_engine_took_is_forgotten_here_when_deleted() -> None:
    source = RealtimeInput()
    source.add_image(image(10), "img_a")
    source.add_audio(tone(300, 0.3, rate=24_000))
    units = drain(source)
    assert units[0].video is not None  # the engine has had it as a video frame
    source.add_image(image(20), "img_b")  # waits for the next unit
    assert source.delete_image("img_a")  # a delivered one: only its id was kept
    source.add_audio(tone(300, 0.3, rate=24_000))
    after = drain(source)
    assert after[0].video is not None and int(after[0].video.image[0, 0, 0]) == 20
    assert list(source.image_items) == ["img_b"]


def test_thousands_of_image_items_keep_a_bounded_memory() -> None:
    source = RealtimeInput()
    for n in range(5000):
        source.add_image(image(n % 256), source.new_image_item(f"img_{n}"))
        if n % 50 == 0:
            source.add_audio(tone(300, 0.08, rate=24_000))
            drain(source)
    assert source.images == 5000
    assert len(source.image_items) == MAX_IMAGE_ITEMS  # ids only, the newest
    assert len(source.video) <= 1  # pixels: the one image still waiting
    assert not source.delete_image("img_0")  # forgotten long ago
    assert source.delete_image("img_4999")
    assert source.new_image_item(None) not in source.image_items  # a new id is made


@pytest.mark.parametrize("item_id,fragment", [("img_1", "already exists"),
                                              ("x" * 65, "at most 64")])
def test_an_image_item_id_must_be_new_and_short(item_id: str, fragment: str) -> None:
    source = RealtimeInput()
    source.add_image(image(), "img_1")
    with pytest.raises(rt.ProtocolError, match=fragment):
        source.new_image_item(item_id)


def data_url(raw: bytes, kind: str = "png") -> str:
    return f"data:image/{kind};base64," + base64.b64encode(raw).decode()


def test_decode_image_resizes_to_rgb() -> None:
    bgr = np.zeros((30, 40, 3), np.uint8)
    bgr[..., 2] = 255  # red in OpenCV's BGR
    ok, png = cv2.imencode(".png", bgr)
    assert ok
    rgb = decode_image(data_url(png.tobytes()), (64, 48))
    assert rgb.shape == (48, 64, 3) and rgb.flags["C_CONTIGUOUS"]
    assert tuple(int(v) for v in rgb[10, 10]) == (255, 0, 0)


@pytest.mark.parametrize(("url", "fragment"), [
    ("data:image/png;base64,%%%", "base64 data URL"),
    ("data:image/png;base64,", "1 byte"),
    (data_url(b"\x00" * (MAX_IMAGE_BYTES + 1)), "1 byte"),
    (data_url(b"not an image at all"), "not a JPEG or PNG"),
])
def test_decode_image_refuses_what_is_not_an_image(url: str, fragment: str) -> None:
    with pytest.raises(rt.ProtocolError, match=fragment):
        decode_image(url, (64, 48))
