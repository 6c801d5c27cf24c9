"""The call's outgoing playout queue: the assistant's 20 ms, 48 kHz mono frames waiting for
the paced track.

Synchronous and I/O free; the egress pushes, the paced track pops one frame per 20 ms tick.

- Start-up: playback starts once ``target_frames`` are queued (default 2 = 40 ms), or at once
  when the producer marks the end of an utterance that is shorter than that.
- Running dry mid-utterance is an *underrun* (counted) and re-buffers to the target.
  Draining after ``mark_end()`` is the normal end of an utterance, not an underrun.
- Bounded, with two overflow policies. Generated-ahead replies: ``push`` refuses frames
  beyond ``capacity_frames`` (back-pressure: the producer waits for :attr:`space`). Live
  streams (``max_latency_frames`` set): the oldest frames are dropped instead (counted in
  ``dropped_frames``), so the queue never holds more than that.
- Live streams are also trimmed: if the queue never ran empty during the last
  ``trim_window_frames`` pops, that standing excess is dropped from the head (counted in
  ``trimmed_frames``), so a burst or a stall never becomes permanent added delay. (The
  producer is the engine on this server, not the network - the browser's own jitter buffer
  handles the network - so the only jitter here is thread scheduling, which the paced track
  absorbs by slipping its phase a few ms; see :mod:`omnicall.media.paced_track`.)
- ``flush()`` empties everything at once (barge-in).
- Each frame may carry a :class:`~omnicall.media.playout.FrameTag` naming the reply it belongs
  to (``push(frame, tag)``, ``pop_tagged()``); the tag travels with its frame through every
  path above. Frames dropped or trimmed were never sent: their tags go to the playout meter
  (``meter.discarded``), never to the consumer. ``queued_turns()`` and ``mark_last()`` let
  the egress tell the meter which replies a flush cut and where a reply ends.

The two sides wait on the queue, not on each other: the producer on :attr:`space` (set when a
full queue gets room again, and at a flush), the paced track on :attr:`arrived` (set at every
accepted frame). With a ``clock``, the queue also dates the first frame of each burst (pushed
into an empty queue, :meth:`take_burst_start`): the paced track moves its schedule towards it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import replace

from omnicall.media.playout import FrameTag, PlayoutMeter, TimeSource
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import OPUS_FRAME_SAMPLES


class PlayoutQueue:
    def __init__(self, target_frames: int = 2, capacity_frames: int = 1500,
                 max_latency_frames: int | None = None, trim_window_frames: int = 50,
                 meter: PlayoutMeter | None = None, clock: TimeSource | None = None) -> None:
        """``meter``: told of each tagged frame dropped or trimmed (never sent); ``clock``:
        dates each burst's first frame (None: bursts are not dated)."""
        if target_frames < 1:
            raise ValueError("target_frames must be >= 1")
        if capacity_frames < target_frames:
            raise ValueError("capacity_frames must be >= target_frames")
        if max_latency_frames is not None and max_latency_frames < target_frames:
            raise ValueError("max_latency_frames must be >= target_frames")
        self.target_frames = target_frames
        self.capacity_frames = capacity_frames
        self.max_latency_frames = max_latency_frames
        self._frames: deque[Int16Array] = deque()
        self._tags: deque[FrameTag | None] = deque()  # parallel to _frames
        self._playing = False
        self._ended = False
        self.underruns = 0
        self.dropped_frames = 0
        self.flushed_frames = 0
        self.played_frames = 0
        self.trimmed_frames = 0
        self.trim_window_frames = trim_window_frames
        self._window_min = capacity_frames
        self._window_pops = 0
        self._meter = meter
        self._clock = clock
        self._burst_at: float | None = None  # when the queued burst's first frame arrived
        #: set when a full queue gets room again, and at a flush (the producer waits on it)
        self.space = asyncio.Event()
        #: set at every accepted frame (the paced track's phase slip waits on it)
        self.arrived = asyncio.Event()

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def has_space(self) -> bool:
        return len(self._frames) < self.capacity_frames

    @property
    def starving(self) -> bool:
        """Playing mid-utterance with nothing queued: the next pop would underrun."""
        return self._playing and not self._frames and not self._ended

    def push(self, samples: Int16Array, tag: FrameTag | None = None) -> bool:
        """Queue one frame (of the reply ``tag`` names; None: of no reply); ``False`` when
        full (caller must wait for ``has_space``)."""
        if len(samples) != OPUS_FRAME_SAMPLES:
            raise ValueError(f"expected {OPUS_FRAME_SAMPLES} samples, got {len(samples)}")
        if self.max_latency_frames is not None:
            while len(self._frames) >= self.max_latency_frames:
                self._discard_head()
                self.dropped_frames += 1
        elif len(self._frames) >= self.capacity_frames:
            return False
        self._frames.append(samples)
        self._tags.append(tag)
        self._ended = False
        if len(self._frames) == 1 and self._clock is not None:
            self._burst_at = self._clock.now()
        self.arrived.set()
        if not self._playing and len(self._frames) >= self.target_frames:
            self._playing = True
        return True

    def mark_end(self) -> None:
        """The producer finished an utterance: play what is queued, then stop quietly."""
        self._ended = True
        if self._frames:
            self._playing = True

    def next_tag(self) -> FrameTag | None:
        """The tag of the frame the next pop would play (None: no frame queued, or one of no
        reply); nothing is taken."""
        return self._tags[0] if self._playing and self._tags else None

    def pop_tagged(self) -> tuple[Int16Array, FrameTag | None] | None:
        """The next frame to play with its tag, or ``None`` for silence."""
        if not self._playing:
            return None
        if self._frames:
            self.played_frames += 1
            popped = self._frames.popleft(), self._tags.popleft()
            if self.max_latency_frames is not None:
                self._trim_standing_excess()
            if len(self._frames) == self.capacity_frames - 1:
                self.space.set()
            return popped
        if not self._ended:
            self.underruns += 1
        self._playing = False
        self._window_min, self._window_pops = self.capacity_frames, 0
        return None

    def _trim_standing_excess(self) -> None:
        self._window_min = min(self._window_min, len(self._frames))
        self._window_pops += 1
        if self._window_pops < self.trim_window_frames:
            return
        excess = self._window_min
        for _ in range(excess):
            self._discard_head()
        self.trimmed_frames += excess
        self._window_min, self._window_pops = self.capacity_frames, 0

    def _discard_head(self) -> None:
        self._frames.popleft()
        tag = self._tags.popleft()
        if tag is not None and self._meter is not None:
            self._meter.discarded(tag)

    def take_burst_start(self) -> float | None:
        """When the first frame of the burst now queued was pushed into an empty queue
        (None: not dated, or already taken); each burst's start is taken once."""
        burst_at, self._burst_at = self._burst_at, None
        return burst_at

    def queued_turns(self) -> list[int]:
        """The replies with frames queued, oldest first."""
        return list(dict.fromkeys(tag.turn_id for tag in self._tags if tag is not None))

    def mark_last(self, turn_id: int) -> bool:
        """The newest queued frame is reply ``turn_id``'s last: tag it so. ``False`` when
        the newest queued frame is not of that reply (its frames all left, or none came)."""
        tag = self._tags[-1] if self._tags else None
        if tag is None or tag.turn_id != turn_id:
            return False
        self._tags[-1] = replace(tag, last=True)
        return True

    def flush(self) -> int:
        """Drop everything queued; returns how many frames were dropped."""
        n = len(self._frames)
        self.flushed_frames += n
        self._frames.clear()
        self._tags.clear()
        self._playing = False
        self._ended = False
        self.space.set()
        return n
