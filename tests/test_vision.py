from pathlib import Path

import numpy as np

from omnicall.engine.cascade.vision import FaceFacts


def test_dark_and_empty_scenes() -> None:
    facts = FaceFacts()
    assert "dark" in facts.describe(np.zeros((336, 448, 3), np.uint8))
    gray = np.full((336, 448, 3), 128, np.uint8)
    assert "no face" in facts.describe(gray)


def test_a_real_face_is_found() -> None:
    import cv2

    path = Path(__file__).parent / "data" / "astronaut.jpg"
    image = cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)
    text = FaceFacts().describe(cv2.resize(image, (448, 336)))
    assert text.startswith("one person is facing the camera"), text
