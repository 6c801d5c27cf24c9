"""Bounded ring of 80 ms input audio frames on the session's sample clock.

Synchronous and I/O free. Samples are written as they arrive (any chunk size) and cut into
frames of exactly ``INPUT_FRAME_SAMPLES``; frame ``k`` covers samples ``[k*1280, (k+1)*1280)``
of the session clock, so its pts is ``k * 1280`` in ``1/16000`` time base.

Samples that stand in for audio that never came (ingest's silence over a gap in the pts:
``write(..., filled=True)``) are counted per frame (``AudioUnitFrame.filled``), so a consumer
can tell a loss burst from the caller going quiet (the turn detector does not end a turn on
filled audio).

Overflow policy: the network cannot be paused, so when the consumer falls more than
``capacity_frames`` behind, the *oldest* whole frames are dropped (``dropped_frames`` counts
them) and the consumer resumes on recent audio.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from omnicall.media.resample import Int16Array
from omnicall.media.timebase import INPUT_FRAME_SAMPLES, INPUT_RATE_HZ, time_base_for_rate


class OnFrameGrid:
    """Mixin for things stamped with the index of their 80 ms frame on the session clock."""

    __slots__ = ()
    index: int

    @property
    def pts(self) -> int:
        return self.index * INPUT_FRAME_SAMPLES

    @property
    def time_base(self) -> Fraction:
        return time_base_for_rate(INPUT_RATE_HZ)


@dataclass(frozen=True, slots=True)
class AudioUnitFrame(OnFrameGrid):
    """One 80 ms frame of 16 kHz mono audio."""

    index: int
    samples: Int16Array
    filled: int = 0  # of its samples, how many fill a gap (no audio came for them)


class AudioRing:
    def __init__(self, capacity_frames: int = 25, *,
                 clean: Callable[[Int16Array], Int16Array] | None = None) -> None:
        """``clean``: each frame's samples pass through it as the frame is formed, before any
        reader sees it (the call's echo canceller and noise suppressor; same length back)."""
        if capacity_frames < 1:
            raise ValueError("capacity_frames must be >= 1")
        self.capacity_frames = capacity_frames
        self._frames: deque[AudioUnitFrame] = deque()
        self._partial = np.zeros(INPUT_FRAME_SAMPLES, dtype=np.int16)
        self._partial_len = 0
        self._partial_filled = 0
        self._ahead_taken = 0  # of the partial frame's samples, how many ahead() gave
        self._clean = clean
        self._next_index = 0
        self.samples_written = 0
        self.dropped_frames = 0

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def clock_samples(self) -> int:
        """Samples written so far: the session's audio clock in 1/16000 s ticks."""
        return self.samples_written

    def write(self, samples: Int16Array, filled: bool = False) -> int:
        """Append samples (``filled``: they fill a gap, no audio came for them); returns how
        many complete frames became available."""
        made = 0
        pos = 0
        total = len(samples)
        while pos < total:
            take = min(INPUT_FRAME_SAMPLES - self._partial_len, total - pos)
            self._partial[self._partial_len:self._partial_len + take] = samples[pos:pos + take]
            self._partial_len += take
            self._partial_filled += take if filled else 0
            pos += take
            if self._partial_len == INPUT_FRAME_SAMPLES:
                frame = self._partial.copy()
                if self._clean is not None:
                    frame = self._clean(frame)
                    assert len(frame) == INPUT_FRAME_SAMPLES
                self._push(AudioUnitFrame(self._next_index, frame, self._partial_filled))
                self._next_index += 1
                self._partial_len = self._partial_filled = self._ahead_taken = 0
                made += 1
        self.samples_written += total
        return made

    def ahead(self) -> tuple[int, int, Int16Array] | None:
        """The samples of the frame being formed that came since the last call: its index,
        their offset in it, and a copy of them, as they came (before ``clean``); None when
        none came or any of the frame fills a gap (a loss burst is told apart only in the
        whole frame). For a reader that cannot wait for the whole frame (the listener's
        VAD, :mod:`omnicall.engine.conversation.listener`)."""
        start, end = self._ahead_taken, self._partial_len
        if end <= start or self._partial_filled:
            return None
        self._ahead_taken = end
        return self._next_index, start, self._partial[start:end].copy()

    def _push(self, frame: AudioUnitFrame) -> None:
        if len(self._frames) >= self.capacity_frames:
            self._frames.popleft()
            self.dropped_frames += 1
        self._frames.append(frame)

    def read(self) -> AudioUnitFrame | None:
        return self._frames.popleft() if self._frames else None

    def clear(self) -> None:
        self._frames.clear()
