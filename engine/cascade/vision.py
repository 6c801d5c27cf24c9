"""Visual context for the Thinker: compact facts from sampled frames (bundled OpenCV Haar
cascades), computed off the critical path."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from omnicall.engine.bundled_models import ModelMissing
from omnicall.media.video_ring import RgbImage


class FaceFacts:
    def __init__(self) -> None:
        data = getattr(cv2, "data", None)
        path = Path(data.haarcascades) / "haarcascade_frontalface_default.xml" if data else None
        if path is None or not path.exists():
            raise ModelMissing("OpenCV's Haar cascades are missing: install "
                               "`opencv-python-headless<5` (5.x ships none)")
        self._faces = cv2.CascadeClassifier(str(path))

    def describe(self, image: RgbImage) -> str:
        """One short sentence about what the camera shows."""
        gray = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)
        mean = float(gray.mean())
        if mean < 12:
            return "the camera image is dark (camera covered or off)."
        width = gray.shape[1]
        faces = self._faces.detectMultiScale(gray, scaleFactor=1.2, minNeighbors=5,
                                             minSize=(width // 12, width // 12))
        light = "dim" if mean < 60 else "bright" if mean > 190 else "normally lit"
        if len(faces) == 0:
            return f"no face is visible; the scene is {light}."
        if len(faces) == 1:
            x, _, w, _ = faces[0]
            centre = (x + w / 2) / width
            where = "left" if centre < 0.35 else "right" if centre > 0.65 else "centre"
            return f"one person is facing the camera, at the {where}; the scene is {light}."
        return f"{len(faces)} people are facing the camera; the scene is {light}."
