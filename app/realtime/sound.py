"""A reply's sound on a Realtime connection (``omnicall serve-engine``): the protocol's audio
deltas, sent the moment the reply's gate releases the audio.

:class:`RealtimePlayout` is the engine session's playout (``SessionOptions.playout``) on a
Realtime connection, as a call's playout meter is in a WebRTC call: it hands each reply's
gate a handle (:class:`RealtimeSound`) whose ``write`` sends ``response.output_audio.delta``
events on the connection (after the response's ``response.created``, when the turn's start
has not gone yet), so a reply's audio never waits in the session's event queue behind its
captions. What the client heard is the client's to say (``conversation.item.truncate``):
the handle does not measure it, and the gate estimates it until then.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from omnicall.app.realtime.replies import Fields, RealtimeReplies
from omnicall.media.playout import ReplySound
from omnicall.media.resample import Int16Array

Send = Callable[[list[Fields]], Awaitable[None]]


class RealtimeSound:
    """One reply's sound as audio deltas of its response."""

    measured = False

    def __init__(self, turn_id: int, replies: RealtimeReplies, send: Send) -> None:
        self.turn_id = turn_id
        self._replies = replies
        self._send = send
        self.stopped = False

    async def write(self, samples: Int16Array, rate_hz: int) -> None:
        if not self.stopped:
            await self._send(self._replies.audio(self.turn_id, samples, rate_hz))

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
        self._replies = replies
        self._send = send

    def open(self, turn_id: int, unplayed: ReplySound) -> ReplySound:
        return RealtimeSound(turn_id, self._replies, self._send)

    def reply(self, turn_id: int) -> None:
        """Not measured here (the client truncates what it did not play)."""
        return None
