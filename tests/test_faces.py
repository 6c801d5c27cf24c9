from pathlib import Path

import numpy as np

from omnicall.engine.cascade.camera.faces import FaceFacts


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


def test_people_are_counted_placed_and_told_near_or_far() -> None:
    from tests.scenes import WALLS, add_person, wall

    faces = FaceFacts()
    one_near = faces.faces(add_person(wall(WALLS["grey"], 1), 20, 260))
    assert len(one_near) == 1 and one_near[0].where == "left" and one_near[0].distance == "near"
    one_far = faces.faces(add_person(wall(WALLS["white"], 2), 300, 110))
    assert len(one_far) == 1 and one_far[0].where == "right" and one_far[0].distance == "far"
    two = faces.faces(add_person(add_person(wall(WALLS["blue"], 3), 10, 190), 260, 180))
    assert [f.where for f in two] == ["left", "right"]
    assert all(0.5 <= f.confidence <= 1.0 for f in two)
    assert faces.faces(wall(WALLS["blue"], 4)) == ()


def test_a_face_less_sure_than_the_threshold_is_not_counted() -> None:
    from tests.scenes import WALLS, add_person, wall

    scene = add_person(wall(WALLS["white"], 2), 300, 110)  # far: fewer detections
    assert len(FaceFacts(min_confidence=0.5).faces(scene)) == 1
    assert FaceFacts(min_confidence=1.01).faces(scene) == ()
