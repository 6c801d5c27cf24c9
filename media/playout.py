"""What the caller heard of each reply, measured where the audio leaves: the playout meter.

An engine that cuts a reply at a barge-in (its text, its tokens) needs to know how much of
that reply the caller heard. Wall time since the engine emitted its first audio is a guess:
between engine and network lie the egress resampler, the playout queue's start-up, a
generated-ahead reply queued seconds ahead of playback, live-stream drops and trims, and
underruns. The media plane knows exactly. Every 20 ms wire frame carries a :class:`FrameTag`
naming its reply (``turn_id``) from :class:`omnicall.media.egress.AudioEgress` through
:class:`~omnicall.media.playout_queue.PlayoutQueue`, and
:class:`~omnicall.media.paced_track.PacedAudioTrack` reports each frame it sends (never silence)
here.

Per reply the meter records when its first frame was sent, how many of its samples were sent
(at the 48 kHz Opus rate; a padded last frame counts only its audio), how many the playout
queue discarded instead (live streams' drops and trims: never sent, never counted as sent),
when its first ducked frame was sent and how many of its samples were sent ducked
(:meth:`ReplySound.duck`: the caller's sound lowers the reply's volume; counted from what was
sent, so "the volume went down at once" is measured, not assumed), when its end was played (the
moment its last frame left, when it was not interrupted) and whether and when it was
interrupted (flushed at a barge-in), with what had been sent by then. A frame of the reply sent
after its interruption (an engine that went on with the same turn) still counts in
``sent_samples``; ``interrupted_sent_samples`` keeps the count at the flush.

"Sent" means it left this server for the encoder and the network: the caller hears it one
network trip and the browser's own jitter buffer (tens of ms) later.

Bounded: the last :data:`MAX_REPLIES` replies are kept, in the order they were first seen.
One more forgets the oldest (counted in ``forgotten_replies``): :meth:`PlayoutMeter.reply`
answers ``None`` for it, and anything that still arrives for it starts a fresh record.

Pure and synchronous: the injected clock is read at each event; no I/O, no tasks. Consumers
(engine sessions, through ``SessionOptions.playout``) get the :class:`Playout` view and frozen
:class:`ReplyPlayout` snapshots. The view hands out one handle per reply
(:meth:`Playout.open` -> :class:`ReplySound`): the reply's gate writes its audio into it,
ends it, stops it at a barge-in and ducks it while the caller's sound is heard for words.
Each goes straight to the call output attached to the meter (:meth:`PlayoutMeter.attach`;
:class:`omnicall.media.call_output.CallOutput`): a reply's audio never waits in the engine's
event queue behind captions, and its stop cuts the sound at once, so what was heard is
counted at the very moment the engine decides to keep it. The meter lives as long as the
engine session that reads it: a call that resumes a parked engine session attaches its own
output to that session's meter; while none is attached, the handles send the audio where the
engine session without a call would (its events).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

from omnicall.media.resample import Int16Array
from omnicall.media.timebase import OPUS_FRAME_SAMPLES, OPUS_RATE_HZ

MAX_REPLIES = 16


class TimeSource(Protocol):
    def now(self) -> float:
        """Monotonic seconds (a :class:`omnicall.media.clock.Clock` is one)."""
        ...


@dataclass(frozen=True, slots=True)
class FrameTag:
    """The reply one wire frame belongs to: ``samples`` of its 960 are that reply's audio
    (fewer only in a zero-padded last frame); ``last``: no later frame of it is queued."""

    turn_id: int
    samples: int = OPUS_FRAME_SAMPLES
    last: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.samples <= OPUS_FRAME_SAMPLES:
            raise ValueError(f"a frame holds 1..{OPUS_FRAME_SAMPLES} samples of a reply, "
                             f"not {self.samples}")


@dataclass(frozen=True, slots=True)
class ReplyPlayout:
    """One reply's playout so far (a snapshot: it does not change afterwards)."""

    turn_id: int
    first_sent_at_s: float | None  # None: nothing of it was sent (yet)
    last_sent_at_s: float | None
    sent_samples: int  # at OPUS_RATE_HZ
    discarded_samples: int  # dropped or trimmed by the playout queue: never sent
    ended_at_s: float | None  # its last frame left (the whole reply was played out)
    interrupted_at_s: float | None  # flushed at a barge-in before its end was played
    interrupted_sent_samples: int | None  # sent_samples at that flush
    ducked_at_s: float | None = None  # its first frame sent ducked (None: never ducked)
    ducked_samples: int = 0  # of sent_samples, those sent ducked (gain below 1)

    @property
    def sent_s(self) -> float:
        return self.sent_samples / OPUS_RATE_HZ

    @property
    def sent_ms(self) -> float:
        return self.sent_samples * 1000 / OPUS_RATE_HZ

    @property
    def interrupted_sent_s(self) -> float | None:
        """Seconds of it sent before it was cut (None: not interrupted)."""
        if self.interrupted_sent_samples is None:
            return None
        return self.interrupted_sent_samples / OPUS_RATE_HZ

    @property
    def ended(self) -> bool:
        return self.ended_at_s is not None

    @property
    def interrupted(self) -> bool:
        return self.interrupted_at_s is not None


