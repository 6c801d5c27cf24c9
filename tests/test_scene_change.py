"""What changed between two looks, on drawn pictures: the picture went dark or lit again,
something new held up in the middle, the camera moved, people came."""

from __future__ import annotations

import numpy as np

from omnicall.engine.cascade.camera.faces import FaceFacts
from omnicall.engine.cascade.camera.scene_change import changes
from omnicall.engine.cascade.camera.sight import glance_of
from tests.scenes import OBJECT_COLOURS, WALLS, add_person, hold_object, wall


def glance(image: np.ndarray):  # type: ignore[no-untyped-def]
    return glance_of(image, FaceFacts().faces(image))


def test_the_first_look_has_nothing_to_compare() -> None:
    assert changes(None, glance(wall(WALLS["grey"], 1))) == ()


def test_the_same_scene_again_is_no_change() -> None:
    assert changes(glance(wall(WALLS["grey"], 1)), glance(wall(WALLS["grey"], 2))) == ()


def test_the_picture_went_dark_and_lit_again() -> None:
    lit, dark = glance(wall(WALLS["grey"], 1)), glance(np.full((336, 448, 3), 4, np.uint8))
    went = changes(lit, dark)
    assert len(went) == 1 and "went dark" in went[0].text and went[0].confidence > 0.9
    back = changes(dark, lit)
    assert len(back) == 1 and "lit again" in back[0].text


def test_something_new_in_the_middle_is_named_with_its_colour() -> None:
    before = glance(wall(WALLS["grey"], 1))
    after = glance(hold_object(wall(WALLS["grey"], 2), OBJECT_COLOURS["red"], 2))
    new = changes(before, after)
    assert len(new) == 1 and "new in the middle" in new[0].text
    assert new[0].text.startswith("something red is new") and new[0].confidence >= 0.5


def test_a_moved_camera_is_a_changed_view_not_something_new() -> None:
    scene = add_person(wall(WALLS["white"], 1), 150, 150)
    moved = np.roll(scene, 120, axis=1)
    changed = changes(glance(scene), glance(moved))
    assert not any("middle" in f.text for f in changed)


def test_a_person_who_came_is_told() -> None:
    before = glance(wall(WALLS["grey"], 1))
    after = glance(add_person(wall(WALLS["grey"], 1), 20, 260))
    assert any("1 more person" in f.text for f in changes(before, after))
    assert any("1 fewer person" in f.text for f in changes(after, before))
