"""The offline default's facts about a picture, with their confidences, and the note the
language model gets: on drawn camera pictures with known colours, words and people."""

from __future__ import annotations

import numpy as np

from omnicall.engine.cascade.camera.faces import Face, FaceFacts
from omnicall.engine.cascade.camera.sight import (
    Fact,
    Sight,
    look_at,
    note,
    people_facts,
    text_facts,
)
from omnicall.engine.cascade.camera.text_reader import TextLine
from tests.scenes import OBJECT_COLOURS, WALLS, add_person, hold_object, wall


def facts_of(image: np.ndarray) -> tuple[Fact, ...]:
    facts, _ = look_at(image, FaceFacts().faces(image))
    return facts


def test_a_held_object_and_the_wall_are_named() -> None:
    facts = facts_of(hold_object(wall(WALLS["grey"], 1), OBJECT_COLOURS["green"], 1))
    texts = [f.text for f in facts]
    assert "the thing in the middle is mostly green" in texts
    assert "the whole picture is mostly grey" in texts
    assert "no one is facing the camera" in texts
    assert all(0.0 <= f.confidence <= 1.0 for f in facts)


def test_a_plain_wall_is_said_to_look_like_the_rest() -> None:
    texts = [f.text for f in facts_of(wall(WALLS["blue"], 1))]
    assert "the middle of the picture is mostly blue, like the rest" in texts


def test_a_person_is_counted_with_where_and_how_near() -> None:
    facts = facts_of(add_person(wall(WALLS["grey"], 1), 20, 260))
    people = [f for f in facts if f.kind == "people"]
    assert [f.text for f in people] == ["one person is facing the camera, at the left, close "
                                        "to the camera"]


def test_a_dark_picture_says_only_that() -> None:
    facts = facts_of(np.full((336, 448, 3), 3, np.uint8))
    assert [f.kind for f in facts] == ["light"]


def test_facts_below_the_threshold_are_not_said() -> None:
    facts = (Fact("colour", "sure", 0.9), Fact("people", "unsure", 0.3))
    sight = Sight(facts, look_at(wall(WALLS["grey"], 1), ())[1])
    assert [f.text for f in sight.said(0.5)] == ["sure"]
    assert sight.of("people", 0.5) == () and len(sight.of("people", 0.2)) == 1


def test_several_people_and_text_become_one_fact_each() -> None:
    faces = (Face(0.2, 0.5, 0.2, 0.9), Face(0.8, 0.5, 0.05, 0.6))
    (people,) = people_facts(faces)
    assert people.text == "2 people are facing the camera: left (near), right (further back)"
    assert people.confidence == 0.6
    (text,) = text_facts((TextLine("EXIT", 0.97, 0.5, 0.4), TextLine("->", 0.8, 0.5, 0.6)))
    assert text.text == 'text reads "EXIT / ->"' and text.confidence == 0.8
    assert text_facts(()) == ()


def test_the_note_lists_the_facts_and_what_cannot_be_told() -> None:
    said = (Fact("colour", "the thing in the middle is mostly red", 0.9),
            Fact("text", 'text reads "EXIT"', 0.95))
    text = note(said)
    assert "- colour: the thing in the middle is mostly red" in text
    assert '- text: text reads "EXIT"' in text
    assert "cannot recognise" in text
    assert note(()) == ""
    assert "could be read in time" in note((), unread="slow")
