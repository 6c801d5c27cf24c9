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


def test_ahead_gives_the_forming_frames_new_samples_once_and_not_a_gap() -> None:
    """The listener's early look at the frame being formed: each call gives what came since
    the last (its frame's index, offset, a copy), nothing twice, and nothing of a frame
    that fills a gap (only the whole frame tells a loss burst from quiet)."""
    ring = AudioRing()
    assert ring.ahead() is None
    ring.write(np.arange(320, dtype=np.int16))
    index, offset, samples = ring.ahead() or (-1, -1, np.zeros(0, np.int16))
    assert (index, offset) == (0, 0) and np.array_equal(samples, np.arange(320))
    assert ring.ahead() is None  # nothing new
    ring.write(np.full(1280, 7, np.int16))  # completes frame 0, 320 into frame 1
    got = ring.ahead()
    assert got is not None and got[:2] == (1, 0) and len(got[2]) == 320
    assert np.array_equal(ring.read().samples[320:], np.full(960, 7))  # type: ignore[union-attr]
    ring.write(np.zeros(160, np.int16), filled=True)
    assert ring.ahead() is None  # frame 1 fills a gap: told only as a whole
    ring.write(np.zeros(800, np.int16))  # frame 1 complete; frame 2 starts clean
    ring.write(np.ones(100, np.int16))
    got = ring.ahead()
    assert got is not None and got[:2] == (2, 0) and len(got[2]) == 100
