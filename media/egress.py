"""Egress: engine audio (24 kHz, any chunk size) -> 20 ms 48 kHz frames -> playout queue.

``AudioEgress`` is the synchronous core (convert, cut, queue); ``write`` is its thin async
wrapper that waits while the playout queue is full (back-pressure to the reply's maker,
through its sound handle).

Each write names the reply its audio belongs to (``turn_id``; None: no reply), and every
frame cut from that reply's samples carries a :class:`~omnicall.media.playout.FrameTag` of it, so
the playout meter learns what of each reply left. The resampler's held samples and the partial
frame belong to the reply they were cut from: a write of another reply first closes the
previous one (its held samples and zero-padded partial frame are queued as its last frame),
just as :meth:`AudioEgress.end_utterance` does, minus the end of playback. A flush (barge-in)
marks the replies it cut interrupted in the meter: those with frames queued and the one
being written, unless its end was already played. :meth:`AudioEgress.stop` is a barge-in on
one reply (from :meth:`omnicall.media.call_output.CallOutput.stop`): it flushes that reply
when it is queued or being written.
"""

from __future__ import annotations

import logging

import numpy as np

from omnicall.media.playout import FrameTag, PlayoutMeter
from omnicall.media.playout_queue import PlayoutQueue
from omnicall.media.resample import Int16Array, StreamConverter
from omnicall.media.timebase import OPUS_FRAME_SAMPLES, OPUS_RATE_HZ

logger = logging.getLogger(__name__)

Tagged = tuple[Int16Array, FrameTag | None]


class AudioEgress:
    def __init__(self, queue: PlayoutQueue, meter: PlayoutMeter | None = None) -> None:
        self.queue = queue
        self.meter = meter
        self._converter = StreamConverter(OPUS_RATE_HZ)
        self._partial = np.zeros(0, dtype=np.int16)
        self.abandoned_frames = 0  # a write's frames that a flush overtook while it waited
        self._turn_id: int | None = None  # the reply whose samples are being cut
        self._open = False  # written to since its end or the last flush
        self._flushes = 0

    def _cut(self, wire: Int16Array) -> list[Int16Array]:
        data = np.concatenate([self._partial, wire]) if len(self._partial) else wire
        whole = len(data) // OPUS_FRAME_SAMPLES * OPUS_FRAME_SAMPLES
        self._partial = data[whole:].copy()
        return [data[i:i + OPUS_FRAME_SAMPLES] for i in range(0, whole, OPUS_FRAME_SAMPLES)]

    def convert(self, samples: Int16Array, rate_hz: int) -> list[Int16Array]:
        """Convert and cut; returns whole wire frames (the remainder is kept)."""
        return self._cut(self._converter.convert(samples, rate_hz))

    def _tag(self, samples: int = OPUS_FRAME_SAMPLES) -> FrameTag | None:
        return None if self._turn_id is None else FrameTag(self._turn_id, samples)

    def _tail(self) -> list[Tagged]:
        """The resampler's held samples and the partial frame (zero padded), tagged."""
        tail: list[Tagged] = [(f, self._tag()) for f in self._cut(self._converter.flush())]
        if len(self._partial):
            pad = np.zeros(OPUS_FRAME_SAMPLES, dtype=np.int16)
            pad[:len(self._partial)] = self._partial
            tail.append((pad, self._tag(len(self._partial))))
            self._partial = np.zeros(0, dtype=np.int16)
        return tail

    def _close_reply(self) -> None:
        """The open reply has nothing more to queue: tag its newest queued frame as its
        last, or, with none of it queued, tell the meter its end already left."""
        self._open = False
        if self._turn_id is not None and not self.queue.mark_last(self._turn_id) \
                and self.meter is not None:
            self.meter.ended(self._turn_id)

    async def _push(self, frames: list[Tagged], flushes: int) -> bool:
        """Queue ``frames``, waiting while full; ``False`` when a flush came meanwhile (the
        frames not yet queued are dropped with the rest)."""
        for i, (frame, tag) in enumerate(frames):
            while not self.queue.push(frame, tag):
                self.queue.space.clear()
                await self.queue.space.wait()
                if self._flushes != flushes:
                    self.abandoned_frames += len(frames) - i
                    return False
        return True

    async def write(self, samples: Int16Array, rate_hz: int, turn_id: int | None = None) -> None:
        """Queue engine audio of reply ``turn_id``, waiting while the playout queue is full.
        A flush while it waits drops the rest of this audio (it was meant to be cut)."""
        flushes = self._flushes
        if turn_id != self._turn_id:
            if self._open:  # the previous reply runs into this one without an end
                if not await self._push(self._tail(), flushes):
                    return
                self._close_reply()
            self._turn_id = turn_id
        self._open = True
        await self._push([(f, self._tag()) for f in self.convert(samples, rate_hz)], flushes)

    def end_utterance(self) -> None:
        """Flush the resampler and the partial frame (zero padded), then mark the end."""
        for frame, tag in self._tail():
            self.queue.push(frame, tag)  # a full queue refuses it (its overflow policy)
        if self._open:
            self._close_reply()
        self.queue.mark_end()

    def stop(self, turn_id: int) -> None:
        """An engine stopped reply ``turn_id`` (barge-in): flush it when it is queued or
        being written. Another reply's audio is kept."""
        if turn_id in self.queue.queued_turns() or (self._open and self._turn_id == turn_id):
            logger.debug("stopping reply %d: its queued audio is dropped", turn_id)
            self.flush()

    def flush(self) -> int:
        """Barge-in: drop queued and partial audio at once; the replies cut are marked
        interrupted in the meter."""
        self._flushes += 1
        cut = self.queue.queued_turns()
        if self._open and self._turn_id is not None and self._turn_id not in cut:
            cut.append(self._turn_id)
        self._open = False
        self._converter.reset()
        self._partial = np.zeros(0, dtype=np.int16)
        dropped = self.queue.flush()
        if self.meter is not None:
            for turn_id in cut:
                self.meter.interrupted(turn_id)
        return dropped
