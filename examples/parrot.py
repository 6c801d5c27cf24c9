"""A custom engine on omnicall's conversation layer: Polly the parrot says your words back.

The engine decides only what to answer (here: the caller's own last turn, a little faster
and higher, as a parrot would). Everything about taking turns is omnicall's, the same as
the built-in engines use (``omnicall.engine.conversation``):

- :class:`Listener` hears the call: the VAD on the engine's listen worker, the turn
  detector, the end-of-turn model (``--turn-model smart``), the echo warm-up, the preroll,
  and calls this session's hooks (speech start, end of turn);
- :class:`ReplyGate` is the reply's way out: its first sound stamped, and what the caller
  heard of it, measured by the media plane; cancelling it at a barge-in stops the sound at
  once.

Run it (a page on http://127.0.0.1:8080/)::

    .venv/bin/python examples/parrot.py

or hand ``ParrotEngine()`` to ``omnicall.start(engine=...)`` / ``omnicall.run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import numpy as np

import omnicall
from omnicall.engine.base import Engine, EngineSession, SessionOptions
from omnicall.engine.conversation.listener import Listener, ListenerHooks, ListenRuntime
from omnicall.engine.conversation.reply_gate import ReplyGate
from omnicall.engine.conversation.settings import TurnSettings
from omnicall.engine.events import AssistantAudio, AssistantText, TurnEvent
from omnicall.engine.queued_session import QueuedEngineSession
from omnicall.media.clock import MonotonicClock
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import INPUT_RATE_HZ

logger = logging.getLogger(__name__)

SPEED = 1.25  # a parrot's voice: played back this much faster (and so higher)
CHUNK_SAMPLES = 1280  # 80 ms of the reply at a time
MAX_REPEAT_S = 8.0  # a parrot repeats the end of a long turn only


def parrot_voice(turn: Int16Array) -> Int16Array:
    """The last ``MAX_REPEAT_S`` of the caller's turn, resampled to play ``SPEED`` x faster
    at the input rate (pure; what the session says)."""
    tail = turn[-int(MAX_REPEAT_S * INPUT_RATE_HZ):].astype(np.float64)
    if not len(tail):
        return np.zeros(0, np.int16)
    at = np.arange(0, len(tail) - 1, SPEED)
    return np.interp(at, np.arange(len(tail)), tail).astype(np.int16)


class ParrotSession(QueuedEngineSession, ListenerHooks):
    def __init__(self, session_id: str, options: SessionOptions,
                 listening: ListenRuntime) -> None:
        self.listener = Listener(listening, self, session_id)
        self.clock = listening.clock
        self.gate: ReplyGate | None = None
        self.barge_ins = 0
        super().__init__(session_id, options)  # starts process()

    async def process(self) -> None:
        while True:
            unit = await self.state.inputs.get()
            await self.listener.feed(unit.audio, unit.filled)  # a loss burst is not silence

    # -- the listener's hooks -------------------------------------------------------------
    def reply_sound_started_at(self) -> float | None:
        gate = self.gate
        return None if gate is None or gate.cancelled else gate.first_audio_at

    async def on_speech_start(self) -> None:
        gate = self.gate
        if gate is not None and not gate.cancelled and gate.first_audio_at is not None:
            self._stop(gate)  # barge-in: the caller speaks over the parrot

    async def on_end_of_turn(self, speech_end_s: float) -> None:
        self.state.turn_id += 1
        self.gate = ReplyGate(self.state.turn_id, self.emit, self.clock,
                              playout=self.options.playout)
        # the reply runs beside the listening (which must hear a barge-in while it plays)
        self.tasks.spawn(f"reply-{self.state.turn_id}",
                         self._say(self.gate, parrot_voice(self.listener.samples())))

    async def _say(self, gate: ReplyGate, voice: Int16Array) -> None:
        turn_id = gate.turn_id
        await gate.out(TurnEvent("assistant", "start", turn_id))
        await gate.out(AssistantText("Squawk!", turn_id))
        for pts in range(0, len(voice), CHUNK_SAMPLES):
            await gate.out(AssistantAudio(voice[pts:pts + CHUNK_SAMPLES], INPUT_RATE_HZ, pts,
                                          turn_id))
        # made faster than it is spoken: the reply is the current one (a barge-in stops it)
        # until it has played out at the caller's end; after that, speech is a new turn
        played_out_at = gate.played_out_at()
        if played_out_at is not None:
            await self.clock.sleep(max(0.0, played_out_at - self.clock.now()))
        if self.gate is gate:
            self.gate = None
        await gate.out(TurnEvent("assistant", "end", turn_id))

    def _stop(self, gate: ReplyGate) -> None:
        heard_ms = gate.heard_ms()  # read before the cut: the same moment
        gate.cancel()  # the media plane stops the sound now
        self.flush_events()  # its audio not yet delivered is void
        self.barge_ins += 1
        self.state.events.put_nowait(TurnEvent("assistant", "end", gate.turn_id,
                                               interrupted=True, heard_ms=heard_ms))

    def interrupt(self) -> None:
        if self.gate is not None and not self.gate.cancelled:
            self._stop(self.gate)

    async def close(self) -> None:
        await super().close()
        self.listener.runtime.drop_session(self.session_id)


class ParrotEngine(Engine):
    """No model of its own: the conversation layer's listen runtime (the VAD) is all."""

    name = "parrot"

    def __init__(self, settings: TurnSettings | None = None) -> None:
        self.listening = ListenRuntime(settings or TurnSettings(), MonotonicClock())

    async def start(self) -> None:
        await asyncio.to_thread(self.listening.load)  # warm before the first call

    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession:
        return ParrotSession(session_id, options, self.listening)

    def queue_depths(self) -> dict[str, int]:
        return {"listen": self.listening.worker.pending}

    async def close(self) -> None:
        self.listening.close()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        omnicall.run(engine=ParrotEngine())
