"""A call's media out: the assistant's voice from the engine's audio to the peer connection,
and the one way a barge-in reaches it.

One per call, built by the call from its clock and the playout meter its engine session reads
(``SessionOptions.playout``)::

    engine audio (any rate, any chunk) -> AudioEgress: 48 kHz, 20 ms frames tagged by reply
      -> PlayoutQueue -> PacedAudioTrack: one frame per 20 ms tick, each sent frame metered
         (and, with an echo canceller, given to it as the reference of the caller's echo)
      -> EncodedAudioTrack: mono speech Opus, the track the peer connection sends

The parts take each other in their constructors; the queue is what the egress and the paced
track both wait on (:attr:`PlayoutQueue.space`, :attr:`PlayoutQueue.arrived`).

Each reply's sound comes through its handle (:meth:`PlayoutMeter.open`, held by the reply's
gate): :meth:`write`, :meth:`end`, :meth:`stop` and :meth:`duck` name the reply. Barge-in:
``stop(turn_id)``, the handle's stop, cuts that reply's sound now (its queued audio is
dropped, with whatever was queued before it: the queue plays in order) and marks it
interrupted in the meter; another reply's audio written later plays. Nothing of the stopped
reply can arrive afterwards: its gate is cancelled, and a write waiting for room is abandoned
by the flush. It is idempotent: a second stop of the same reply, or of a reply already played
to its end, cuts nothing more. ``stop()`` (no reply named) cuts whatever is queued or being
written.

Ducking: :meth:`CallOutput.duck` lowers one reply's volume from the next frame of it the
paced track sends (ramped within that frame; :class:`~omnicall.media.paced_track.ReplyGains`),
the conversation's first answer to the caller's sound while a reply plays; ``gain=1.0``
restores it. It reaches here as the stop does: the reply's sound handle's ``duck``, handed to
the attached output. The meter counts the frames sent ducked. With ``hold_ducked``
(``--duck pause``) a duck holds the reply instead: silent from the next frame, resumed where
it stopped when it is lifted (:mod:`omnicall.media.paced_track`).

Bounded: the playout queue is the only queue here. Generated-ahead replies wait for room
beyond its ``capacity_frames`` (back-pressure to the reply's maker, through its handle);
live streams (engines whose audio is real time, ``live``) drop the oldest frames beyond
``target_frames + LIVE_SLACK_FRAMES`` and trim a standing excess.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiortc.rtcrtpparameters import RTCRtpCodecParameters

from omnicall.media.clock import Clock
from omnicall.media.echo_canceller import EchoCanceller
from omnicall.media.egress import AudioEgress
from omnicall.media.opus_encoder import EncodedAudioTrack
from omnicall.media.paced_track import PacedAudioTrack
from omnicall.media.playout import Output, PlayoutMeter
from omnicall.media.playout_queue import PlayoutQueue
from omnicall.media.resample import Int16Array

logger = logging.getLogger(__name__)

LIVE_SLACK_FRAMES = 8  # live streams: queue at most target + 160 ms before dropping


def sent_to(*takers: Callable[[Int16Array, float], None] | None
            ) -> Callable[[Int16Array, float], None] | None:
    """One callback for each frame sent that calls every taker given (None: none)."""
    present = [taker for taker in takers if taker is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    def each(samples: Int16Array, sent_s: float) -> None:
        for taker in present:
            taker(samples, sent_s)

    return each


class CallOutput(Output):
    """Egress, playout queue, paced track and Opus encoder of one call, metered."""

    def __init__(self, clock: Clock, meter: PlayoutMeter, *, target_frames: int = 2,
                 live: bool = False, room: EchoCanceller | None = None,
                 hold_ducked: bool = False,
                 record: Callable[[Int16Array, float], None] | None = None) -> None:
        """``meter``: the engine session's (a resumed call passes the parked session's);
        ``target_frames``: the queue's start-up prefetch (``--jitter-frames``); ``live``:
        the engine's audio is real time (drop the oldest rather than wait); ``room``: the
        call's echo canceller, given every frame sent as its reference (the same one
        :class:`~omnicall.media.call_input.CallInput` cleans the caller's audio with);
        ``hold_ducked``: a duck holds the reply (silent, resumed where it stopped) instead
        of lowering it (``--duck pause``); not on a live output, whose late frames are
        dropped (a held reply could not resume where it stopped): there it lowers;
        ``record``: given every frame sent and when (``--record``)."""
        self.meter = meter
        self.queue = PlayoutQueue(
            target_frames=target_frames,
            max_latency_frames=target_frames + LIVE_SLACK_FRAMES if live else None,
            meter=meter, clock=clock)
        self.egress = AudioEgress(self.queue, meter)
        self.paced_track = PacedAudioTrack(
            self.queue, clock, meter=meter,
            far_end=sent_to(room.far_end if room is not None and room.cancels_echo else None,
                            record),
            hold_ducked=hold_ducked and not live)
        self.send_track = EncodedAudioTrack(self.paced_track)  # what the peer sends
        meter.attach(self)  # the replies' handles (Playout.open) write, end, stop, duck here

    # -- the replies' sound --------------------------------------------------------------
    async def write(self, samples: Int16Array, rate_hz: int, turn_id: int | None = None) -> None:
        """Audio of reply ``turn_id``: queued, waiting while a generated-ahead queue is full."""
        await self.egress.write(samples, rate_hz, turn_id=turn_id)

    def end(self, turn_id: int) -> None:
        """Reply ``turn_id`` has nothing more to play: its tail is queued as its last frame."""
        self.egress.end_utterance()

    # -- barge-in ------------------------------------------------------------------------
    def stop(self, turn_id: int | None = None) -> None:
        """Barge-in: reply ``turn_id``'s sound stops now; ``None``: whatever is queued or
        being written (the page's stop control names no reply). See the module's docstring;
        idempotent."""
        if turn_id is None:
            dropped = self.egress.flush()
            logger.debug("stop: %d queued frames dropped", dropped)
            return
        reply = self.meter.reply(turn_id)
        if reply is not None and reply.ended:
            return  # heard in full: nothing to cut
        self.egress.stop(turn_id)
        self.paced_track.gains.forget(turn_id)  # nothing more of it plays
        self.meter.interrupted(turn_id)  # also when none of it was queued: nothing was heard

    # -- ducking -------------------------------------------------------------------------
    def duck(self, turn_id: int, gain: float) -> None:
        """Reply ``turn_id``'s sound at ``gain`` (0 < gain <= 1; 1.0 restores) from the next
        frame of it sent, ramped within that frame; other replies untouched. A duck of a
        reply not playing now is kept for its turn (bounded), so one just before its first
        frame applies. The meter records its frames sent ducked."""
        self.paced_track.duck(turn_id, gain)

    # -- the peer connection -------------------------------------------------------------
    def use_codec(self, codecs: list[RTCRtpCodecParameters]) -> None:
        """The answer's codecs for the assistant's track (Opus: encoded here)."""
        self.send_track.use_codec(codecs)

    def expect_loss(self, fraction: float | None) -> None:
        """The caller's reported loss of this audio (0..1): the encoder's FEC follows it."""
        self.send_track.expect_loss(fraction)

    def close(self) -> None:
        """The call ended: the tracks stop, what is queued is dropped (a reply's write
        waiting for room gives up: nothing will make room again), and the replies' handles
        no longer reach here."""
        self.send_track.stop()
        self.egress.flush()
        self.meter.detach(self)

    # -- what the call reports (under the names the page and the metrics know) ----------
    def buffer_frames(self) -> dict[str, int]:
        return {"jitter_buffer": len(self.queue)}

    def stats(self) -> dict[str, int]:
        return {
            "jitter_frames": len(self.queue),
            "underruns": self.queue.underruns,
            "late_frames": self.paced_track.late_frames,
            "sent_frames": self.paced_track.sent_frames,
            "silence_frames": self.paced_track.silence_frames,
        }
