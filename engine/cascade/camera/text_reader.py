"""Text in a camera picture: the PP-OCR models that ship inside the ``rapidocr`` package
(text detection and recognition, ONNX on onnxruntime; Apache-2.0), read in lines.

:class:`TextReader` is synchronous and blocking (about 0.3 s a 448 x 336 picture on two
cores): the cascade runs it on its eyes worker, only for a turn whose words ask to read or
look, under a time bound (:mod:`omnicall.engine.cascade.camera.sight`). The models are the
package's own files, named by path, so nothing is ever downloaded at run time (the package
would fetch a missing model from the network); a missing file is :class:`ModelMissing`.

A read picture becomes :class:`TextLine` objects, top to bottom then left to right, each
with the recogniser's confidence (0..1); lines below ``min_confidence`` or with no letter or
digit are left out.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from omnicall.engine.bundled_models import ModelMissing
from omnicall.media.video_ring import RgbImage

logger = logging.getLogger(__name__)

#: the package's own models (PP-OCRv6 small detection and recognition; the recogniser
#: carries its character list)
DET_MODEL = "PP-OCRv6_det_small.onnx"
REC_MODEL = "PP-OCRv6_rec_small.onnx"
DET_MAX_SIDE_PX = 960
#: lines whose centres are within this share of the picture's height count as one row
ROW_TOLERANCE = 0.04


@dataclass(frozen=True, slots=True)
class TextLine:
    """One line of text read in a picture, where it is (its box's centre, 0..1 of the
    picture's width and height) and how sure the recogniser is (0..1)."""

    text: str
    confidence: float
    x: float
    y: float


def models_dir() -> Path:
    """The ``rapidocr`` package's model folder."""
    spec = importlib.util.find_spec("rapidocr")
    if spec is None or spec.origin is None:
        raise ModelMissing("the text reader needs the `rapidocr` package "
                           "(pip install 'rapidocr>=3.10,<4')")
    return Path(spec.origin).parent / "models"


class TextReader:
    """The OCR models, loaded once (see the module docstring)."""

    def __init__(self, threads: int = 2, min_confidence: float = 0.6) -> None:
        folder = models_dir()
        det, rec = folder / DET_MODEL, folder / REC_MODEL
        for path in (det, rec):
            if not path.is_file():
                raise ModelMissing(f"the text reader's model {path} is missing (a rapidocr "
                                   "release without its models?)")
        from rapidocr import RapidOCR

        # its own logger warns of every picture without text: errors only
        logging.getLogger("RapidOCR").setLevel(logging.ERROR)
        self.min_confidence = min_confidence
        self._ocr = RapidOCR(params={
            "Global.log_level": "error",
            "Global.use_cls": False,  # a label held upside down is rare; saves ~10 %
            "Det.model_path": str(det),
            # the picture at its own size (at most DET_MAX_SIDE_PX), not enlarged to a 736 px
            # short side: a label held up reads the same, in a third of the time
            "Det.limit_type": "max",
            "Det.limit_side_len": DET_MAX_SIDE_PX,
            "Rec.model_path": str(rec),
            "EngineConfig.onnxruntime.intra_op_num_threads": threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        })

    def read(self, image: RgbImage) -> tuple[TextLine, ...]:
        """The lines of text in ``image`` (H x W x 3 RGB), in reading order."""
        height, width = image.shape[:2]
        bgr = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2BGR)
        out: Any = self._ocr(bgr)
        if out.txts is None or out.boxes is None or out.scores is None:
            return ()
        lines = []
        for text, score, box in zip(out.txts, out.scores, out.boxes, strict=True):
            text = " ".join(str(text).split())
            if float(score) < self.min_confidence or not any(c.isalnum() for c in text):
                continue
            corners = np.asarray(box, np.float32).reshape(-1, 2)
            x, y = corners.mean(axis=0)
            lines.append(TextLine(text, float(score), float(x) / width, float(y) / height))
        return in_reading_order(lines)


def in_reading_order(lines: list[TextLine]) -> tuple[TextLine, ...]:
    """Top to bottom; lines whose centres are within :data:`ROW_TOLERANCE` of each other's
    height count as one row, read left to right."""
    rows: list[list[TextLine]] = []
    for line in sorted(lines, key=lambda t: t.y):
        if rows and abs(rows[-1][0].y - line.y) <= ROW_TOLERANCE:
            rows[-1].append(line)
        else:
            rows.append([line])
    return tuple(t for row in rows for t in sorted(row, key=lambda t: t.x))
