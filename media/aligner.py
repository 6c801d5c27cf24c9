"""Pairs 80 ms audio frames with the sampled video frame that belongs to them.

A video frame stamped with audio index ``k`` is attached to the first unit with index >= k
(normally ``k`` itself; one or two later if decode ran late). Synchronous and I/O free.
"""

from __future__ import annotations

from dataclasses import dataclass

from omnicall.media.audio_ring import AudioRing, OnFrameGrid
from omnicall.media.resample import Int16Array
from omnicall.media.video_ring import VideoRing, VideoUnitFrame


@dataclass(frozen=True, slots=True)
class MediaUnit(OnFrameGrid):
    """What the engine consumes every 80 ms: audio, and video when a sample is due."""

    index: int
    audio: Int16Array  # INPUT_FRAME_SAMPLES int16 mono at 16 kHz
    video: VideoUnitFrame | None = None
    #: of its audio samples, how many fill a gap (a loss burst: no audio came for them);
    #: the listener does not take them for the caller's silence
    filled: int = 0


class Aligner:
    def __init__(self, audio: AudioRing, video: VideoRing) -> None:
        self.audio = audio
        self.video = video

    def next_unit(self) -> MediaUnit | None:
        frame = self.audio.read()
        if frame is None:
            return None
        return MediaUnit(frame.index, frame.samples, self.video.take_up_to(frame.index),
                         frame.filled)
