"""Video sampled onto the audio clock: a rate sampler and a latest-only bounded ring.

Synchronous and I/O free. A video frame at media time ``t`` belongs to audio frame
``floor(t / 80 ms)``; the sampler keeps at most ``fps`` frames per second of media time
(default 2) and the ring keeps only the newest ``depth`` of them (older ones are dropped and
counted: for vision the latest frame is what matters).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from omnicall.media.timebase import frame_index

RgbImage = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class VideoUnitFrame:
    """One sampled RGB video frame, stamped with the audio frame index it belongs to."""

    audio_index: int
    pts: int
    time_base: Fraction
    image: RgbImage  # H x W x 3, uint8


class VideoSampler:
    """Decides which incoming frames to keep so that at most ``fps`` are kept per second."""

    def __init__(self, fps: float = 2.0) -> None:
        if not 0 < fps <= 30:
            raise ValueError(f"video fps must be in (0, 30], got {fps}")
        self.interval = Fraction(1) / Fraction(fps).limit_denominator(1000)
        self._next_due: Fraction | None = None

    def want(self, media_time: Fraction) -> bool:
        if self._next_due is None or media_time >= self._next_due:
            due = media_time if self._next_due is None else self._next_due
            # Skip whole intervals if frames stopped for a while, never burst to catch up.
            while due <= media_time:
                due += self.interval
            self._next_due = due
            return True
        return False


class VideoRing:
    """Latest-only bounded ring of sampled frames."""

    def __init__(self, depth: int = 8) -> None:
        if not 1 <= depth <= 64:
            raise ValueError("video ring depth must be in [1, 64]")
        self._frames: deque[VideoUnitFrame] = deque(maxlen=depth)
        self.dropped_frames = 0
        self.depth = depth

    def __len__(self) -> int:
        return len(self._frames)

    def push(self, frame: VideoUnitFrame) -> None:
        if len(self._frames) == self.depth:
            self.dropped_frames += 1
        self._frames.append(frame)

    def take_up_to(self, audio_index: int) -> VideoUnitFrame | None:
        """Remove frames belonging to audio frames <= ``audio_index``; return the newest."""
        found: VideoUnitFrame | None = None
        while self._frames and self._frames[0].audio_index <= audio_index:
            found = self._frames.popleft()
        return found

    def clear(self) -> None:
        self._frames.clear()


def audio_index_for(media_time: Fraction) -> int:
    """Audio frame index of a media time in seconds (exact)."""
    return frame_index(media_time.numerator, Fraction(1, media_time.denominator))
