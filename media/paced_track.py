"""Outgoing audio track paced against an injected monotonic clock.

aiortc's sender pulls frames as fast as ``recv`` returns them, so the track paces itself:
frame ``n`` (20 ms, 960 samples at 48 kHz, pts ``n * 960``) is due at ``start + n * 20 ms``.
When nothing is ready it sends silence. If the event loop stalled and the track is more than
``max_lag_frames`` behind, it skips ahead instead of bursting: pts jumps with the real time
(the receiver conceals the gap), so a stall never turns into permanent delay.

Phase slip: when a frame is due mid-utterance and the playout queue is momentarily empty
(the engine's next 80 ms block is a few ms late), the track waits up to ``max_slip_s`` for it
and shifts its schedule by the wait, instead of sending 20 ms of silence and adding a frame
of delay for the rest of the call.

Phase advance: slips only ever move the schedule later, so each late block would leave the
phase a little later for good, and blocks that come on time would then wait for their tick.
When the first frame of a burst (pushed into an empty queue: the queue dates it, when built
with the clock) has waited for its tick, the schedule moves earlier by that wait, at most
``max_advance_s`` per burst (the receiver sees packets a few ms early, well inside its jitter
buffer). Together the schedule hugs the engine's delivery instants: the 0-20 ms tick phase is
not paid.

Metering: with a :class:`~omnicall.media.playout.PlayoutMeter`, every frame of a reply that the
track sends (never its silence) is reported to it with the frame's tag, at the moment it is sent.

Ducking: :meth:`PacedAudioTrack.duck` sets one reply's gain (:class:`ReplyGains`): from the
next frame of that reply the track sends, its samples are scaled (int16, rounded, clipped),
the change ramped linearly over the first :data:`RAMP_SAMPLES` of that frame so the step
makes no click; other replies' frames (and the silence) are sent untouched. The meter is told
which frames left ducked. The echo canceller gets the frames as sent (ducked).

Holding (``hold_ducked``, ``--duck pause``): a duck below 1 holds the reply instead of
lowering it. Its next frame is sent fading to silence over the whole frame; after that its
frames wait in the queue (the producer waits on the queue's back-pressure) and silence goes
out, until the duck is lifted: the next frame fades back in over :data:`RAMP_SAMPLES`, so
the reply resumes where the caller stopped hearing it. A hold longer than ``max_hold_s`` is
lifted here (logged, counted in ``released_holds``): the listener decides long before, so
only a lost decision gets there. The meter sees the faded frame as ducked and nothing of the
held silence.

The echo canceller's reference: with ``far_end``, every frame the track sends (its silence too:
the canceller's clock runs on it) is handed to it with the moment it is sent
(:meth:`omnicall.media.echo_canceller.EchoCanceller.far_end`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from omnicall.media.clock import Clock
from omnicall.media.playout import FrameTag, PlayoutMeter
from omnicall.media.playout_queue import PlayoutQueue
from omnicall.media.resample import Int16Array, make_audio_frame
from omnicall.media.timebase import OPUS_FRAME_MS, OPUS_FRAME_SAMPLES, OPUS_RATE_HZ

logger = logging.getLogger(__name__)

OPUS_FRAME_S = OPUS_FRAME_MS / 1000
_SILENCE = np.zeros(OPUS_FRAME_SAMPLES, dtype=np.int16)
RAMP_SAMPLES = 240  # 5 ms at 48 kHz: a gain change ramps within the first frame it reaches
MAX_DUCKED_TURNS = 4  # gains kept for the latest few turns ducked
HELD = 0.0  # a reply's gain while it is held (``hold_ducked``)
MAX_HOLD_S = 5.0  # a hold no one lifted this long is lifted by the track


@dataclass(slots=True)
class _Gain:
    target: float  # what the reply's next frames are sent at
    applied: float = 1.0  # the gain its last frame sent ended at (the next ramp's start)


class ReplyGains:
    """Per reply gains (ducking), applied to each frame as it is sent.

    One gain a turn, for the latest ``max_turns`` turns ducked (one more forgets the least
    recently ducked). A gain set for a reply not playing now (not yet started, ended,
    stopped) is kept for its turn, so a duck just before its first frame still applies; it
    is forgotten when the reply's last frame is sent (:meth:`apply`), when it is stopped
    (:meth:`forget`), or once restored (1.0, its ramp sent): a turn with no gain is sent
    untouched. A gain of :data:`HELD` fades the reply out over its next frame, after which
    it is :meth:`held` (its frames are not sent at all)."""

    def __init__(self, max_turns: int = MAX_DUCKED_TURNS,
                 ramp_samples: int = RAMP_SAMPLES) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be >= 1")
        if not 0 < ramp_samples <= OPUS_FRAME_SAMPLES:
            raise ValueError(f"the ramp lies within one frame: 1..{OPUS_FRAME_SAMPLES} samples")
        self.max_turns = max_turns
        self.ramp_samples = ramp_samples
        self._gains: OrderedDict[int, _Gain] = OrderedDict()
        self.forgotten_turns = 0  # evicted by the bound (not ended, not restored)

    def __len__(self) -> int:
        return len(self._gains)

    def set(self, turn_id: int, gain: float) -> None:
        """Reply ``turn_id``'s frames at ``gain`` (0 <= gain <= 1; :data:`HELD`: held) from
        its next one sent."""
        if not (math.isfinite(gain) and 0 <= gain <= 1):
            raise ValueError(f"a duck's gain is in [0, 1], not {gain}")
        entry = self._gains.get(turn_id)
        if entry is None:
            if gain == 1.0:
                return  # not ducked: nothing to restore
            self._gains[turn_id] = _Gain(gain)
        elif gain == 1.0 and entry.applied == 1.0:
            del self._gains[turn_id]  # restored before any of it was sent ducked
            return
        else:
            entry.target = gain
            self._gains.move_to_end(turn_id)
        while len(self._gains) > self.max_turns:
            self._gains.popitem(last=False)
            self.forgotten_turns += 1

    def gain(self, turn_id: int) -> float:
        """The gain reply ``turn_id``'s next frame will end at (1.0: untouched)."""
        entry = self._gains.get(turn_id)
        return 1.0 if entry is None else entry.target

    def held(self, turn_id: int) -> bool:
        """Reply ``turn_id`` is held and has faded out: none of its frames is sent now."""
        entry = self._gains.get(turn_id)
        return entry is not None and entry.target == HELD and entry.applied == HELD

    def forget(self, turn_id: int) -> None:
        """Reply ``turn_id`` was stopped: nothing more of it plays."""
        self._gains.pop(turn_id, None)

    def apply(self, samples: Int16Array, tag: FrameTag) -> tuple[Int16Array, bool]:
        """The frame as it is sent, and whether it left ducked (its gain ends below 1)."""
        entry = self._gains.get(tag.turn_id)
        if entry is None:
            return samples, False
        start, end = entry.applied, entry.target
        gains: float | np.ndarray = end
        if start != end:
            # a fade to silence takes the whole frame; any other change, the ramp
            n = len(samples) if end == HELD else min(self.ramp_samples, len(samples))
            ramp = np.full(len(samples), end)
            ramp[:n] = start + (end - start) * np.arange(1, n + 1) / n
            gains = ramp
        scaled = np.clip(np.rint(samples * gains), -32768, 32767).astype(np.int16)
        entry.applied = end
        if end == 1.0 or tag.last:
            del self._gains[tag.turn_id]  # restored, or the reply's end left
        return scaled, end < 1.0


