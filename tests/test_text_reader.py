"""The text reader: the PP-OCR models inside the rapidocr package, on drawn labels held up
to the camera (a slight tilt, sensor noise), read offline."""

from __future__ import annotations

import numpy as np
import pytest

from omnicall.engine.cascade.camera.text_reader import (
    DET_MODEL,
    REC_MODEL,
    TextLine,
    TextReader,
    in_reading_order,
    models_dir,
)
from tests.scenes import LABELS, WALLS, hold_label, wall


@pytest.fixture(scope="module")
def reader() -> TextReader:
    return TextReader()


def test_the_models_ship_inside_the_package() -> None:
    for name in (DET_MODEL, REC_MODEL):
        assert (models_dir() / name).stat().st_size > 1_000_000


def test_a_two_line_label_is_read_in_order(reader: TextReader) -> None:
    scene = hold_label(wall(WALLS["grey"], 5), ("ORGANIC MILK", "Best before 12/05"), 5)
    lines = reader.read(scene)
    assert [line.text for line in lines] == ["ORGANIC MILK", "Best before 12/05"]
    assert all(0.6 <= line.confidence <= 1.0 for line in lines)
    assert all(0.2 < line.x < 0.8 and 0.2 < line.y < 0.8 for line in lines)
    assert lines[0].y < lines[1].y


@pytest.mark.parametrize("lines", LABELS[1:5])
def test_labels_on_other_walls_are_read(reader: TextReader, lines: tuple[str, ...]) -> None:
    scene = hold_label(wall(WALLS["blue"], 9), lines, 9)
    assert tuple(line.text for line in reader.read(scene)) == lines


def test_a_plain_wall_has_no_text(reader: TextReader) -> None:
    assert reader.read(wall(WALLS["white"], 2)) == ()
    assert reader.read(np.zeros((336, 448, 3), np.uint8)) == ()


def test_unsure_lines_are_left_out() -> None:
    strict = TextReader(min_confidence=1.01)
    scene = hold_label(wall(WALLS["grey"], 5), ("EXIT",), 5)
    assert strict.read(scene) == ()


def test_reading_order_is_rows_top_down_then_left_to_right() -> None:
    lines = [TextLine("b", 1, 0.7, 0.31), TextLine("c", 1, 0.2, 0.6),
             TextLine("a", 1, 0.2, 0.3)]
    assert [t.text for t in in_reading_order(lines)] == ["a", "b", "c"]
