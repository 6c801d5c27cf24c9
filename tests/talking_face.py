"""Camera footage of a face that talks, or does not, for the addressee's tests and bench.

The face is a real photograph's (``tests/data/astronaut.jpg``, NASA, public domain) at kiosk
distance (a face ~140 px wide in the page's 640 x 480), seen by a camera on a stand that moves a
little (the person shifting) with sensor noise. Its mouth opens with the loudness of the speech
it says: the lower lip and jaw drop by up to :data:`MAX_OPEN` of the face's width over a dark
gap, as a talking mouth does, frame by frame from the speech's envelope. ``facing=False``
shows the same scene with the face out of view (someone off camera, or turned away: no face
turned to the camera).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

from omnicall.media.timebase import VIDEO_TIME_BASE
from omnicall.media.video_ring import RgbImage, VideoUnitFrame
from tests.utils import PacedVideoTrack

PHOTO = Path(__file__).resolve().parent / "data" / "astronaut.jpg"
SCALE = 1.5  # the photo's 512 px to 768: the face ~140 px wide
FACE = (224 * SCALE, 115 * SCALE, 95 * SCALE)  # its centre and width in the scaled photo
MAX_OPEN = 0.14  # the widest mouth opening, in face widths
FPS = 5  # the page's camera rate
UNIT_S = 0.08

Envelope = Callable[[float], float]


def envelope_of(speech16k: np.ndarray, loud: float = 3000.0) -> Envelope:
    """How open the mouth is (0..1) at ``t`` seconds into ``speech16k``: its loudness over
    the 40 ms around ``t``."""
    audio = speech16k.astype(np.float32)

    def openness(t: float) -> float:
        at = int(t * 16_000)
        window = audio[max(0, at - 320):at + 320]
        if not len(window):
            return 0.0
        return float(min(1.0, np.sqrt(np.mean(window ** 2)) / loud))
    return openness


def silent(t: float) -> float:
    return 0.0


class TalkingFace:
    """The footage (see the module docstring): :meth:`frame` at any ``t``."""

    def __init__(self, envelope: Envelope = silent, facing: bool = True, seed: int = 1) -> None:
        photo = cv2.cvtColor(cv2.imread(str(PHOTO)), cv2.COLOR_BGR2RGB)
        self.scene = np.asarray(cv2.resize(photo, (768, 768), interpolation=cv2.INTER_CUBIC))
        self.envelope = envelope
        self.facing = facing
        rng = np.random.default_rng(seed)
        #: the sensor's noise: a few fields drawn once, one per frame in turn (cheap frames)
        self.noise = [rng.normal(0, 4, (480, 640, 3)).astype(np.float32) for _ in range(5)]
        self._frames = 0

    def frame(self, t: float, openness: float | None = None) -> RgbImage:
        """The frame at ``t`` seconds (the mouth as open as the envelope says at ``t``, or
        ``openness``)."""
        image = self._mouth(self.scene.copy(), self.envelope(t) if openness is None
                            else openness)
        cx, cy, _ = FACE
        dx = 4 * math.sin(2 * math.pi * t / 8) + 1.5 * math.sin(2 * math.pi * 3.1 * t)
        dy = 2 * math.sin(2 * math.pi * t / 11) + 1.2 * math.sin(2 * math.pi * 2.3 * t)
        left, top = cx - 320 + dx, cy - 170 + dy
        if not self.facing:  # the camera sees the suit and the room, not the face
            top += 300
        matrix = np.float32([[1, 0, -left], [0, 1, -top]])
        view = cv2.warpAffine(image, matrix, (640, 480), borderMode=cv2.BORDER_REFLECT)
        self._frames += 1
        noisy = view.astype(np.float32) + self.noise[self._frames % len(self.noise)]
        return np.clip(noisy, 0, 255).astype(np.uint8)

    @staticmethod
    def _mouth(image: np.ndarray, openness: float) -> np.ndarray:
        cx, cy, width = FACE
        drop = round(openness * MAX_OPEN * width)
        if drop <= 0:
            return image
        lip, chin = int(cy + 0.31 * width), int(cy + 0.75 * width)
        x0, x1 = int(cx - 0.30 * width), int(cx + 0.30 * width)
        lower = image[lip:chin, x0:x1].copy()
        image[lip + drop:chin + drop, x0:x1] = lower
        gap = image[lip:lip + drop, x0:x1]
        xx = np.arange(x0, x1)[None, :].repeat(drop, 0)
        inside = ((xx - cx) / (0.17 * width)) ** 2 <= 1  # the open mouth, dark
        gap[inside] = (50, 20, 25)
        gap[~inside] = image[lip - 1:lip, x0:x1].repeat(drop, 0)[~inside]  # the cheeks
        return image


def camera_units(footage: TalkingFace, first_index: int = 0
                 ) -> Callable[[int], VideoUnitFrame | None]:
    """For ``tests.utils.feed_units``: unit ``index``'s camera frame at the page's 5 fps (a
    frame with every unit in which one is due), ``footage`` at the unit's time since unit
    ``first_index`` (where the footage's speech starts)."""
    def video(index: int) -> VideoUnitFrame | None:
        t = (index - first_index) * UNIT_S
        if index > first_index and math.floor(t * FPS) == math.floor((t - UNIT_S) * FPS):
            return None
        return VideoUnitFrame(index, round(index * UNIT_S * 90_000), Fraction(1, 90_000),
                              footage.frame(t))
    return video


def write_y4m(path: Path, footage: TalkingFace, seconds: float, fps: int = 15) -> Path:
    """``seconds`` of ``footage`` as a Y4M file (640 x 480) for Chromium's fake camera, which
    starts it with the fake microphone's file (and loops it)."""
    with path.open("wb") as out:
        out.write(f"YUV4MPEG2 W640 H480 F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for k in range(round(seconds * fps)):
            yuv = cv2.cvtColor(footage.frame(k / fps), cv2.COLOR_RGB2YUV_I420)
            out.write(b"FRAME\n")
            out.write(yuv.tobytes())
    return path


def face_for_wav(path: Path, text: str, talking: bool, lead_s: float = 1.0,
                 tail_s: float = 0.5) -> Path:
    """The camera file for ``tests.chromium.question_wav(text)`` (the same lead and tail):
    the face says the question with it (``talking``), or stays still while it is heard."""
    from tests.utils import piper_speech

    speech = piper_speech(text, lead_s=lead_s, tail_s=tail_s)
    footage = TalkingFace(envelope_of(speech) if talking else silent)
    return write_y4m(path, footage, len(speech) / 16_000)


class FaceCamera(PacedVideoTrack):
    """A live camera track of :class:`TalkingFace` at the page's rate and size: each frame's
    mouth as open as ``openness()`` says when it is made (what the person says now)."""

    def __init__(self, openness: Callable[[], float], facing: Callable[[], bool] = lambda: True,
                 fps: float = FPS) -> None:
        super().__init__(fps)
        self.openness = openness
        self.facing = facing
        self.footage = TalkingFace()

    def frame(self, n: int) -> av.VideoFrame:
        self.footage.facing = self.facing()
        image = self.footage.frame(n / self.fps, self.openness())
        out = av.VideoFrame.from_ndarray(image, format="rgb24")
        out.pts = round(n * 90_000 / self.fps)
        out.time_base = VIDEO_TIME_BASE
        return out