class PacedAudioTrack(MediaStreamTrack):
    kind = "audio"

    def __init__(self, queue: PlayoutQueue, clock: Clock, max_lag_frames: int = 3,
                 late_threshold_s: float = OPUS_FRAME_S, max_slip_s: float = 0.020,
                 max_advance_s: float = 0.005, meter: PlayoutMeter | None = None,
                 far_end: Callable[[Int16Array, float], None] | None = None,
                 hold_ducked: bool = False, max_hold_s: float = MAX_HOLD_S) -> None:
        """``hold_ducked``: a duck below 1 holds the reply (module docstring)."""
        super().__init__()
        self._far_end = far_end
        self.queue = queue
        self._max_slip_s = max_slip_s
        self._max_advance_s = max_advance_s
        self.slips = 0
        self.slipped_s = 0.0
        self.advances = 0
        self.advanced_s = 0.0
        self._clock = clock
        self._start: float | None = None
        self._n = 0
        self._max_lag_frames = max_lag_frames
        self._late_threshold_s = late_threshold_s
        self._meter = meter
        self.sent_frames = 0
        self.silence_frames = 0
        self.late_frames = 0
        self.skipped_frames = 0
        self.gains = ReplyGains()
        self.hold_ducked = hold_ducked
        self._max_hold_frames = max(1, round(max_hold_s / OPUS_FRAME_S))
        self._held_run = 0  # frames of silence sent for the hold now going on
        self.held_frames = 0
        self.released_holds = 0

    def duck(self, turn_id: int, gain: float) -> None:
        """Reply ``turn_id``'s frames at ``gain`` (0 < gain <= 1; 1.0 restores) from the next
        one this track sends, ramped within it (:class:`ReplyGains`); with ``hold_ducked``,
        any gain below 1 holds it."""
        self.gains.set(turn_id, HELD if self.hold_ducked and gain < 1.0 else gain)

    async def recv(self):  # type: ignore[no-untyped-def]  # aiortc's untyped signature
        samples, pts = await self.next_samples()
        return make_audio_frame(samples, OPUS_RATE_HZ, pts=pts)

    async def next_samples(self) -> tuple[Int16Array, int]:
        """The next 20 ms (48 kHz mono int16) when it is due, and its pts."""
        if self.readyState != "live":
            raise MediaStreamError
        now = self._clock.now()
        if self._start is None:
            self._start = now
        deadline = self._start + self._n * OPUS_FRAME_S
        wait_s = deadline - now
        if wait_s > 0:
            await self._clock.sleep(wait_s)
        else:
            lag_frames = int(-wait_s / OPUS_FRAME_S)
            if -wait_s > self._late_threshold_s:
                self.late_frames += 1
            if lag_frames > self._max_lag_frames:
                logger.debug("outgoing audio %d frames behind; skipping ahead", lag_frames)
                self._n += lag_frames
                self.skipped_frames += lag_frames
        if self.queue.starving and self._max_slip_s > 0:
            await self._slip()
        burst_at = self.queue.take_burst_start()
        head = self.queue.next_tag()
        popped = None if head is not None and self._hold(head.turn_id) else \
            self.queue.pop_tagged()
        if popped is None:
            samples = _SILENCE
            self.silence_frames += 1
        else:
            samples, tag = popped
            if tag is not None:
                samples, ducked = self.gains.apply(samples, tag)
                if self._meter is not None:
                    self._meter.sent(tag, ducked=ducked)
            if burst_at is not None and wait_s >= 0:  # only from ticks that ran on time
                self._advance(deadline - burst_at)
        pts = self._n * OPUS_FRAME_SAMPLES
        self._n += 1
        self.sent_frames += 1
        if self._far_end is not None:
            self._far_end(samples, self._clock.now())
        return samples, pts

    def _hold(self, turn_id: int) -> bool:
        """Whether reply ``turn_id``'s next frame waits (it is held): silence goes out."""
        if not self.gains.held(turn_id):
            self._held_run = 0
            return False
        self._held_run += 1
        self.held_frames += 1
        if self._held_run >= self._max_hold_frames:
            logger.warning("reply %d held %.1f s with no decision: it plays on", turn_id,
                           self._held_run * OPUS_FRAME_S)
            self.gains.set(turn_id, 1.0)
            self.released_holds += 1
            self._held_run = 0
        return True

    def _advance(self, early_s: float) -> None:
        """The burst's first frame came ``early_s`` before its tick: tick earlier next time.

        Measured against the tick's due time, not the time it ran: a tick that the event
        loop ran late is no reason to move the schedule."""
        step = min(early_s, self._max_advance_s)
        if step > 0:
            assert self._start is not None
            self._start -= step
            self.advances += 1
            self.advanced_s += step

    async def _slip(self) -> None:
        assert self._start is not None
        self.queue.arrived.clear()
        before = self._clock.now()
        try:
            await asyncio.wait_for(self.queue.arrived.wait(), self._max_slip_s)
        except TimeoutError:
            return  # still nothing: send silence on schedule (an underrun)
        waited = self._clock.now() - before
        self._start += waited
        self.slips += 1
        self.slipped_s += waited