class ReplySound(Protocol):
    """One reply's sound: the handle its reply gate holds and writes into.

    :meth:`Playout.open` hands one out per reply. ``write`` plays audio of the reply (waiting
    while the call's playout queue is full: back-pressure straight to the reply's maker),
    ``end`` says nothing more of it comes (its last frame is marked; its end is played when
    that frame leaves), ``stop`` is a barge-in (its sound stops now), ``duck`` lowers its
    volume, ``playout`` is what of it the media plane sent (None: nothing yet, or not
    ``measured`` here)."""

    turn_id: int
    measured: bool  # playout() measures what left (else the gate estimates it)

    async def write(self, samples: Int16Array, rate_hz: int) -> None: ...

    def end(self) -> None: ...

    def stop(self) -> None: ...

    def duck(self, gain: float) -> None: ...

    def playout(self) -> ReplyPlayout | None: ...


class Playout(Protocol):
    """A call's playout as engine sessions see it: one handle per reply, and what was heard
    of each."""

    def open(self, turn_id: int, unplayed: ReplySound) -> ReplySound:
        """Reply ``turn_id``'s sound (see :class:`ReplySound`). ``unplayed``: where its
        audio goes while no call output plays this meter's replies (a parked engine session,
        an engine used without a call): the session's events."""
        ...

    def reply(self, turn_id: int) -> ReplyPlayout | None:
        """Reply ``turn_id`` as measured so far; None if nothing of it reached the meter
        (no audio, not yet queued, or forgotten)."""
        ...


class Output(Protocol):
    """What plays a meter's replies (a call's :class:`~omnicall.media.call_output.CallOutput`):
    the reply handles write into it, end, stop and duck their reply there."""

    async def write(self, samples: Int16Array, rate_hz: int, turn_id: int | None = None
                    ) -> None: ...

    def end(self, turn_id: int) -> None: ...

    def stop(self, turn_id: int | None = None) -> None: ...

    def duck(self, turn_id: int, gain: float) -> None: ...


class MeteredSound:
    """A reply's sound in a call (:meth:`PlayoutMeter.open`): written into the output attached
    to the meter, measured by it. With none attached, its audio goes to ``unplayed``."""

    measured = True

    def __init__(self, meter: PlayoutMeter, turn_id: int, unplayed: ReplySound) -> None:
        self.meter = meter
        self.turn_id = turn_id
        self._unplayed = unplayed

    async def write(self, samples: Int16Array, rate_hz: int) -> None:
        output = self.meter.output
        if output is None:
            await self._unplayed.write(samples, rate_hz)
        else:
            await output.write(samples, rate_hz, self.turn_id)

    def end(self) -> None:
        output = self.meter.output
        if output is None:
            self._unplayed.end()
        else:
            output.end(self.turn_id)

    def stop(self) -> None:
        """Barge-in: the output cuts the sound and marks the reply interrupted here; with
        none (a parked engine session), only marked: nothing more will be heard."""
        output = self.meter.output
        if output is None:
            self._unplayed.stop()
            self.meter.interrupted(self.turn_id)
        else:
            output.stop(self.turn_id)

    def duck(self, gain: float) -> None:
        """From its next frame sent; with no output (parked), nothing plays it."""
        output = self.meter.output
        if output is not None:
            output.duck(self.turn_id, gain)

    def playout(self) -> ReplyPlayout | None:
        return self.meter.reply(self.turn_id)


