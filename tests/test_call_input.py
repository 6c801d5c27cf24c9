"""A call's media in (:class:`CallInput`): the caller's decoded audio and camera frames to
aligned 80 ms units for the engine session, over the same loops a call runs."""

from __future__ import annotations

import av
import numpy as np
from aiortc import RTCPeerConnection
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from omnicall.media.aligner import MediaUnit
from omnicall.media.call_input import CallInput
from omnicall.media.clock import ManualClock
from omnicall.media.timebase import INPUT_FRAME_SAMPLES
from tests.utils import stereo_frames, tone, video_frame


class Frames(MediaStreamTrack):
    """A remote track that yields the given frames, then ends."""

    def __init__(self, kind: str, frames: list[av.AudioFrame] | list[av.VideoFrame]) -> None:
        super().__init__()
        self.kind = kind
        self._frames = list(frames)

    async def recv(self):  # type: ignore[no-untyped-def]  # aiortc's untyped signature
        if not self._frames:
            raise MediaStreamError
        return self._frames.pop(0)


class Engine:
    """The engine session's ``push``: takes units, or refuses them while ``full``."""

    def __init__(self) -> None:
        self.units: list[MediaUnit] = []
        self.full = False

    def push(self, unit: MediaUnit) -> bool:
        if self.full:
            return False
        self.units.append(unit)
        return True


async def test_the_callers_audio_and_camera_become_aligned_units() -> None:
    clock = ManualClock(5.0)
    engine = Engine()
    media = CallInput("s1", engine.push, clock, video_fps=2.0, video_size=(320, 240))
    pc = RTCPeerConnection()
    try:
        # the camera's first frame comes first: it is anchored to the audio clock at 0
        await media.video_track(Frames("video", [video_frame(640, 480, pts=0)]))
        await media.audio_track(pc, Frames("audio", stereo_frames(tone(440, 0.4, rate=48_000))))
    finally:
        await pc.close()
    assert [u.index for u in engine.units] == [0, 1, 2, 3, 4]  # 400 ms: five 80 ms units
    assert all(len(u.audio) == INPUT_FRAME_SAMPLES for u in engine.units)
    assert np.abs(engine.units[2].audio).max() > 5000  # the tone, at 16 kHz
    video = engine.units[0].video
    assert video is not None and video.image.shape == (240, 320, 3)  # fit inside the size
    assert all(u.video is None for u in engine.units[1:])
    assert media.last_audio_s == 5.0  # on the injected clock
    stats = media.stats()
    assert stats["audio_units"] == 5 and stats["video_sampled"] == 1
    assert media.buffer_frames() == {"audio_ring": 0, "video_ring": 0}
    media.close()


async def test_without_video_camera_frames_are_read_and_dropped() -> None:
    engine = Engine()
    media = CallInput("s1", engine.push, ManualClock(), video_fps=None, low_latency=False)
    await media.video_track(Frames("video", [video_frame(pts=0), video_frame(pts=9000)]))
    pc = RTCPeerConnection()
    try:
        await media.audio_track(pc, Frames("audio", stereo_frames(tone(440, 0.16, rate=48_000))))
    finally:
        await pc.close()
    assert media.video_ingest is None and media.receive.buffer is None
    assert len(engine.units) == 2 and all(u.video is None for u in engine.units)
    assert media.stats()["video_sampled"] == 0


async def test_a_refused_unit_waits_and_nothing_is_lost_while_the_ring_has_room() -> None:
    engine = Engine()
    media = CallInput("s1", engine.push, ManualClock(), video_fps=None)
    frames = stereo_frames(tone(440, 0.32, rate=48_000))
    engine.full = True
    for frame in frames[:8]:  # 160 ms: two units, refused
        media.pump.feed_audio(frame)
    assert engine.units == [] and media.stats()["ingest_refusals"] >= 1
    engine.full = False
    for frame in frames[8:]:
        media.pump.feed_audio(frame)
    assert [u.index for u in engine.units] == [0, 1, 2, 3]
    assert media.stats()["audio_ring_dropped"] == 0
