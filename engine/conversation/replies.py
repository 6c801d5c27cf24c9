"""A reply's life, the same for every engine.

One call has at most one current reply. :class:`Replies` owns its life: it is started
(speculatively at a pause, or committed), committed when the turn is confirmed, cancelled
unseen when the caller speaks on, cut at a barge-in, a stop control or a client's truncation
(what the caller heard is then what is kept, and the reply's interrupted end carries it as
``heard_ms``), kept current until its sound has played out at the caller's end, and ended.
Heard time becomes heard words here too (:meth:`Reply.heard_text`).

An engine supplies only what differs between engines: how a reply is made (it takes the new
reply from :meth:`Replies.new` and starts the ASR/LLM/TTS pipeline, queues a Thinker
operation, or follows a model server's reply), and, as a :class:`ReplyMaker`, how its making
stops (``stop_reply``: flags and tasks, or telling the server) and what the conversation
keeps of it (``remember_reply``: all of it, or the words the caller heard). Each engine's
own state for making a reply rides along in :attr:`Reply.work`.

The reply's events go out through its :class:`~omnicall.engine.conversation.reply_gate.ReplyGate`
(held while speculative; what the caller heard, from the media plane's playout meter), its
audio into its own sound handle (in a call, the media plane's: never the event queue). A
barge-in is one path: the listener (or a stop control) -> :meth:`Replies.cut` -> the gate's
cancel -> the sound's stop. Control events bypass the session's event queue: what of the
cut reply was still queued there (captions; audio only where there is no media plane) is
flushed, and its end goes straight in.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from omnicall.engine.conversation.reply_gate import ReplyGate
from omnicall.engine.events import EngineEvent, TurnEvent, UserTranscript
from omnicall.media.clock import Clock

if TYPE_CHECKING:
    from omnicall.media.playout import Playout

W = TypeVar("W")

#: a reply's sound while the caller's sound over it is heard for words (about -10 dB)
DUCK_GAIN = 0.3

#: (text, start_s, duration_s): where a piece of the reply's text lies in its sound
Span = tuple[str, float, float]


@dataclass(eq=False)
class Reply(Generic[W]):
    """One reply while it is made and heard."""

    turn_id: int
    gate: ReplyGate  # held while speculative; its first sound; what the caller heard
    work: W  # the engine's own state for making it
    text: str = ""  # what it says (so far)
    #: where each piece of ``text`` lies in the reply's sound (a piece whose sound is still
    #: being made has duration 0); none: the text is laid evenly over ``audio_s``
    spans: list[Span] = field(default_factory=list)
    audio_s: float = 0.0  # sound made so far (released or held)
    #: set when its making must stop (model threads check it between steps)
    cancel: threading.Event = field(default_factory=threading.Event)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)  # cut or cancelled
    done: bool = False  # no longer the current reply (ended, cut or cancelled)
    ducked: bool = False  # its sound is lowered (the caller's sound over it is being heard)
    #: cut: the milliseconds of its sound the caller had heard (what is kept of it)
    heard_ms: int | None = None
    remembered: bool = False  # the conversation has it (whole, or as heard)

    @property
    def cut(self) -> bool:
        return self.heard_ms is not None

    async def out(self, event: EngineEvent) -> None:
        """Send ``event`` through the gate; a stopped reply ends here (CancelledError)."""
        if self.cancel.is_set():
            raise asyncio.CancelledError
        await self.gate.out(event)

    def heard_text(self, heard_s: float) -> str:
        """The words of the reply in its first ``heard_s`` of sound."""
        spans = self.spans or ([(self.text, 0.0, self.audio_s)] if self.audio_s > 0 else [])
        words: list[str] = []
        for text, start, dur in spans:
            if dur <= 0:  # a piece whose first sound is still being made
                continue
            if start + dur <= heard_s:
                words += text.split()
            elif start < heard_s:
                piece = text.split()
                words += piece[:int(len(piece) * (heard_s - start) / dur)]
        return " ".join(words)


class ReplyMaker(Protocol[W]):
    """What an engine's session does for the reply's life (see the module's docstring)."""

    def stop_reply(self, reply: Reply[W]) -> None:
        """Stop making ``reply`` now (it was cut, or cancelled as speculative: then
        ``reply.gate.committed`` is False)."""

    def remember_reply(self, reply: Reply[W]) -> None:
        """Keep ``reply`` in the conversation: whole, or (``reply.heard_ms`` set) the words
        the caller heard. ``reply.remembered``: it was kept whole before (a client's late
        truncation): replace that."""


class EventSink(Protocol):
    """Where a session's events go (:class:`~omnicall.engine.base.QueuedEngineSession`)."""

    async def emit(self, event: EngineEvent) -> None: ...

    def put_now(self, event: EngineEvent) -> None:
        """Queue ``event`` at once, whatever the queue holds (the control path)."""

    def flush_events(self) -> int: ...


class Replies(Generic[W]):
    """One call's current reply and its life (the module's docstring says how)."""

    def __init__(self, maker: ReplyMaker[W], sink: EventSink, clock: Clock,
                 playout: Playout | None = None) -> None:
        self.maker = maker
        self.sink = sink
        self.clock = clock
        self.playout = playout
        self.current: Reply[W] | None = None
        self.barge_ins = 0
        self.ducks = 0
        self.speculations = {"committed": 0, "cancelled": 0}

    # -- what is going on ---------------------------------------------------------------
    def live(self) -> Reply[W] | None:
        """The current reply, while it is not done."""
        reply = self.current
        return reply if reply is not None and not reply.done else None

    def sounding_since(self) -> float | None:
        """When the live reply's first sound went out (None: no live reply has sounded)."""
        reply = self.live()
        return reply.gate.first_audio_at if reply is not None else None

    def pending(self) -> bool:
        """A committed reply is live but has not sounded yet (being made, or queued for its
        first sound)."""
        reply = self.live()
        return reply is not None and reply.gate.committed and reply.gate.first_audio_at is None

    def speculating(self, turn_id: int) -> Reply[W] | None:
        """The speculative reply to turn ``turn_id``, if one is under way (or failed while
        speculative: committing it lets its error out)."""
        reply = self.current
        if reply is not None and reply.turn_id == turn_id and reply.gate.speculative:
            return reply
        return None

    # -- starting and committing ---------------------------------------------------------
    def new(self, turn_id: int, work: W, committed: bool = True, text: str = "") -> Reply[W]:
        """The current reply from now on, for the engine to make; ``committed=False``: a
        speculation (its events held until :meth:`commit`)."""
        gate = ReplyGate(turn_id, self.sink.emit, self.clock, committed, self.playout)
        reply: Reply[W] = Reply(turn_id, gate, work, text=text)
        self.current = reply
        return reply

    async def commit(self, reply: Reply[W]) -> None:
        """The turn it answers ended: what it made so far goes out at once."""
        if reply.gate.speculative:
            self.speculations["committed"] += 1
        await reply.gate.commit()

    def cancel_speculation(self) -> Reply[W] | None:
        """The caller spoke on: a speculative reply is dropped unseen (returned)."""
        reply = self.live()
        if reply is None or not reply.gate.speculative:
            return None
        self._halt(reply)
        self.current = None
        self.speculations["cancelled"] += 1
        return reply

    # -- cutting ---------------------------------------------------------------------------
    def cut(self, reply: Reply[W], heard_ms: int | None = None, flush: bool = True
            ) -> TurnEvent:
        """Stop ``reply`` where the caller is (``heard_ms`` of its sound; None: what the
        media plane says left, read once, before the cut): its sound stops now, its queued
        events are dropped (``flush``), the conversation keeps what was heard, and its end,
        returned, says so."""
        reply.heard_ms = reply.gate.heard_ms() if heard_ms is None else heard_ms
        self._halt(reply)
        if flush:
            self.sink.flush_events()
        self.maker.remember_reply(reply)
        reply.remembered = True
        return TurnEvent("assistant", "end", reply.turn_id, interrupted=True,
                         heard_ms=reply.heard_ms)

    async def barge_in(self) -> bool:
        """The caller speaks over the live reply: cut it (False: none was live)."""
        reply = self.live()
        if reply is None:
            return False
        self.barge_ins += 1
        await self.sink.emit(self.cut(reply))
        return True

    def duck(self) -> bool:
        """Lower the live reply's sound now (the media plane's playout), while the caller's
        sound over it is heard for words; False: no live reply has sounded."""
        reply = self.live()
        if reply is None or reply.gate.first_audio_at is None:
            return False
        if reply.ducked:  # already, since the sound's onset
            return True
        self.ducks += 1
        reply.ducked = True
        reply.gate.sound.duck(DUCK_GAIN)
        return True

    def unduck(self) -> None:
        """The caller's sound was no interruption: the reply sounds as before (it went on
        all along, lowered, so the caller heard it where they stopped listening; or, where
        the media plane holds a ducked reply, ``--duck pause``, it resumes where it
        stopped)."""
        reply = self.current
        if reply is None or not reply.ducked:
            return
        reply.ducked = False
        if not reply.cut:
            reply.gate.sound.duck(1.0)

    async def backchannel(self, text: str) -> None:
        """The caller said ``text`` ("mm-hmm", "okay") over the reply: the transcript records
        it, in the reply's turn; no turn starts and the reply goes on."""
        reply = self.current
        if reply is not None and text.strip():
            await self.sink.emit(UserTranscript(text.strip(), final=True, turn_id=reply.turn_id))

    def interrupt(self, committed_only: bool = True) -> bool:
        """The control path (the page's stop, a client's cancel): cut the live reply at once
        (a speculative one only if not ``committed_only``)."""
        reply = self.live()
        if reply is None or (committed_only and not reply.gate.committed):
            return False
        self.sink.put_now(self.cut(reply))
        return True

    def truncate(self, played_ms: int) -> None:
        """The client played only the first ``played_ms`` of the last reply: a reply still
        going is cut there; one already ended (or cut) is remembered as that much heard."""
        reply = self.current
        if reply is None or reply.gate.first_audio_at is None:
            return
        if not reply.done:
            self.sink.put_now(self.cut(reply, played_ms))
        else:
            reply.heard_ms = played_ms
            self.maker.remember_reply(reply)

    def _halt(self, reply: Reply[W], void: bool = True) -> None:
        """Stop making ``reply``; ``void``: nothing more of it goes out either (once it
        sounded, the media plane stops playing it now)."""
        reply.cancel.set()
        if void:
            reply.gate.cancel()
        reply.done = True
        reply.stopped.set()
        self.maker.stop_reply(reply)

    # -- ending ----------------------------------------------------------------------------
    async def play_out(self, reply: Reply[W], lead_s: float = 0.0) -> None:
        """Replies are made faster than they are spoken: wait until ``reply``'s sound has
        played out at the caller's end (``lead_s`` before), or it was stopped. Until then it
        is the current reply (a barge-in cuts it; what was heard is what is kept)."""
        played_out_at = reply.gate.played_out_at()
        if played_out_at is None or reply.stopped.is_set():
            return
        left_s = played_out_at - lead_s - self.clock.now()
        if left_s <= 0:
            return
        sleep = asyncio.ensure_future(self.clock.sleep(left_s))
        stopped = asyncio.ensure_future(reply.stopped.wait())
        try:
            await asyncio.wait({sleep, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (sleep, stopped):
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter

    async def end(self, reply: Reply[W]) -> bool:
        """``reply`` ended whole: the conversation keeps it and its end goes out. False: it
        had been cut or cancelled (its end went out then)."""
        if reply.done:
            return False
        reply.done = True
        self.maker.remember_reply(reply)
        reply.remembered = True
        await reply.gate.out(TurnEvent("assistant", "end", reply.turn_id))
        return True

    def fail(self, reply: Reply[W]) -> None:
        """Making ``reply`` failed: it stops, but its gate stays open, so the engine's error
        and the reply's end still go out once the turn is confirmed; what of its sound is
        still queued stops now (its end is an interrupted one)."""
        self._halt(reply, void=False)
        if reply.gate.first_audio_at is not None:
            reply.gate.sound.stop()
