"""People in a camera picture: faces found by OpenCV's bundled Haar cascade (frontal faces),
how many, where (left, centre, right) and how near (a face's width against the picture's).

Pure and synchronous (a few milliseconds a 448 x 336 picture); the cascade runs it on its
eyes worker (:mod:`omnicall.engine.cascade.camera.sight`). A face's confidence grows with the number
of overlapping detections the cascade merged into it, against what a face of its size gets;
only faces turned towards the camera are found, so "no face" is said as "no one facing the
camera".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from omnicall.engine.bundled_models import ModelMissing
from omnicall.engine.conversation.addressee import FaceBox, Glimpse, MouthWatch, engaged_face
from omnicall.media.video_ring import RgbImage

#: merged detections for a face to count at all; full confidence takes at least
#: SURE_NEIGHBOURS, or one for every NEIGHBOUR_PER_PX pixels of the face's width (a large
#: face is found at many more scales and places than a small one: few detections at a
#: large size are a pattern on a shirt, not a face)
MIN_NEIGHBOURS = 5
SURE_NEIGHBOURS = 6
NEIGHBOUR_PER_PX = 4
#: a face this wide (share of the picture's width) or wider is near the camera; narrower
#: than FAR_BELOW it is further back (a face 60 cm away fills ~0.2 of a webcam's width;
#: 1.4 m away, ~0.1)
NEAR_FROM = 0.16
FAR_BELOW = 0.10
#: the body under a face, in its widths: sideways either way, and down
BODY_WIDTHS = 1.5
BODY_HEIGHTS = 3.0
DARK_BELOW = 12  # mean grey level of a covered or switched-off camera
#: the addressee's frames are searched for faces at this share of their size
WATCH_SCALE = 0.4


@dataclass(frozen=True, slots=True)
class Face:
    """A face: its centre (0..1 of the width and height), its width (share of the picture's
    width) and the detector's confidence (0..1)."""

    x: float
    y: float
    width: float
    confidence: float

    @property
    def where(self) -> str:
        return "left" if self.x < 0.35 else "right" if self.x > 0.65 else "centre"

    @property
    def distance(self) -> str:
        return "near" if self.width >= NEAR_FROM else "far" if self.width < FAR_BELOW \
            else "middle"


def _off_bodies(faces: list[Face]) -> list[Face]:
    """Faces (surest first) less those on the body of a surer one: below it, within
    :data:`BODY_WIDTHS` of its width sideways and :data:`BODY_HEIGHTS` down (a badge or a
    pattern on a shirt found as a face)."""
    kept: list[Face] = []
    for face in faces:
        on_body = any(abs(face.x - k.x) < BODY_WIDTHS * k.width
                      and 0 < face.y - k.y < BODY_HEIGHTS * k.width for k in kept)
        if not on_body:
            kept.append(face)
    return kept


class FaceFacts:
    """The face detector (see the module docstring)."""

    def __init__(self, min_confidence: float = 0.5) -> None:
        self.min_confidence = min_confidence  # a face less sure is not counted
        data = getattr(cv2, "data", None)
        path = Path(data.haarcascades) / "haarcascade_frontalface_default.xml" if data else None
        if path is None or not path.exists():
            raise ModelMissing("OpenCV's Haar cascades are missing: install "
                               "`opencv-python-headless<5` (5.x ships none)")
        self._faces = cv2.CascadeClassifier(str(path))

    def faces(self, image: RgbImage, step: float = 1.1) -> tuple[Face, ...]:
        """The faces turned towards the camera (at ``min_confidence`` or more), left to
        right; ``step``: the detector's scale step (1.2: about half the work, faces still
        found, their size a little coarser)."""
        gray = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)
        height, width = gray.shape
        rects, neighbours = self._faces.detectMultiScale2(
            gray, scaleFactor=step, minNeighbors=MIN_NEIGHBOURS,
            minSize=(width // 16, width // 16))
        found = [Face(float(x + w / 2) / width, float(y + h / 2) / height,
                      float(w) / width,
                      min(1.0, int(n) / max(SURE_NEIGHBOURS, float(w) / NEIGHBOUR_PER_PX)))
                 for (x, y, w, h), n in zip(rects, neighbours, strict=True)]
        kept = _off_bodies(sorted(found, key=lambda f: (-f.confidence, -f.width)))
        return tuple(sorted((f for f in kept if f.confidence >= self.min_confidence),
                            key=lambda f: f.x))

    def boxes(self, image: RgbImage, scale: float = WATCH_SCALE) -> list[FaceBox]:
        """The faces turned towards the camera as boxes in ``image``'s pixels, for
        :mod:`~omnicall.engine.conversation.addressee`: found in a copy scaled by ``scale``
        with a coarser scale step (~8 ms a 640 x 480 frame here, against ~43 for the
        look's search; a face near a kiosk is still ~55 px wide)."""
        height, width = image.shape[:2]
        small: RgbImage = np.asarray(cv2.resize(
            np.ascontiguousarray(image), (int(width * scale), int(height * scale)),
            interpolation=cv2.INTER_AREA), np.uint8) if scale != 1 else image
        return [FaceBox(f.x * width, f.y * height, f.width * width)
                for f in self.faces(small, step=1.2)]

    def glimpse(self, image: RgbImage, watch: MouthWatch, at_s: float) -> Glimpse:
        """The addressee's look at a frame: the nearest face's mouth against the frame before
        (on a worker thread; a few milliseconds at the page's 640 x 480)."""
        grey = np.asarray(cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY), np.uint8)
        return watch.see(grey, engaged_face(self.boxes(image)), at_s)

    def describe(self, image: RgbImage) -> str:
        """One short sentence about who the camera shows and its light."""
        gray = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)
        mean = float(gray.mean())
        if mean < DARK_BELOW:
            return "the camera image is dark (camera covered or off)."
        faces = self.faces(image)
        light = "dim" if mean < 60 else "bright" if mean > 190 else "normally lit"
        if not faces:
            return f"no face is visible; the scene is {light}."
        if len(faces) == 1:
            return f"one person is facing the camera, at the {faces[0].where}; the scene is " \
                   f"{light}."
        return f"{len(faces)} people are facing the camera; the scene is {light}."
