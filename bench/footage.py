"""Camera footage for the benches: a real photograph (``tests/data/astronaut.jpg``, NASA,
public domain: a person) seen through a moving camera, as a webcam or a phone shows it.

- :class:`HandHeldPhoto`: the footage itself, frame by frame at any time ``t`` (hand tremor
  and drift, or a desk camera's slow shift; exposure drift and steps; sensor noise; an
  object brought into view during turns that ask to look);
- :class:`FootageTrack`: that footage as an aiortc camera track at the page's send rate and
  size (640 x 480, 5 fps: ``web/client/omnicall.js``), what ``bench/voice_to_voice.py`` sends;
- :func:`write_y4m`: the same footage as a Y4M file for Chromium's fake camera
  (``bench/page_v2v.py``).

Frames are made once, ahead (a loop of ``loop_s`` that plays forwards then backwards, so it
has no jump), so the client spends no CPU of the machine under test on drawing them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import av
import cv2
import numpy as np
import numpy.typing as npt

from omnicall.media.timebase import VIDEO_TIME_BASE
from tests.utils import PacedVideoTrack

PHOTO = Path(__file__).resolve().parent.parent / "tests" / "data" / "astronaut.jpg"
SEND_FPS = 5  # the page's maxFramerate (web/client/omnicall.js)
PAGE_SIZE = (640, 480)  # the page's camera (web/client/omnicall.js, modes call and kiosk)
LOOK = "What am I holding in my hand?"

Rgb = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class Turn:
    start_s: float
    end_s: float
    words: str

    @property
    def looks(self) -> bool:
        return self.words == LOOK



class HandHeldPhoto:
    """Camera-like footage from a real photo (see the module docstring)."""

    def __init__(self, turns: list[Turn], seconds: float, seed: int,
                 hand_held: bool = True) -> None:
        self.hand_held = hand_held
        photo = cv2.cvtColor(cv2.imread(str(PHOTO)), cv2.COLOR_BGR2RGB)
        self.scene = np.asarray(cv2.resize(photo, (800, 800), interpolation=cv2.INTER_CUBIC))
        patch = photo[300:460, 20:180]  # the suit's badges and the flag: a held object
        self.object = np.ascontiguousarray(np.rot90(patch))
        yy, xx = np.mgrid[:160, :160]
        self.mask = ((yy - 80) ** 2 + (xx - 80) ** 2 <= 78 ** 2)[..., None]
        self.rng = np.random.default_rng(seed + 1)
        self.turns = turns
        self.phases = self.rng.uniform(0, 2 * math.pi, 6)
        quiet = [(a.end_s, b.start_s) for a, b in itertools.pairwise(turns)]
        longest = sorted(quiet, key=lambda q: q[1] - q[0], reverse=True)[:2]
        self.reaims = sorted(a + (b - a) / 2 for a, b in longest)  # the camera re-aimed
        self.exposure_steps = (seconds * 0.35, seconds * 0.8)

    def offset(self, t: float) -> tuple[float, float, float]:
        p = self.phases
        if not self.hand_held:  # on a stand: only the caller shifting in the chair
            return (4 * math.sin(2 * math.pi * t / 8 + p[4]),
                    2 * math.sin(2 * math.pi * t / 11 + p[5]), 0.0)
        tremor_x = 2.5 * math.sin(2 * math.pi * 3.1 * t + p[0]) + 1.5 * math.sin(
            2 * math.pi * 7.3 * t + p[1])
        tremor_y = 2.0 * math.sin(2 * math.pi * 2.3 * t + p[2]) + 1.2 * math.sin(
            2 * math.pi * 5.9 * t + p[3])
        drift_x = 12 * math.sin(2 * math.pi * t / 23 + p[4])
        drift_y = 8 * math.sin(2 * math.pi * t / 31 + p[5])
        reaim = sum(50 * min(1.0, max(0.0, t - at)) * (-1) ** i
                    for i, at in enumerate(self.reaims))
        angle = 0.3 * math.sin(2 * math.pi * 1.7 * t + p[0])
        return tremor_x + drift_x + reaim, tremor_y + drift_y, angle

    def frame(self, t: float) -> Rgb:
        dx, dy, angle = self.offset(t)
        matrix = cv2.getRotationMatrix2D((400, 400), angle, 1.0)
        matrix[:, 2] += (-80 - dx, -160 - dy)  # the 640 x 480 window, moved
        view = cv2.warpAffine(self.scene, matrix, (640, 480), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_REFLECT)
        held = self._held(t)
        if held is not None:
            x, y = held
            roi = view[y:y + 160, x:x + 160]
            view[y:y + 160, x:x + 160] = np.where(self.mask[:roi.shape[0], :roi.shape[1]],
                                                  self.object[:roi.shape[0], :roi.shape[1]],
                                                  roi)
        gain = 1 + 0.06 * math.sin(2 * math.pi * t / 40) + sum(
            0.05 for at in self.exposure_steps if t >= at)
        noisy = view.astype(np.float32) * gain + self.rng.normal(0, 4, view.shape)
        return np.clip(noisy, 0, 255).astype(np.uint8)

    def _held(self, t: float) -> tuple[int, int] | None:
        """Where the object is: it comes in from the right 1 s into a turn that asks to look
        (in 0.8 s), is held (with the hand's own shake) and leaves 1.5 s after the turn."""
        for turn in self.turns:
            if turn.looks and turn.start_s + 1.0 <= t < turn.end_s + 2.3:
                come = min(1.0, (t - turn.start_s - 1.0) / 0.8)
                go = min(1.0, max(0.0, (t - turn.end_s - 1.5) / 0.8))
                x = 640 - int(360 * come) + int(360 * go) + int(3 * math.sin(9 * t))
                y = 250 + int(3 * math.cos(7 * t))
                return (x, y) if x < 640 else None
        return None


def footage_frames(seconds: float, fps: float = SEND_FPS, seed: int = 7,
                   hand_held: bool = True) -> list[Rgb]:
    """``seconds`` of :class:`HandHeldPhoto` footage (no held object) at ``fps``."""
    footage = HandHeldPhoto([], seconds, seed, hand_held)
    return [footage.frame(k / fps) for k in range(max(1, round(seconds * fps)))]


class FootageTrack(PacedVideoTrack):
    """A camera track: moving footage of a person at the page's rate and size, looped
    forwards and backwards (made once, ahead: see the module docstring)."""

    def __init__(self, fps: float = SEND_FPS, loop_s: float = 8.0, seed: int = 7) -> None:
        super().__init__(fps)
        images = footage_frames(loop_s, fps, seed)
        self._frames = [av.VideoFrame.from_ndarray(image, format="rgb24").reformat(
            format="yuv420p") for image in images]
        self._order = list(range(len(images))) + list(range(len(images) - 2, 0, -1))

    def frame(self, n: int) -> av.VideoFrame:
        made = self._frames[self._order[n % len(self._order)]]
        out = av.VideoFrame.from_ndarray(made.to_ndarray(), format="yuv420p")
        out.pts = round(n * 90_000 / self.fps)
        out.time_base = VIDEO_TIME_BASE
        return out


def write_y4m(path: Path, seconds: float = 8.0, fps: int = 10, seed: int = 7) -> Path:
    """The footage as a Y4M file (640 x 480 at ``fps``, forwards then backwards: Chromium's
    fake camera loops it without a jump)."""
    images = footage_frames(seconds, fps, seed)
    order = [*images, *images[-2:0:-1]]
    width, height = PAGE_SIZE
    with path.open("wb") as out:
        out.write(f"YUV4MPEG2 W{width} H{height} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for image in order:
            yuv = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2YUV_I420)
            out.write(b"FRAME\n")
            out.write(yuv.tobytes())
    return path
