from fractions import Fraction

import pytest

from omnicall.media.timebase import (
    FRAME_MS,
    INPUT_FRAME_SAMPLES,
    OPUS_FRAME_SAMPLES,
    OUTPUT_FRAME_SAMPLES,
    frame_index,
    pts_to_seconds,
    rescale,
    time_base_for_rate,
)


def test_frame_sizes_of_record() -> None:
    assert FRAME_MS == 80
    assert INPUT_FRAME_SAMPLES == 1280
    assert OUTPUT_FRAME_SAMPLES == 1920
    assert OPUS_FRAME_SAMPLES == 960


def test_rescale_exact_and_rounding() -> None:
    assert rescale(48_000, Fraction(1, 48_000), Fraction(1, 16_000)) == 16_000
    assert rescale(90_000, Fraction(1, 90_000), Fraction(1, 48_000)) == 48_000
    # 1 tick of 1/48000 is 1/3 of a 1/16000 tick: rounds to 0; 2 ticks round to 1
    assert rescale(1, Fraction(1, 48_000), Fraction(1, 16_000)) == 0
    assert rescale(2, Fraction(1, 48_000), Fraction(1, 16_000)) == 1
    # halves round down so converted time never runs ahead
    assert rescale(3, Fraction(1, 2), Fraction(1)) == 1
    assert rescale(-3, Fraction(1, 48_000), Fraction(1, 16_000)) == -1


def test_pts_to_seconds() -> None:
    tb = time_base_for_rate(24_000)
    assert pts_to_seconds(1920, tb) == pytest.approx(0.08)


def test_frame_index_on_the_80ms_grid() -> None:
    tb = Fraction(1, 90_000)
    assert frame_index(0, tb) == 0
    assert frame_index(7199, tb) == 0  # 79.99 ms
    assert frame_index(7200, tb) == 1  # exactly 80 ms
    assert frame_index(1280, Fraction(1, 16_000)) == 1
    assert frame_index(1279, Fraction(1, 16_000)) == 0


def test_bad_rate() -> None:
    with pytest.raises(ValueError):
        time_base_for_rate(0)
