"""Egress: engine audio (24 kHz, any chunk size) -> 20 ms 48 kHz frames -> jitter buffer.

``AudioEgress`` is the synchronous core (convert, cut, queue); ``write`` is its thin async
wrapper that waits while the jitter buffer is full (back-pressure to the engine event pump).
"""

from __future__ import annotations

import asyncio

import numpy as np

from media.jitter_buffer import JitterBuffer
from media.resample import Int16Array, StreamConverter
from media.timebase import WIRE_FRAME_SAMPLES, WIRE_RATE_HZ


class AudioEgress:
    def __init__(self, jitter: JitterBuffer) -> None:
        self.jitter = jitter
        self._space = asyncio.Event()
        jitter.on_space = self._space.set
        self._converter = StreamConverter(WIRE_RATE_HZ)
        self._partial = np.zeros(0, dtype=np.int16)
        self.refused_frames = 0

    def _cut(self, wire: Int16Array) -> list[Int16Array]:
        data = np.concatenate([self._partial, wire]) if len(self._partial) else wire
        whole = len(data) // WIRE_FRAME_SAMPLES * WIRE_FRAME_SAMPLES
        self._partial = data[whole:].copy()
        return [data[i:i + WIRE_FRAME_SAMPLES] for i in range(0, whole, WIRE_FRAME_SAMPLES)]

    def convert(self, samples: Int16Array, rate_hz: int) -> list[Int16Array]:
        """Convert and cut; returns whole wire frames (the remainder is kept)."""
        return self._cut(self._converter.convert(samples, rate_hz))

    async def write(self, samples: Int16Array, rate_hz: int) -> None:
        """Queue engine audio, waiting while the jitter buffer is full."""
        for frame in self.convert(samples, rate_hz):
            while not self.jitter.push(frame):
                self._space.clear()
                await self._space.wait()

    def end_utterance(self) -> None:
        """Flush the resampler and the partial frame (zero padded), then mark the end."""
        tail = self._cut(self._converter.flush())
        if len(self._partial):
            pad = np.zeros(WIRE_FRAME_SAMPLES, dtype=np.int16)
            pad[:len(self._partial)] = self._partial
            tail.append(pad)
            self._partial = np.zeros(0, dtype=np.int16)
        for frame in tail:
            if not self.jitter.push(frame):
                self.refused_frames += 1
        self.jitter.mark_end()

    def flush(self) -> int:
        """Barge-in: drop queued and partial audio at once."""
        self._converter.reset()
        self._partial = np.zeros(0, dtype=np.int16)
        return self.jitter.flush()
