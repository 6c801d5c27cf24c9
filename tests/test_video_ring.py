import itertools
from fractions import Fraction

import numpy as np
import pytest

from omnicall.media.video_ring import VideoRing, VideoSampler, VideoUnitFrame, audio_index_for


def unit(index: int) -> VideoUnitFrame:
    return VideoUnitFrame(index, index, Fraction(1, 90_000), np.zeros((2, 2, 3), np.uint8))


def test_sampler_keeps_fps_without_bursting() -> None:
    sampler = VideoSampler(fps=2)
    kept = [t for t in range(0, 300) if sampler.want(Fraction(t, 30))]  # 10 s at 30 fps
    assert len(kept) == 20
    assert all(b - a == 15 for a, b in itertools.pairwise(kept))
    # after a 5 s pause the next frame is kept once, not five times
    assert sampler.want(Fraction(15))
    assert not sampler.want(Fraction(15) + Fraction(1, 30))


def test_sampler_validates() -> None:
    with pytest.raises(ValueError):
        VideoSampler(0)


def test_latest_only_ring() -> None:
    ring = VideoRing(depth=3)
    for i in range(5):
        ring.push(unit(i))
    assert len(ring) == 3 and ring.dropped_frames == 2
    got = ring.take_up_to(3)
    assert got is not None and got.audio_index == 3
    assert len(ring) == 1
    assert ring.take_up_to(3) is None


def test_audio_index_for_media_time() -> None:
    assert audio_index_for(Fraction(0)) == 0
    assert audio_index_for(Fraction(79, 1000)) == 0
    assert audio_index_for(Fraction(80, 1000)) == 1
    assert audio_index_for(Fraction(1)) == 12
