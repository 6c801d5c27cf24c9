"""Who the assistant is talking to: the person in front of the camera whose mouth moves while
the microphone hears speech.

A kiosk in a hall hears everyone near it; the caller is the one facing it. Each camera frame
(the page sends ~5 a second) goes to :class:`MouthWatch` with the face the look finds (the
largest frontal face: the nearest person turned to the camera). Against the previous frame it
measures how much the mouth changed beyond what the rest of the face did: each region of the
previous frame (the mouth; the eyes and brow) is found again in the new one by template
matching over small shifts (head motion, a shaky camera), and what no shift explains (1 - the
best normalised correlation) is the region's change. A talking mouth opens and closes; a
silent face, however it moves, changes about as much at the mouth as at the eyes. The mouth's
change beyond the eyes' at :data:`MOVING_FROM` or more is a frame that moved.

:class:`Addressee` keeps the call's last glimpses (bounded) and tells, for a span of speech,
whether the engaged person was talking in it: some frames in the span had a face whose mouth
moved (at least :data:`MIN_MOVING`, and :data:`MOVING_SHARE` of those compared). Speech while
no face talks (someone off camera, a person passing behind, a TV) is not theirs. With no
frames in the span (no camera, or it stopped) it cannot tell (None), and the caller's engine
answers as it would without it.

The modes (``--addressee``), one of :data:`ADDRESSEES`: ``any`` (every voice is the caller),
``camera`` (the engaged person, above), ``wake`` (a wake phrase opens the conversation:
:mod:`~omnicall.engine.conversation.wake`); ``auto`` is ``wake`` when a phrase is set, else
``any`` (the app picks ``camera`` for the kiosk page with a camera).

Pure and synchronous: frames, faces and times are passed in (seconds on the call's clock).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from omnicall.engine.conversation.settings import ADDRESSEES

#: the mouth's change beyond the eyes' (1 - normalised correlation, after the best shift) from
#: which a frame's mouth moved: a still face stays under ~0.01 at the page's 5 fps through
#: sensor noise, a hand-held camera and VP8; an opening mouth is ~0.03-0.2
MOVING_FROM = 0.02
#: a span of speech was the engaged person's when this many compared frames had a moving mouth
#: and at least this share of them (a talker's mouth is still between some frames)
MIN_MOVING = 1
MOVING_SHARE = 0.25
#: frames kept (30 s at the page's 5 fps): the longest turn's, and then some
GLIMPSES_KEPT = 150
#: a frame this long after the span still shows its end (frames and audio arrive apart)
LATE_S = 0.2
#: the same face in the next frame: its centre moved less than this share of its width, and
#: its width changed less than this share
SAME_FACE_MOVE = 0.5
SAME_FACE_SIZE = 0.25
#: the regions compared, in face widths from the face's centre (x0, y0, x1, y1); the shift
#: searched is SEARCH face widths each way
MOUTH = (-0.25, 0.12, 0.25, 0.45)
EYES = (-0.35, -0.30, 0.35, -0.02)
SEARCH = 0.12
#: faces narrower than this (pixels) are too far for their mouth to be seen
MIN_FACE_PX = 40

Grey = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class FaceBox:
    """A face in a frame, in pixels: its centre and width (the detector's square)."""

    cx: float
    cy: float
    width: float


@dataclass(frozen=True, slots=True)
class Glimpse:
    """One camera frame as the addressee sees it: when (``at_s``), whether a face was in it,
    and how much its mouth moved beyond the rest of it since the frame before (None: nothing
    to compare with: the first frame of a face, or no face)."""

    at_s: float
    face: bool
    mouth_change: float | None = None

    @property
    def moving(self) -> bool:
        return self.mouth_change is not None and self.mouth_change >= MOVING_FROM


def region_change(before: Grey, after: Grey, face: FaceBox,
                  region: tuple[float, float, float, float]) -> float | None:
    """How much ``region`` of ``face`` in ``before`` changed in ``after``: 1 - the best
    normalised correlation of it over shifts of up to :data:`SEARCH` face widths (None: the
    region is cut by the frame's edge)."""
    w = face.width
    x0, y0, x1, y1 = (round(face.cx + region[0] * w), round(face.cy + region[1] * w),
                      round(face.cx + region[2] * w), round(face.cy + region[3] * w))
    pad = round(SEARCH * w)
    height, width = before.shape
    if x0 - pad < 0 or y0 - pad < 0 or x1 + pad > width or y1 + pad > height:
        return None
    template = before[y0:y1, x0:x1].astype(np.float32)
    if float(template.std()) < 1.0:  # a flat patch: nothing to match
        return None
    search = after[y0 - pad:y1 + pad, x0 - pad:x1 + pad].astype(np.float32)
    scores = cv2.matchTemplate(search, template, cv2.TM_CCOEFF_NORMED)
    return float(max(0.0, 1.0 - float(scores.max())))


class MouthWatch:
    """One camera's frames, one after the other: each gives a :class:`Glimpse` (see the
    module docstring)."""

    def __init__(self) -> None:
        self._last: tuple[Grey, FaceBox] | None = None

    def see(self, grey: Grey, face: FaceBox | None, at_s: float) -> Glimpse:
        """Frame ``grey`` (the whole frame, grey levels) taken at ``at_s`` with the engaged
        ``face`` in it (None: no face turned to the camera)."""
        if face is None or face.width < MIN_FACE_PX:
            self._last = None
            return Glimpse(at_s, face=face is not None)
        last, self._last = self._last, (grey, face)
        if last is None or last[0].shape != grey.shape or not _same_face(last[1], face):
            return Glimpse(at_s, face=True)
        before, box = last
        mouth = region_change(before, grey, box, MOUTH)
        eyes = region_change(before, grey, box, EYES)
        if mouth is None or eyes is None:
            return Glimpse(at_s, face=True)
        return Glimpse(at_s, face=True, mouth_change=max(0.0, mouth - eyes))


def _same_face(a: FaceBox, b: FaceBox) -> bool:
    return (abs(a.cx - b.cx) + abs(a.cy - b.cy) < SAME_FACE_MOVE * a.width
            and abs(a.width - b.width) < SAME_FACE_SIZE * a.width)


def engaged_face(faces: list[FaceBox]) -> FaceBox | None:
    """The face of the person the assistant talks with: the largest (the nearest) of those
    turned to the camera."""
    return max(faces, key=lambda f: f.width, default=None)


class Addressee:
    """One call's glimpses and the verdict on a span of speech (see the module docstring)."""

    def __init__(self, mode: str = "auto") -> None:
        if mode not in ADDRESSEES:
            raise ValueError(f"addressee {mode!r}: use one of {', '.join(ADDRESSEES)}")
        self.mode = mode
        self.glimpses: deque[Glimpse] = deque(maxlen=GLIMPSES_KEPT)  # oldest dropped
        self.turn_started_s = float("-inf")
        self.not_addressed = 0  # turns taken for someone else's (no engaged face talking)
        self.bystander_interruptions = 0  # words over a reply from no engaged face

    @property
    def camera(self) -> bool:
        return self.mode == "camera"

    def add(self, glimpse: Glimpse) -> None:
        self.glimpses.append(glimpse)

    def talking(self, start_s: float, end_s: float) -> bool | None:
        """Whether the engaged person talked between ``start_s`` and ``end_s``: True, False,
        or None (no camera frames then: it cannot tell)."""
        seen = [g for g in self.glimpses if start_s <= g.at_s <= end_s + LATE_S]
        if not seen:
            return None
        compared = [g for g in seen if g.mouth_change is not None]
        moving = sum(g.moving for g in compared)
        return moving >= MIN_MOVING and moving >= MOVING_SHARE * len(compared)

    def addressed(self, start_s: float, end_s: float) -> bool:
        """Whether speech between ``start_s`` and ``end_s`` is for the assistant as far as the
        camera tells (always, unless the mode is ``camera`` and frames show no face talking)."""
        return not self.camera or self.talking(start_s, end_s) is not False
