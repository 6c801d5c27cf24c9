"""A reply's way out, the same for every engine.

A reply may start before the caller's turn has surely ended (at the pause: speculation).
Its events are then *held*; when the end of turn is confirmed the gate is *committed* and
releases them in order, then lets later events straight through; when the caller speaks on
instead it is *cancelled* and nothing of it is seen. The reply's first sound is stamped once
(``first_audio_out``), when it is released, not when it was made.

Released audio goes into the reply's sound (:class:`~omnicall.media.playout.ReplySound`, the
handle the media plane opened for it, or :class:`EventSound`: the session's events), never
through the session's event queue in a call; the reply's end ends the sound, and a cancel
once it sounded stops it. Everything else released (captions, timings, turn events) goes to
the session's events.

What the caller heard of the reply (:meth:`ReplyGate.heard_s`) comes from the media plane
when it measures playout (the samples of this reply that the paced track sent); without one
(a model server's session, a test) it is estimated from the reply's first sound and the real
time since, bounded by the audio released. Barge-in truncation, captions and the
conversation memory all read it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from omnicall.engine.events import AssistantAudio, EngineEvent, StageTiming, TurnEvent
from omnicall.media.clock import Clock
from omnicall.media.resample import Int16Array

if TYPE_CHECKING:
    from omnicall.media.playout import Playout, ReplyPlayout, ReplySound

#: without a measurement: audio reaches the caller this long after it is released (the
#: playout queue's 40 ms start-up and the network's share)
PLAYOUT_DELAY_S = 0.06

Emit = Callable[[EngineEvent], Awaitable[None]]


class EventSound:
    """A reply's sound as the session's events (:class:`AssistantAudio`, its ``pts`` counted
    from the reply's start): where it goes with no media plane (an engine session used on its
    own), and while a parked session's meter has no call output."""

    measured = False

    def __init__(self, turn_id: int, emit: Emit) -> None:
        self.turn_id = turn_id
        self._emit = emit
        self._pts: dict[int, int] = {}  # per rate: samples written so far

    async def write(self, samples: Int16Array, rate_hz: int) -> None:
        pts = self._pts.get(rate_hz, 0)
        self._pts[rate_hz] = pts + len(samples)
        await self._emit(AssistantAudio(samples, rate_hz, pts, self.turn_id))

    def end(self) -> None:
        """Its end is the turn's end event (the events' reader knows)."""

    def stop(self) -> None:
        """What was emitted is the session's to drop (its cut flushes its events)."""

    def duck(self, gain: float) -> None:
        """No sound is played here to lower."""

    def playout(self) -> ReplyPlayout | None:
        return None


def open_sound(turn_id: int, emit: Emit, playout: Playout | None) -> ReplySound:
    """Reply ``turn_id``'s sound: the media plane's handle when the session has a playout
    (``SessionOptions.playout``: a call's), else the session's events."""
    events = EventSound(turn_id, emit)
    return events if playout is None else playout.open(turn_id, events)


class ReplyGate:
    def __init__(self, turn_id: int, emit: Emit, clock: Clock, committed: bool = True,
                 playout: Playout | None = None) -> None:
        self.turn_id = turn_id
        self._emit = emit
        self._clock = clock
        self.sound = open_sound(turn_id, emit, playout)
        self.committed = committed
        self.cancelled = False
        self.held: list[EngineEvent] = []
        self.first_audio_at: float | None = None  # when its first sound was released
        self.released_audio_s = 0.0
        self.released = asyncio.Event()  # committed (set at once for a committed reply)
        self.decided = asyncio.Event()  # committed or cancelled
        if committed:
            self.released.set()
            self.decided.set()

    @property
    def speculative(self) -> bool:
        return not self.committed and not self.cancelled

    async def out(self, event: EngineEvent) -> None:
        """Release ``event`` now, hold it while speculative, drop it once cancelled."""
        if self.cancelled:
            return
        if self.committed:
            await self._release(event)
        else:
            self.held.append(event)

    async def commit(self) -> None:
        """The turn ended: release what is held, in order, then let events through."""
        if self.cancelled or self.committed:
            return
        while self.held:  # events made meanwhile join the queue: order is kept
            await self._release(self.held.pop(0))
        self.committed = True
        self.released.set()
        self.decided.set()

    def cancel(self) -> None:
        """The reply is void (speculation overtaken by speech, barge-in, stop). Once its
        sound was released, the media plane stops playing it now (its sound's ``stop``), so
        :meth:`heard_s` is what left up to this moment."""
        self.cancelled = True
        self.held.clear()
        self.decided.set()
        if self.first_audio_at is not None:
            self.sound.stop()

    async def _release(self, event: EngineEvent) -> None:
        if isinstance(event, AssistantAudio):
            if self.first_audio_at is None:
                self.first_audio_at = self._clock.now()
                await self._emit(StageTiming(self.turn_id, "first_audio_out",
                                             self.first_audio_at))
                if self.cancelled:  # cut while its first sound's timing waited
                    return
            self.released_audio_s += len(event.samples) / event.rate_hz
            await self.sound.write(event.samples, event.rate_hz)
            return
        if isinstance(event, TurnEvent) and event.role == "assistant" and \
                event.phase == "end" and not event.interrupted:
            self.sound.end()  # played on to its end: its last frame is marked
        await self._emit(event)

    def heard_s(self) -> float:
        """Seconds of this reply the caller has heard by now (see the module's docstring)."""
        if self.sound.measured:  # measured: nothing sent yet is nothing heard
            measured = self.sound.playout()
            if measured is None:
                return 0.0
            interrupted_s = measured.interrupted_sent_s
            if interrupted_s is not None:  # what left before the cut
                return interrupted_s
            return measured.sent_s
        if self.first_audio_at is None:
            return 0.0
        since_s = self._clock.now() - self.first_audio_at - PLAYOUT_DELAY_S
        return max(0.0, min(self.released_audio_s, since_s))

    def heard_ms(self) -> int:
        """:meth:`heard_s` in whole milliseconds (rounded down: nothing unheard counted): the
        number an interrupted reply's end carries (``TurnEvent.heard_ms``) and what its
        engine keeps of it."""
        return int(self.heard_s() * 1000)

    def played_out_at(self) -> float | None:
        """When the released audio will have played out at the caller's end (None: no
        sound)."""
        if self.first_audio_at is None:
            return None
        return self.first_audio_at + self.released_audio_s
