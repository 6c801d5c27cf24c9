"""Loopback engine: returns the user's audio one 80 ms frame later, at 24 kHz.

For tests and the pipeline-latency benchmark only - never a default. It exercises the whole
pipeline (rings, alignment, the worker thread, egress conversion, playout queue, pacing) with
no model in the way, so what it measures is the pipeline itself.
"""

from __future__ import annotations

import logging

from omnicall.engine.base import Engine, EngineSession, SessionOptions
from omnicall.engine.conversation.reply_gate import open_sound
from omnicall.engine.events import TurnEvent
from omnicall.engine.queued_session import QueuedEngineSession
from omnicall.engine.worker import ModelWorker
from omnicall.media.playout import ReplySound
from omnicall.media.resample import Int16Array, StreamConverter
from omnicall.media.timebase import INPUT_RATE_HZ, OUTPUT_RATE_HZ

logger = logging.getLogger(__name__)


class LoopbackSession(QueuedEngineSession):
    def __init__(self, session_id: str, options: SessionOptions, worker: ModelWorker) -> None:
        self._worker = worker
        self._converter = StreamConverter(OUTPUT_RATE_HZ)
        self.video_units = 0
        self.interrupts = 0
        self._sound: ReplySound | None = None
        super().__init__(session_id, options)

    def _to_output_rate(self, samples: Int16Array) -> Int16Array:
        return self._converter.convert(samples, INPUT_RATE_HZ)

    async def process(self) -> None:
        await self.emit(TurnEvent("assistant", "start", self.state.turn_id))
        # one reply that never ends: the call's sound handle (or the session's events)
        self._sound = open_sound(self.state.turn_id, self.emit, self.options.playout)
        while True:
            unit = await self.next_unit()
            if unit.video is not None:
                self.video_units += 1
            out = await self._worker.run(self._to_output_rate, unit.audio,
                                         session=self.session_id)
            if len(out):
                await self._sound.write(out, OUTPUT_RATE_HZ)

    def interrupt(self) -> None:
        """The page's stop: what is queued is dropped and the sound stops; the next frames
        play again."""
        self.interrupts += 1
        self.flush_queues()
        self._converter.reset()
        if self._sound is not None:
            self._sound.stop()
            self._sound = open_sound(self.state.turn_id, self.emit, self.options.playout)


class LoopbackEngine(Engine):
    name = "loopback"
    realtime_output = True

    def __init__(self) -> None:
        self._worker = ModelWorker("loopback", max_pending=256)

    async def start(self) -> None:
        logger.info("loopback engine ready (test/benchmark engine: it only repeats the caller)")

    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession:
        return LoopbackSession(session_id, options, self._worker)

    def queue_depths(self) -> dict[str, int]:
        return {"loopback": self._worker.pending}

    async def close(self) -> None:
        self._worker.close()
