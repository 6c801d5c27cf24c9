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
(:meth:`Playout.duck`: the caller's sound lowers the reply's volume; counted from what was
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
:class:`ReplyPlayout` snapshots. The view has two controls: :meth:`Playout.duck`, the caller's
sound lowering a reply's volume while the conversation decides, and :meth:`Playout.stop`, the
engine's barge-in; the meter hands both to the call output that plays its replies
(:meth:`PlayoutMeter.attach`; :meth:`omnicall.media.call_output.CallOutput.stop` cuts the
reply's sound at once: a control event, it does not wait behind the engine's queued events), so
what was heard is counted at the very moment the engine decides to keep it. The meter lives as
long as the engine session that reads it: a call that resumes a parked engine session attaches
its own output to that session's meter.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

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


class Playout(Protocol):
    """A call's playout as engine sessions see it: what was heard, a reply's ducking, and a
    barge-in's stop."""

    def reply(self, turn_id: int) -> ReplyPlayout | None:
        """Reply ``turn_id`` as measured so far; None if nothing of it reached the meter
        (no audio, not yet queued, or forgotten)."""
        ...

    def stop(self, turn_id: int) -> None:
        """Barge-in: stop reply ``turn_id``'s sound now (what is queued of it is dropped,
        and audio of it that still arrives is not played). Afterwards :meth:`reply` counts
        what was sent up to this moment in ``interrupted_sent_samples``. Nothing happens for
        a reply already played to its end or already stopped."""
        ...

    def duck(self, turn_id: int, gain: float) -> None:
        """Reply ``turn_id``'s sound at ``gain`` (0 < gain <= 1; 1.0: back to normal) from
        the next frame of it sent, ramped within that frame (no click); other replies are
        untouched. A duck of a reply not playing now (not yet started, ended, stopped) is
        remembered for that turn (one gain a turn, the latest few turns), so a duck just
        before its first frame still applies. :meth:`reply` then counts its frames sent
        ducked (``ducked_at_s``, ``ducked_samples``). Nothing happens with no call output
        (a parked engine session)."""
        ...


class Stoppable(Protocol):
    """What plays a meter's replies: its :meth:`stop` is a barge-in's way to the sound,
    its :meth:`duck` the way a reply's volume is lowered."""

    def stop(self, turn_id: int) -> None:
        ...

    def duck(self, turn_id: int, gain: float) -> None:
        ...


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
        self._output: Stoppable | None = None  # the call output playing these replies

    def attach(self, output: Stoppable) -> None:
        """``output`` plays these replies from now on: :meth:`stop` and :meth:`duck` reach
        it. A call's output attaches itself when it is built (a resumed call, to the parked
        engine session's meter); the one before it no longer gets them."""
        self._output = output

    def detach(self, output: Stoppable) -> None:
        """``output`` closed: stops and ducks no longer reach it (nothing happens if another output
        attached since)."""
        if self._output is output:
            self._output = None

    # -- the engines' view ---------------------------------------------------------------
    def reply(self, turn_id: int) -> ReplyPlayout | None:
        record = self._replies.get(turn_id)
        return None if record is None else record.snapshot()

    def stop(self, turn_id: int) -> None:
        """The engine's barge-in: to the attached output, which cuts the sound and marks the
        reply interrupted here; with none (a parked engine session), only marked."""
        if self._output is not None:
            self._output.stop(turn_id)
        else:
            self.interrupted(turn_id)  # nothing plays it: nothing more will be heard

    def duck(self, turn_id: int, gain: float) -> None:
        """Reply ``turn_id`` at ``gain`` from its next frame sent: to the attached output;
        with none (a parked engine session), nothing plays it and nothing is done."""
        if self._output is not None:
            self._output.duck(turn_id, gain)

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
        gain below 1 (:meth:`Playout.duck`)."""
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
