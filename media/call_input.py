"""A call's media in: the caller's microphone and camera, from the peer connection to the
engine session, as 80 ms units.

One per call, built by the call with the engine session's ``push`` as its sink::

    Opus packets -> LowLatencyReceive: released at once in order, reordered when one is
      missing (bounded wait), decoded on the event loop (other codecs: aiortc's decoder)
      -> AudioIngestCore: mono 16 kHz, gaps filled from pts -> AudioRing: 80 ms frames,
      each cleaned as it is formed by the call's EchoCanceller when it has one (AEC3 with the
      sent reply as reference, noise suppression: before the VAD, turn detector and ASR)
    camera frames -> VideoIngestCore: sampled onto the audio clock, fit to size -> VideoRing
    -> Aligner -> MediaUnit -> the sink (the engine session's ``push``; it may refuse one)

Everything is built here, each part given what it needs in its constructor; the call hands
over the tracks (:meth:`CallInput.audio_track`, :meth:`CallInput.video_track`: each returns
the loop that reads its track, which the call runs as one of its tasks) and the answer
(:meth:`CallInput.on_answer`), and closes it (:meth:`CallInput.close`).

Bounded, nothing waits on the network: the audio ring drops its oldest frames when the
engine falls ``capacity_frames`` behind (counted); the video ring keeps the newest few sampled
frames (older ones dropped, counted); a unit the sink refuses is held (one) and offered again,
while later audio waits in the ring; the reorder buffer holds a missing packet's followers
for a bounded, adaptive wait (:mod:`omnicall.media.audio_reorder`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from fractions import Fraction
from typing import Any

from aiortc import RTCPeerConnection
from aiortc.mediastreams import MediaStreamTrack
from aiortc.sdp import SessionDescription

from omnicall.media.aligner import Aligner
from omnicall.media.audio_reorder import ReorderSettings
from omnicall.media.audio_ring import AudioRing
from omnicall.media.clock import Clock
from omnicall.media.echo_canceller import EchoCanceller
from omnicall.media.ingest import (
    AheadSink,
    AudioIngestCore,
    IngestPump,
    UnitSink,
    VideoIngestCore,
)
from omnicall.media.low_latency_receive import LowLatencyReceive
from omnicall.media.opus_receive import OpusPacketDecoder
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import INPUT_RATE_HZ
from omnicall.media.video_ring import VideoRing

logger = logging.getLogger(__name__)


class CallInput:
    """Receive, ingest, rings and aligner of one call."""

    def __init__(self, sink: UnitSink, clock: Clock, *, ahead: AheadSink | None = None,
                 video_fps: float | None, video_size: tuple[int, int] = (640, 480),
                 low_latency: bool = True, reorder: ReorderSettings | None = None,
                 room: EchoCanceller | None = None,
                 record: Callable[[Int16Array, float], None] | None = None) -> None:
        """``sink``: takes each aligned unit (the engine session's ``push``); ``ahead``:
        takes the audio of the unit being formed as it comes, while the room passes it
        unchanged (the engine session's ``listen_ahead``);
        ``video_fps``: the camera's sampling rate, None: no video (frames are read and
        dropped, none reaches the engine); ``video_size``: the size a sampled frame fits in;
        ``low_latency``: Opus packets skip aiortc's receive buffer and decoder thread;
        ``reorder``: the reorder buffer's bounds (None: its defaults); ``room``: the call's
        echo canceller and noise suppressor (its reference comes from the call's output),
        run on each 80 ms frame as it is formed, stamped with its arrival; ``record``: given
        each 80 ms frame as it arrived (before the room) and when (``--record``)."""
        self.low_latency = low_latency
        self.room = room

        def formed(samples: Int16Array) -> Int16Array:
            if record is not None:
                record(samples, clock.now())
            return samples if room is None else room.near_end(samples, clock.now())

        self.audio_ring = AudioRing(
            clean=None if room is None and record is None else formed)
        self.video_ring = VideoRing()
        self.audio_ingest = AudioIngestCore(self.audio_ring)
        self.video_ingest = None if video_fps is None else VideoIngestCore(
            self.video_ring, video_fps, video_size, self._audio_clock)
        self.aligner = Aligner(self.audio_ring, self.video_ring)
        self.pump = IngestPump(
            self.audio_ingest, self.video_ingest, self.aligner, sink, clock, ahead=ahead,
            may_ahead=lambda: room is None or room.passes_raw(clock.now()))
        self.receive = LowLatencyReceive(self.pump.feed_audio, reorder)

    def _audio_clock(self) -> Fraction:
        """Media time of the caller's audio so far (video is sampled onto it)."""
        return Fraction(self.audio_ring.clock_samples, INPUT_RATE_HZ)

    # -- the peer connection -------------------------------------------------------------
    def audio_track(self, pc: RTCPeerConnection, track: MediaStreamTrack
                    ) -> Coroutine[Any, Any, None]:
        """The caller's microphone arrived: its receiver gets the low-latency buffer now
        (when on); returns the loop that reads the track (what aiortc still decodes)."""
        if self.low_latency:
            installed = self.receive.on_track(pc, track)
            logger.debug("low-latency receive %s",
                         "installed" if installed else "not installed (aiortc's buffer)")
        return self.pump.run_audio(track)

    def video_track(self, track: MediaStreamTrack) -> Coroutine[Any, Any, None]:
        """The caller's camera arrived: returns the loop that reads it."""
        return self.pump.run_video(track)

    def on_answer(self, answer: SessionDescription) -> None:
        """The answer fixed the codecs: with Opus, its packets are decoded here from now on."""
        self.receive.on_answer(answer)

    def close(self) -> None:
        """The call ended: the reorder buffer's release timer must not outlive it."""
        self.receive.close()

    # -- what the call reads -------------------------------------------------------------
    @property
    def last_audio_s(self) -> float:
        """When the caller's audio last arrived (clock seconds; -inf before any)."""
        return self.pump.last_audio_s

    @property
    def opus_in(self) -> OpusPacketDecoder | None:
        """The decoder of the caller's Opus packets, when they skip aiortc's."""
        return self.receive.decoder

    def buffer_frames(self) -> dict[str, int]:
        return {"audio_ring": len(self.audio_ring), "video_ring": len(self.video_ring)}

    def stats(self) -> dict[str, int]:
        return (self.room.stats() if self.room is not None else {}) | {
            "audio_units": self.pump.units_out,
            "audio_ring": len(self.audio_ring),
            "audio_ring_dropped": self.audio_ring.dropped_frames,
            "ingest_refusals": self.pump.refusals,
            "video_sampled": 0 if self.video_ingest is None else self.video_ingest.sampled_frames,
            "video_dropped": self.video_ring.dropped_frames,
        }
