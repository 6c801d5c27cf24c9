"""A reply's sound on a Realtime connection (``omnicall serve-engine``): the protocol's audio
deltas, sent the moment the reply's gate releases the audio.

:class:`RealtimePlayout` is the engine session's playout (``SessionOptions.playout``) on a
Realtime connection, as a call's playout meter is in a WebRTC call: it hands each reply's
gate a handle (:class:`RealtimeSound`) whose ``write`` sends ``response.output_audio.delta``
events on the connection (after the response's ``response.created``, when the turn's start
has not gone yet), so a reply's audio never waits in the session's event queue behind its
captions. What the client heard is the client's to say (``conversation.item.truncate``):
the handle does not measure it, and the gate estimates it until then.

Order: a reply's first sound waits until its turn's start has gone out through the event
pump (:meth:`RealtimePlayout.started`), so the caller's turn (``speech_stopped``,
``committed``, the transcription) and the previous response's ``response.done``, queued
before it, are on the wire first; at most :data:`START_WAIT_S` (an engine that never says
its turn started still speaks).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from omnicall.app.realtime.replies import Fields, RealtimeReplies
from omnicall.media.playout import ReplySound
from omnicall.media.resample import Int16Array

Send = Callable[[list[Fields]], Awaitable[None]]

START_WAIT_S = 2.0  # a reply's first sound waits at most this long for its turn's start
MAX_TURNS_KEPT = 8  # turns whose start is remembered (bounded)


class RealtimeSound:
    """One reply's sound as audio deltas of its response."""

    measured = False

    def __init__(self, turn_id: int, playout: RealtimePlayout) -> None:
        self.turn_id = turn_id
        self._playout = playout
        self.stopped = False

    async def write(self, samples: Int16Array, rate_hz: int) -> None:
        if self.stopped:
            return
        await self._playout.wait_started(self.turn_id)
        if self.stopped:
            return
        try:
            await self._playout.send(self._playout.replies.audio(self.turn_id, samples, rate_hz))
        except ConnectionError:  # the client is gone: the connection's close follows
            self.stopped = True

    def end(self) -> None:
        """Its response is done with the turn's end event."""

    def stop(self) -> None:
        """Barge-in or ``response.cancel``: nothing more of it is sent (the client drops
        what it has queued; the cancelled response's ``response.done`` says so)."""
        self.stopped = True

    def duck(self, gain: float) -> None:
        """The client plays it: its volume is the client's."""

    def playout(self) -> None:
        return None


class RealtimePlayout:
    """A Realtime connection's playout: a :class:`RealtimeSound` per reply."""

    def __init__(self, replies: RealtimeReplies, send: Send) -> None:
        self.replies = replies
        self.send = send
        self._started: OrderedDict[int, asyncio.Event] = OrderedDict()

    def open(self, turn_id: int, unplayed: ReplySound) -> ReplySound:
        return RealtimeSound(turn_id, self)

    def _start(self, turn_id: int) -> asyncio.Event:
        event = self._started.get(turn_id)
        if event is None:
            event = self._started[turn_id] = asyncio.Event()
            while len(self._started) > MAX_TURNS_KEPT:
                self._started.popitem(last=False)
        return event

    def started(self, turn_id: int) -> None:
        """Assistant turn ``turn_id``'s start went out (the event pump routed it)."""
        self._start(turn_id).set()

    async def wait_started(self, turn_id: int) -> None:
        event = self._start(turn_id)
        if not event.is_set():
            try:
                await asyncio.wait_for(event.wait(), START_WAIT_S)
            except TimeoutError:
                event.set()  # it never came: the sound goes out all the same

    def reply(self, turn_id: int) -> None:
        """Not measured here (the client truncates what it did not play)."""
        return None