@dataclass(slots=True)
class _Record:
    turn_id: int
    first_sent_at_s: float | None = None
    last_sent_at_s: float | None = None
    sent_samples: int = 0
    discarded_samples: int = 0
    ended_at_s: float | None = None
    interrupted_at_s: float | None = None
    interrupted_sent_samples: int | None = None
    ducked_at_s: float | None = None
    ducked_samples: int = 0

    def snapshot(self) -> ReplyPlayout:
        return ReplyPlayout(self.turn_id, self.first_sent_at_s, self.last_sent_at_s,
                            self.sent_samples, self.discarded_samples, self.ended_at_s,
                            self.interrupted_at_s, self.interrupted_sent_samples,
                            self.ducked_at_s, self.ducked_samples)


class PlayoutMeter:
    """One call's meter: the media plane feeds it (``sent``, ``discarded``, ``ended``,
    ``interrupted``); engines read it through :class:`Playout`."""

    def __init__(self, clock: TimeSource, max_replies: int = MAX_REPLIES) -> None:
        if max_replies < 1:
            raise ValueError("max_replies must be >= 1")
        self._clock = clock
        self.max_replies = max_replies
        self._replies: OrderedDict[int, _Record] = OrderedDict()
        self.forgotten_replies = 0
        self.output: Output | None = None  # the call output playing these replies

    def attach(self, output: Output) -> None:
        """``output`` plays these replies from now on: their handles write, end, stop and duck
        there. A call's output attaches itself when it is built (a resumed call, to the parked
        engine session's meter); the one before it no longer gets them."""
        self.output = output

    def detach(self, output: Output) -> None:
        """``output`` closed: the handles no longer reach it (nothing happens if another
        output attached since)."""
        if self.output is output:
            self.output = None

    # -- the engines' view ---------------------------------------------------------------
    def open(self, turn_id: int, unplayed: ReplySound) -> ReplySound:
        return MeteredSound(self, turn_id, unplayed)

    def reply(self, turn_id: int) -> ReplyPlayout | None:
        record = self._replies.get(turn_id)
        return None if record is None else record.snapshot()

    # -- fed by the media plane --------------------------------------------------------
    def _record(self, turn_id: int) -> _Record:
        record = self._replies.get(turn_id)
        if record is None:
            record = self._replies[turn_id] = _Record(turn_id)
            while len(self._replies) > self.max_replies:
                self._replies.popitem(last=False)
                self.forgotten_replies += 1
        return record

    def sent(self, tag: FrameTag, ducked: bool = False) -> None:
        """The paced track sent this frame of reply ``tag.turn_id`` (now); ``ducked``: at a
        gain below 1 (:meth:`ReplySound.duck`)."""
        now = self._clock.now()
        record = self._record(tag.turn_id)
        if record.first_sent_at_s is None:
            record.first_sent_at_s = now
        if ducked:
            if record.ducked_at_s is None:
                record.ducked_at_s = now
            record.ducked_samples += tag.samples
        record.last_sent_at_s = now
        record.sent_samples += tag.samples
        # a frame after the end means that was not the end (the engine went on with the turn)
        record.ended_at_s = now if tag.last else None

    def discarded(self, tag: FrameTag) -> None:
        """The playout queue dropped or trimmed this frame: it is never sent. When it was
        the reply's last, nothing more of the reply will leave: its end is now."""
        record = self._record(tag.turn_id)
        record.discarded_samples += tag.samples
        if tag.last:
            record.ended_at_s = self._clock.now()

    def ended(self, turn_id: int) -> None:
        """The reply ended with none of it still queued: its end was played when its last
        frame left (or now, if none ever did). No record is made for a reply of which
        nothing reached the meter (one without audio)."""
        record = self._replies.get(turn_id)
        if record is None or record.ended_at_s is not None:
            return
        if record.interrupted_sent_samples == record.sent_samples:
            return  # flushed, and nothing of it sent since: its end was never played
        record.ended_at_s = record.last_sent_at_s if record.last_sent_at_s is not None \
            else self._clock.now()

    def interrupted(self, turn_id: int) -> None:
        """The reply was flushed at a barge-in (now). A reply already played to its end was
        heard in full and stays so; only the first interruption is kept."""
        record = self._record(turn_id)
        if record.ended_at_s is not None or record.interrupted_at_s is not None:
            return
        record.interrupted_at_s = self._clock.now()
        record.interrupted_sent_samples = record.sent_samples
