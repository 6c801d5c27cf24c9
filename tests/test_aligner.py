from fractions import Fraction

import numpy as np

from omnicall.media.aligner import Aligner
from omnicall.media.audio_ring import AudioRing
from omnicall.media.video_ring import VideoRing, VideoUnitFrame


def test_video_attaches_to_its_audio_frame_or_the_next() -> None:
    audio, video = AudioRing(capacity_frames=50), VideoRing(depth=8)
    aligner = Aligner(audio, video)
    img = np.zeros((2, 2, 3), np.uint8)
    video.push(VideoUnitFrame(2, 0, Fraction(1, 90_000), img))
    audio.write(np.zeros(1280 * 5, np.int16))
    units = []
    while (u := aligner.next_unit()) is not None:
        units.append(u)
    assert [u.index for u in units] == [0, 1, 2, 3, 4]
    assert [u.video is not None for u in units] == [False, False, True, False, False]
    # a video frame that arrives late (its audio frame already went) goes with the next one
    video.push(VideoUnitFrame(4, 2, Fraction(1, 90_000), img))
    audio.write(np.zeros(1280, np.int16))
    late = aligner.next_unit()
    assert late is not None and late.index == 5 and late.video is not None
    assert late.video.audio_index == 4
    assert late.pts == 5 * 1280 and late.time_base == Fraction(1, 16_000)
    # a frame for a future audio frame waits for it
    video.push(VideoUnitFrame(7, 3, Fraction(1, 90_000), img))
    audio.write(np.zeros(1280 * 2, np.int16))
    six, seven = aligner.next_unit(), aligner.next_unit()
    assert six is not None and six.video is None
    assert seven is not None and seven.video is not None and seven.video.pts == 3
