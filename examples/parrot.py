"""A custom engine on omnicall's conversation layer: Polly the parrot says your words back.

The engine decides only what to answer (here: the caller's own last turn, a little faster
and higher, as a parrot would). Everything about taking turns is omnicall's, the same as
the built-in engines use (``omnicall.engine.conversation``):

- :class:`Listener` hears the call: the VAD on the engine's listen worker, the turn
  detector, the end-of-turn model (``--turn-model smart``), the echo warm-up, the preroll,
  and calls this session's hooks (speech start, end of turn);
- :class:`Replies` is the reply's life: its first sound stamped, a barge-in that cuts it
  (the sound stops at once, and its end says how much the caller heard, measured by the
  media plane), and the reply kept current until it has played out.

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
from omnicall.engine.conversation.replies import Replies, Reply
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
        self.replies: Replies[None] = Replies(self, self, listening.clock, options.playout)
        self.listener = Listener(listening, self, session_id, self.replies)
        super().__init__(session_id, options)  # starts process()

    async def process(self) -> None:
        while True:
            unit = await self.next_unit()
            await self.listener.feed(unit.audio, unit.filled)  # a loss burst is not silence

    # -- the listener's hook: a barge-in was the conversation layer's ----------------------
    async def on_end_of_turn(self, speech_end_s: float) -> None:
        self.state.turn_id += 1
        reply = self.replies.new(self.state.turn_id, None)
        # the reply runs beside the listening (which must hear a barge-in while it plays)
        self.tasks.spawn(f"reply-{reply.turn_id}",
                         self._say(reply, parrot_voice(self.listener.samples())))

    async def _say(self, reply: Reply[None], voice: Int16Array) -> None:
        turn_id = reply.turn_id
        await reply.out(TurnEvent("assistant", "start", turn_id))
        reply.text = "Squawk!"
        await reply.out(AssistantText(reply.text, turn_id))
        for pts in range(0, len(voice), CHUNK_SAMPLES):
            chunk = voice[pts:pts + CHUNK_SAMPLES]
            reply.audio_s += len(chunk) / INPUT_RATE_HZ
            await reply.out(AssistantAudio(chunk, INPUT_RATE_HZ, pts, turn_id))
        await self.replies.play_out(reply)  # a barge-in until then cuts it
        await self.replies.end(reply)

    # -- a reply's life: a parrot keeps no conversation --------------------------------
    def stop_reply(self, reply: Reply[None]) -> None:
        """Its task sees the cut at its next step."""

    def remember_reply(self, reply: Reply[None]) -> None:
        """Nothing to remember."""

    def interrupt(self) -> None:
        self.replies.interrupt()

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
