import numpy as np
import pytest

from omnicall.media.audio_ring import AudioRing


def test_cuts_any_chunking_into_exact_80ms_frames() -> None:
    ring = AudioRing(capacity_frames=100)
    data = np.arange(1280 * 5, dtype=np.int64).astype(np.int16)
    pos = 0
    for size in [304, 320, 1, 999, 2000, 1280, 1496]:
        ring.write(data[pos:pos + size])
        pos += size
    assert pos == len(data)
    frames = [ring.read() for _ in range(5)]
    assert ring.read() is None
    assert [f.index for f in frames if f] == [0, 1, 2, 3, 4]
    assert np.array_equal(np.concatenate([f.samples for f in frames if f]), data)
    assert frames[3] is not None and frames[3].pts == 3 * 1280


def test_overflow_drops_oldest_and_counts() -> None:
    ring = AudioRing(capacity_frames=4)
    ring.write(np.zeros(1280 * 2, np.int16))
    assert len(ring) == 2 and ring.dropped_frames == 0
    ring.write(np.zeros(1280 * 4, np.int16))
    assert len(ring) == 4 and ring.dropped_frames == 2
    first = ring.read()
    assert first is not None and first.index == 2
    assert ring.clock_samples == 1280 * 6


def test_bad_capacity() -> None:
    with pytest.raises(ValueError):
        AudioRing(capacity_frames=0)


def test_filled_samples_are_counted_per_frame() -> None:
    from omnicall.media.aligner import Aligner
    from omnicall.media.video_ring import VideoRing

    ring = AudioRing()
    ring.write(np.ones(1000, np.int16))
    ring.write(np.zeros(2000, np.int16), filled=True)  # a gap: 280 in frame 0, 1280 in 1
    ring.write(np.ones(840, np.int16))
    frames = [ring.read(), ring.read(), ring.read()]
    assert [f.filled for f in frames if f is not None] == [280, 1280, 440]
    ring.write(np.ones(1280, np.int16))
    unit = Aligner(ring, VideoRing()).next_unit()
    assert unit is not None and unit.filled == 0
    ring.write(np.zeros(1280, np.int16), filled=True)
    unit = Aligner(ring, VideoRing()).next_unit()
    assert unit is not None and unit.filled == 1280
