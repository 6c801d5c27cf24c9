"""Ingest: remote aiortc tracks -> 16 kHz 80 ms audio frames + sampled video, aligned.

The cores (:class:`AudioIngestCore`, :class:`VideoIngestCore`) are synchronous and take
decoded ``av`` frames directly, so tests feed them without a network. :class:`IngestPump`
is the thin async shell: one ``recv`` loop per remote track that does nothing but hand each
frame to its core (aiortc queues decoded frames without bound, so the loops must keep up),
then offers aligned :class:`~omnicall.media.aligner.MediaUnit` s to a sink that may refuse them
(back-pressure: they stay in the bounded ring, which drops its oldest when full).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from fractions import Fraction

import av
import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from omnicall.media.aligner import Aligner, MediaUnit
from omnicall.media.audio_ring import AudioRing
from omnicall.media.clock import Clock
from omnicall.media.log_limit import worth_logging
from omnicall.media.resample import AudioConverter, Int16Array, UnsupportedAudioError
from omnicall.media.timebase import INPUT_RATE_HZ, rescale, time_base_for_rate
from omnicall.media.video_ring import (
    RgbImage,
    VideoRing,
    VideoSampler,
    VideoUnitFrame,
    audio_index_for,
)

logger = logging.getLogger(__name__)

MAX_AUDIO_FRAME_S = Fraction(1)  # a single decoded frame longer than this is refused
MAX_GAP_FILL_S = Fraction(1)  # gaps longer than this resync instead of inserting silence
MAX_VIDEO_PIXELS = 4096 * 2304


class AudioIngestCore:
    """Decoded audio -> mono 16 kHz -> :class:`AudioRing`, gaps filled from pts."""

    def __init__(self, ring: AudioRing) -> None:
        self.ring = ring
        self._converter = AudioConverter(INPUT_RATE_HZ)
        self._next_pts_16k: int | None = None
        self.rejected_frames = 0
        self.gap_samples = 0
        self.resyncs = 0
        self._primed = False

    def feed(self, frame: av.AudioFrame) -> int:
        """Add one decoded frame; returns how many 80 ms frames became ready."""
        rate = int(frame.sample_rate or 0)
        if rate <= 0 or Fraction(frame.samples, rate) > MAX_AUDIO_FRAME_S:
            self.rejected_frames += 1
            if worth_logging(self.rejected_frames):
                logger.warning("refusing audio frame: %d samples at %d Hz (%d refused)",
                               frame.samples, rate, self.rejected_frames)
            return 0
        made = self._fill_gap(frame, rate)
        try:
            samples = self._converter.convert(frame)
        except UnsupportedAudioError as exc:
            self.rejected_frames += 1
            if worth_logging(self.rejected_frames):
                logger.warning("refusing audio frame: %s (%d refused)", exc, self.rejected_frames)
            return made
        if not self._primed:
            # The resampler holds back its filter delay on the first call (304 of 320
            # samples at 48 -> 16 kHz). Pad the clock by that much once, so 80 ms frames end
            # on packet boundaries instead of waiting for one more 20 ms packet each.
            self._primed = True
            held = frame.samples * INPUT_RATE_HZ // rate - len(samples)
            if 0 < held < INPUT_RATE_HZ // 100:
                made += self.ring.write(np.zeros(held, dtype=np.int16))
        return made + self.ring.write(samples)

    def _fill_gap(self, frame: av.AudioFrame, rate: int) -> int:
        if frame.pts is None or frame.time_base is None:
            return 0
        start = rescale(int(frame.pts), Fraction(frame.time_base),
                        time_base_for_rate(INPUT_RATE_HZ))
        expected = self._next_pts_16k
        self._next_pts_16k = start + frame.samples * INPUT_RATE_HZ // rate
        if expected is None or start <= expected:
            return 0
        gap = start - expected
        if gap < INPUT_RATE_HZ // 100:  # under 10 ms: rounding and codec framing
            return 0
        if gap > MAX_GAP_FILL_S * INPUT_RATE_HZ:
            self.resyncs += 1
            if worth_logging(self.resyncs):
                logger.info("audio gap of %.2f s; resyncing without filling", gap / INPUT_RATE_HZ)
            return 0
        self.gap_samples += gap
        return self.ring.write(np.zeros(gap, dtype=np.int16), filled=True)


class VideoIngestCore:
    """Samples decoded video at ``fps`` on the audio clock into a latest-only ring, each
    frame fit inside ``size`` (aspect kept, never upscaled)."""

    def __init__(self, ring: VideoRing, fps: float, size: tuple[int, int],
                 audio_clock: Callable[[], Fraction]) -> None:
        self.ring = ring
        self.sampler = VideoSampler(fps)
        self.width, self.height = size
        self._audio_clock = audio_clock
        self._offset: Fraction | None = None
        self.rejected_frames = 0
        self.sampled_frames = 0

    def media_time(self, frame: av.VideoFrame) -> Fraction:
        pts_s = Fraction(int(frame.pts or 0)) * Fraction(frame.time_base or Fraction(1, 90_000))
        if self._offset is None:
            # Both tracks start near the same instant; anchor video to the audio clock then.
            self._offset = self._audio_clock() - pts_s
        return max(Fraction(0), pts_s + self._offset)

    def feed(self, frame: av.VideoFrame) -> VideoUnitFrame | None:
        if frame.width * frame.height > MAX_VIDEO_PIXELS or frame.width < 2 or frame.height < 2:
            self.rejected_frames += 1
            if worth_logging(self.rejected_frames):
                logger.warning("refusing video frame %dx%d (%d refused)", frame.width,
                               frame.height, self.rejected_frames)
            return None
        t = self.media_time(frame)
        if not self.sampler.want(t):
            return None
        # fit inside the engine's size, aspect kept, never upscaled (the frame policy sizes
        # what goes to a model: a sharp frame needs the camera's own pixels)
        scale = min(1.0, self.width / frame.width, self.height / frame.height)
        width, height = max(2, round(frame.width * scale)), max(2, round(frame.height * scale))
        try:
            image: RgbImage = np.asarray(
                frame.to_ndarray(format="rgb24", width=width, height=height), np.uint8)
        except (ValueError, av.error.FFmpegError) as exc:  # an unreadable frame: skip it
            self.rejected_frames += 1
            if worth_logging(self.rejected_frames):
                logger.warning("refusing unreadable video frame: %s (%d refused)", exc,
                               self.rejected_frames)
            return None
        unit = VideoUnitFrame(audio_index_for(t), int(frame.pts or 0),
                              Fraction(frame.time_base or Fraction(1, 90_000)), image)
        self.ring.push(unit)
        self.sampled_frames += 1
        return unit


UnitSink = Callable[[MediaUnit], bool]
#: the samples of the unit being formed that came since the last offer: (unit index, their
#: offset in it, samples); the taker drops what it cannot use (the unit carries them all)
AheadSink = Callable[[int, int, Int16Array], None]


class IngestPump:
    """Async shell: recv loops for the remote tracks, aligned units offered to ``sink``."""

    def __init__(self, audio: AudioIngestCore, video: VideoIngestCore | None,
                 aligner: Aligner, sink: UnitSink, clock: Clock,
                 ahead: AheadSink | None = None,
                 may_ahead: Callable[[], bool] = lambda: True) -> None:
        """``ahead``: also given the audio of the unit being formed as it comes, whenever
        every unit before it was taken and ``may_ahead()`` (its raw audio is what the unit
        will hold: no echo canceller at work)."""
        self.audio = audio
        self.video = video
        self.aligner = aligner
        self._sink = sink
        self._clock = clock
        self._ahead = ahead
        self._may_ahead = may_ahead
        self.last_audio_s = float("-inf")
        self._held: MediaUnit | None = None
        self.units_out = 0
        self.refusals = 0

    def drain(self) -> None:
        """Offer ready units to the sink until it refuses one (kept for the next try)."""
        while True:
            unit = self._held or self.aligner.next_unit()
            if unit is None:
                return
            if not self._sink(unit):
                self._held = unit
                self.refusals += 1
                return
            self._held = None
            self.units_out += 1

    def feed_audio(self, frame: av.AudioFrame) -> None:
        """One decoded frame, from the track or straight from the receiver."""
        self.last_audio_s = self._clock.now()
        made = self.audio.feed(frame)
        if made or self._held is not None:
            self.drain()
        if self._ahead is not None and self._held is None and len(self.audio.ring) == 0:
            got = self.audio.ring.ahead()  # taken either way: when not offered, the unit
            if got is not None and self._may_ahead():  # carries them (cleaned)
                self._ahead(*got)

    async def run_audio(self, track: MediaStreamTrack) -> None:
        try:
            while True:
                self.feed_audio(await track.recv())  # type: ignore[arg-type]
        except MediaStreamError:
            logger.debug("audio track ended")

    async def run_video(self, track: MediaStreamTrack) -> None:
        try:
            while True:
                frame = await track.recv()
                if self.video is not None:
                    self.video.feed(frame)  # type: ignore[arg-type]
        except MediaStreamError:
            logger.debug("video track ended")
